"""The W3C SPARQL 1.1 protocol and query-syntax suites, over HTTP against a real `semreg serve`.

One server serves the whole module: every graph the protocol tests declare is written into its data
directory before it starts (no two tests load different files into one graph; `write_graphs` checks).

Not applicable here, and reported as such rather than skipped: the protocol tests whose success needs
a SPARQL update. `/sparql` is read-only, so `test_protocol_update_refused` checks that their update
request gets 403 with the contract's sentence (their follow-up queries check the update's effect and
are not sent).
"""
from __future__ import annotations

import csv
import io

import httpx
import pyoxigraph as ox
import pytest
from support.paths import DATA
from support.server import ServerProcess
from support.w3c import HttpRequest, ProtocolTest, SyntaxTest, protocol_tests, syntax_tests, write_graphs

pytestmark = pytest.mark.process

SUITE = DATA / "sparql11-tests"
PROTOCOL = protocol_tests(SUITE / "protocol" / "manifest.ttl")
SYNTAX = syntax_tests(SUITE / "syntax-query" / "manifest.ttl")
READ_ONLY = "this endpoint is read-only; ontologies change through /v1/ontologies."

SOLUTION_FORMATS = {f.media_type.split(";")[0]: f for f in (
    ox.QueryResultsFormat.JSON, ox.QueryResultsFormat.XML, ox.QueryResultsFormat.CSV, ox.QueryResultsFormat.TSV)}
BOOLEAN_FORMATS = {"application/sparql-results+json": ox.QueryResultsFormat.JSON,
                   "application/sparql-results+xml": ox.QueryResultsFormat.XML}
RDF_FORMATS = {f.media_type: f for f in (ox.RdfFormat.TURTLE, ox.RdfFormat.N_TRIPLES, ox.RdfFormat.RDF_XML)}

# pyoxigraph accepts these queries' syntax but refuses to evaluate them, so the endpoint answers 400.
SYNTAX_XFAIL = {
    "syntax-select-expr-04.rq": "pyoxigraph's evaluator rejects the whole query with RuntimeError 'The custom function "
                                "<http://example/function> is not supported' instead of treating the call to an "
                                "unknown extension function as an expression error that leaves ?F unbound "
                                "(SPARQL 1.1 section 17.6); /sparql answers 400 'the query cannot be evaluated'",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("w3c-sparql")
    write_graphs(base / "data", PROTOCOL)
    process = ServerProcess(base / "data").start(base / "logs")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def send(http: httpx.Client, request: HttpRequest) -> httpx.Response:
    return http.request(request.method, request.path, headers=request.headers, content=request.body)


def check(request: HttpRequest, response: httpx.Response) -> None:
    assert response.status_code // 100 in request.status_classes, (response.status_code, response.text)
    media_type = response.headers.get("content-type", "").split(";")[0].strip()
    if request.expected_format == "boolean" or request.expected_boolean is not None:
        assert media_type in BOOLEAN_FORMATS, media_type
        answer = ox.parse_query_results(response.content, BOOLEAN_FORMATS[media_type])
        assert isinstance(answer, ox.QueryBoolean)
        if request.expected_boolean is not None:
            assert bool(answer) is request.expected_boolean
    elif request.expected_format == "tabular":
        assert media_type in SOLUTION_FORMATS, media_type
        if media_type == "text/csv":
            assert next(csv.reader(io.StringIO(response.text)))
        else:
            assert isinstance(ox.parse_query_results(response.content, SOLUTION_FORMATS[media_type]), ox.QuerySolutions)
    elif request.expected_format == "RDF":
        assert media_type in RDF_FORMATS, media_type
        list(ox.parse(response.content, RDF_FORMATS[media_type]))


@pytest.mark.parametrize("test", [t for t in PROTOCOL if not t.needs_update], ids=lambda t: t.name)
def test_protocol(http, test: ProtocolTest):
    for request in test.requests:
        check(request, send(http, request))


@pytest.mark.parametrize("test", [t for t in PROTOCOL if t.needs_update], ids=lambda t: t.name)
def test_protocol_update_refused(http, test: ProtocolTest):
    """Not applicable: the test needs SPARQL update, which this read-only endpoint refuses with 403."""
    update = next(r for r in test.requests if r.is_update)
    response = send(http, update)
    assert response.status_code == 403
    assert response.json() == {"error": READ_ONLY}


def test_the_suites_are_complete():
    assert len(PROTOCOL) == 34 and len(SYNTAX) == 94
    assert sum(t.needs_update for t in PROTOCOL) == 7
    assert sum(t.positive for t in SYNTAX) == 63


def _syntax_case(test: SyntaxTest):
    marks = [pytest.mark.xfail(strict=True, reason=SYNTAX_XFAIL[test.name])] if test.name in SYNTAX_XFAIL else []
    return pytest.param(test, id=("positive-" if test.positive else "negative-") + test.name, marks=marks)


@pytest.mark.parametrize("test", [_syntax_case(t) for t in SYNTAX])
def test_syntax(http, test: SyntaxTest):
    response = http.post("/sparql", content=test.path.read_bytes(),
                         headers={"content-type": "application/sparql-query"})
    if test.positive:
        assert response.status_code == 200, response.text
    else:
        assert response.status_code == 400, response.text
        assert response.json()["error"].startswith("the query is not valid SPARQL: ")
