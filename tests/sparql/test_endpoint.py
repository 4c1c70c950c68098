"""`/sparql` in-process: the protocol's operation forms, formats, negotiation, errors, dataset and limits."""
from __future__ import annotations

import csv
import io
import itertools
import json
import time
from contextlib import asynccontextmanager, contextmanager
from urllib.parse import urlencode

import pyoxigraph as ox
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from semreg.errors import BadRequest, Forbidden, SemregError, Unavailable
from semreg.http.sparql import SparqlEndpoint
from semreg.rdf.terms import PrefixMap
from semreg.sparql.formats import GRAPH, SOLUTIONS, negotiate
from semreg.sparql.pool import QueryPool
from semreg.sparql.protocol import QueryRequest, from_params, split_content_type
from semreg.sparql.runner import Limits, run_query
from semreg.sparql.scan import Keywords, scan

EX = "http://ex.org/"
G1, G2 = EX + "g1", EX + "g2"
SD = "http://www.w3.org/ns/sparql-service-description#"
FORM = "application/x-www-form-urlencoded"
DIRECT = "application/sparql-query"
READ_ONLY = "this endpoint is read-only; ontologies change through /v1/ontologies."


def n(local: str) -> ox.NamedNode:
    return ox.NamedNode(EX + local)


@pytest.fixture(scope="module")
def store() -> ox.Store:
    """g1: s1 p "one"; g2: s2 p "two"; the store's own default graph: s0 p "zero"."""
    store = ox.Store()
    store.add(ox.Quad(n("s1"), n("p"), ox.Literal("one"), ox.NamedNode(G1)))
    store.add(ox.Quad(n("s2"), n("p"), ox.Literal("two"), ox.NamedNode(G2)))
    store.add(ox.Quad(n("s0"), n("p"), ox.Literal("zero")))
    return store


@contextmanager
def serve(store: ox.Store, *, min_workers: int = 1, max_workers: int = 4, **options):
    """The endpoint over `store` in an app of its own, with a query pool that ends with the app."""
    pool = QueryPool.over_store(store, min_workers=min_workers, max_workers=max_workers)
    endpoint = SparqlEndpoint(pool, **options)

    async def on_error(request, exc: SemregError):
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)

    @asynccontextmanager
    async def lifespan(app):
        try:
            yield
        finally:
            await pool.close()

    app = Starlette(routes=[Route("/sparql", endpoint.handle, methods=["GET", "POST"])],
                    exception_handlers={SemregError: on_error}, lifespan=lifespan)
    with TestClient(app) as client:
        yield client


@pytest.fixture(scope="module")
def client(store):
    with serve(store, prefixes=PrefixMap(explicit={"ex": EX})) as client:
        yield client


def objects(response) -> list[str]:
    """The ?o values of a JSON SELECT result, sorted."""
    assert response.status_code == 200, response.text
    return sorted(b["o"]["value"] for b in response.json()["results"]["bindings"])


SELECT_O = "SELECT ?o WHERE { ?s <http://ex.org/p> ?o }"


# --- operation forms ------------------------------------------------------------------------------

def test_get(client):
    assert objects(client.get("/sparql", params={"query": SELECT_O})) == ["one", "two", "zero"]


def test_post_form(client):
    response = client.post("/sparql", content=urlencode({"query": SELECT_O}), headers={"content-type": FORM})
    assert objects(response) == ["one", "two", "zero"]


@pytest.mark.parametrize("content_type", [DIRECT, DIRECT + "; charset=utf-8", "Application/SPARQL-Query;charset=UTF-8"])
def test_post_direct(client, content_type):
    response = client.post("/sparql", content=SELECT_O.encode(), headers={"content-type": content_type})
    assert objects(response) == ["one", "two", "zero"]


def test_post_form_takes_graph_parameters_from_the_url_too(client):
    response = client.post("/sparql", params={"default-graph-uri": G1}, content=urlencode({"query": SELECT_O}),
                           headers={"content-type": FORM})
    assert objects(response) == ["one"]


def test_known_prefixes_need_no_declaration_and_a_query_prefix_wins(client):
    assert objects(client.get("/sparql", params={"query": "SELECT ?o { ?s ex:p ?o }"})) == ["one", "two", "zero"]
    redefined = "PREFIX ex: <http://elsewhere.org/> SELECT ?o { ?s ex:p ?o }"
    assert objects(client.get("/sparql", params={"query": redefined})) == []


def test_relative_iris_resolve_against_the_endpoint(client):
    response = client.get("/sparql", params={"query": "CONSTRUCT { <s> <p> 1 } WHERE {}"},
                          headers={"accept": "application/n-triples"})
    assert response.text.startswith("<http://testserver/s> <http://testserver/p> ")


def test_the_instance_is_a_request_handler(store):
    """`await endpoint(request)` from the app's own handler, as `semreg.http.app` mounts it."""
    pool = QueryPool.over_store(store, min_workers=1)
    endpoint = SparqlEndpoint(pool)

    async def handler(request):
        return await endpoint(request)

    @asynccontextmanager
    async def lifespan(app):
        yield
        await pool.close()

    with TestClient(Starlette(routes=[Route("/sparql", handler, methods=["GET", "POST"])], lifespan=lifespan)) as client:
        assert client.get("/sparql", params={"query": "ASK {}"}).json() == {"head": {}, "boolean": True}


def test_before_query_is_awaited_before_each_query_only(store):
    calls = []

    async def barrier():
        calls.append(1)

    with serve(store, before_query=barrier) as client:
        client.get("/sparql", params={"query": "ASK {}"})
        client.post("/sparql", content=b"ASK {}", headers={"content-type": DIRECT})
        client.get("/sparql")  # the service description is no query
    assert len(calls) == 2


# --- formats --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("accept", "media_type", "fmt"), [
    ("application/sparql-results+json", "application/sparql-results+json", ox.QueryResultsFormat.JSON),
    ("application/json", "application/json", ox.QueryResultsFormat.JSON),
    ("application/sparql-results+xml", "application/sparql-results+xml", ox.QueryResultsFormat.XML),
    ("application/xml", "application/xml", ox.QueryResultsFormat.XML),
    ("text/tab-separated-values", "text/tab-separated-values", ox.QueryResultsFormat.TSV),
])
def test_select_formats(client, accept, media_type, fmt):
    response = client.get("/sparql", params={"query": SELECT_O}, headers={"accept": accept})
    assert response.status_code == 200
    assert response.headers["content-type"] == media_type + "; charset=utf-8"
    assert response.headers["vary"] == "accept"
    values = sorted(solution["o"].value for solution in ox.parse_query_results(response.content, fmt))
    assert values == ["one", "two", "zero"]


def test_select_csv(client):
    response = client.get("/sparql", params={"query": SELECT_O}, headers={"accept": "text/csv"})
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    rows = list(csv.reader(io.StringIO(response.text)))
    assert rows[0] == ["o"] and sorted(r[0] for r in rows[1:]) == ["one", "two", "zero"]


@pytest.mark.parametrize(("accept", "fmt"), [
    (None, ox.QueryResultsFormat.JSON),
    ("application/sparql-results+json", ox.QueryResultsFormat.JSON),
    ("application/sparql-results+xml", ox.QueryResultsFormat.XML),
])
@pytest.mark.parametrize(("query", "expected"), [("ASK { ?s ?p 'one' }", True), ("ASK { ?s ?p 'three' }", False)])
def test_ask(client, accept, fmt, query, expected):
    headers = {"accept": accept} if accept else {}
    response = client.get("/sparql", params={"query": query}, headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith(fmt.media_type)
    assert bool(ox.parse_query_results(response.content, fmt)) is expected


@pytest.mark.parametrize(("accept", "fmt"), [
    (None, ox.RdfFormat.TURTLE),
    ("*/*", ox.RdfFormat.TURTLE),
    ("text/turtle", ox.RdfFormat.TURTLE),
    ("application/n-triples", ox.RdfFormat.N_TRIPLES),
    ("application/ld+json", ox.RdfFormat.JSON_LD),
    ("application/rdf+xml", ox.RdfFormat.RDF_XML),
])
@pytest.mark.parametrize("query", ["CONSTRUCT WHERE { ?s <http://ex.org/p> ?o }",
                                   "DESCRIBE ?s WHERE { ?s <http://ex.org/p> ?o }"])
def test_graph_formats(client, accept, fmt, query):
    headers = {"accept": accept} if accept else {}
    response = client.get("/sparql", params={"query": query}, headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"] == fmt.media_type + "; charset=utf-8"
    triples = {(str(q.subject), str(q.object)) for q in ox.parse(response.content, fmt)}
    assert triples == {(f"<{EX}s1>", '"one"'), (f"<{EX}s2>", '"two"'), (f"<{EX}s0>", '"zero"')}


def test_turtle_uses_known_prefixes(client):
    response = client.get("/sparql", params={"query": "CONSTRUCT WHERE { ?s ex:p ?o }"})
    assert "@prefix ex: <http://ex.org/>" in response.text and "ex:s1 ex:p" in response.text


TRICKY = """SELECT * WHERE {
  VALUES (?a ?b ?c) {
    ("line\\nbreak\\ttab \\"quoted\\" back\\\\slash\\r" <http://ex.org/é> "01"^^<http://www.w3.org/2001/XMLSchema#int>)
    ("chat"@en-US UNDEF 1.5e0)
    (UNDEF UNDEF UNDEF)
    ("x"^^<http://ex.org/dt> "" <<( <http://ex.org/s> <http://ex.org/p> "o\\nx"@fr )>>)
  }
  OPTIONAL { BIND(?a AS ?d) }
}"""


@pytest.mark.parametrize("fmt", [ox.QueryResultsFormat.JSON, ox.QueryResultsFormat.XML, ox.QueryResultsFormat.CSV,
                                 ox.QueryResultsFormat.TSV])
def test_solutions_survive_the_tsv_round_trip(client, store, fmt):
    """Solutions stream through TSV to be counted; every format must still match pyoxigraph's own output."""
    response = client.get("/sparql", params={"query": TRICKY}, headers={"accept": fmt.media_type})
    assert response.status_code == 200
    assert response.content == store.query(TRICKY, use_default_graph_as_union=True).serialize(format=fmt)


@pytest.mark.parametrize("query", ["SELECT * {}", "SELECT * { FILTER(false) }", "SELECT ?x {}",
                                   "SELECT ?x { ?x ?y ?z FILTER(false) }"])
def test_empty_and_variable_free_results(client, store, query):
    response = client.get("/sparql", params={"query": query})
    assert response.content == store.query(query).serialize(format=ox.QueryResultsFormat.JSON)


def test_blank_node_labels_stay_shared_across_solutions(client):
    query = "SELECT ?b { VALUES ?x { 1 2 } BIND(BNODE('same') AS ?b) }"
    bindings = client.get("/sparql", params={"query": query}).json()["results"]["bindings"]
    assert len({b["b"]["value"] for b in bindings}) == 1 and all(b["b"]["type"] == "bnode" for b in bindings)


# --- negotiation ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("accept", "kind", "expected"), [
    (None, SOLUTIONS, "application/sparql-results+json"),
    ("", SOLUTIONS, "application/sparql-results+json"),
    ("*/*", SOLUTIONS, "application/sparql-results+json"),
    ("*/*", GRAPH, "text/turtle"),
    ("application/*", SOLUTIONS, "application/sparql-results+json"),
    ("text/*", SOLUTIONS, "text/csv"),
    ("text/csv;q=0.5, text/tab-separated-values", SOLUTIONS, "text/tab-separated-values"),
    ("text/csv;q=0.5, text/tab-separated-values;q=0.4", SOLUTIONS, "text/csv"),
    ("application/json, */*;q=1", SOLUTIONS, "application/json"),  # equal q: the exact match wins
    ("*/*;q=0.1, application/sparql-results+xml;q=0.9", SOLUTIONS, "application/sparql-results+xml"),
    ("text/*;q=0.9, text/csv;q=0", SOLUTIONS, "text/tab-separated-values"),  # q=0 excludes
    ("APPLICATION/SPARQL-RESULTS+XML", SOLUTIONS, "application/sparql-results+xml"),
    ("text/turtle;charset=utf-8;q=0.2, application/rdf+xml;q=0.3", GRAPH, "application/rdf+xml"),
    ("application/json", GRAPH, "application/json"),  # JSON-LD under the name asked for
    ("garbage, text/turtle;q=abc, application/n-triples", GRAPH, "application/n-triples"),
    ("text/html, application/xhtml+xml, application/xml;q=0.9, */*;q=0.8", SOLUTIONS, "application/xml"),
    ("text/turtle", SOLUTIONS, None),
    ("application/sparql-results+json", GRAPH, None),
    ("*/*;q=0", SOLUTIONS, None),
])
def test_negotiate(accept, kind, expected):
    offer = negotiate(accept, kind)
    assert (offer.media_type if offer else None) == expected


@pytest.mark.parametrize(("query", "accept"), [
    ("SELECT * {}", "text/turtle"),
    ("ASK {}", "application/n-triples"),
    ("CONSTRUCT WHERE { ?s ?p ?o }", "text/csv"),
    ("SELECT * {}", "text/html"),
])
def test_not_acceptable(client, query, accept):
    response = client.get("/sparql", params={"query": query}, headers={"accept": accept})
    assert response.status_code == 406
    assert accept in response.json()["error"] and response.json()["offered"]


def test_not_acceptable_for_any_query_form(client, store):
    response = client.get("/sparql", params={"query": "SELECT * {}"}, headers={"accept": "image/png"})
    assert response.status_code == 406
    assert "for SELECT and ASK" in response.json()["error"] and "text/turtle" in response.json()["offered"]


# --- errors ---------------------------------------------------------------------------------------

def test_syntax_error_carries_the_parser_message(client):
    response = client.get("/sparql", params={"query": "SELECT * WHERE { ?s ?p"})
    assert response.status_code == 400
    body = response.json()
    assert body["error"].startswith("the query is not valid SPARQL: error at 1:")
    assert body["syntax_error"] in body["error"]


@pytest.mark.parametrize("request_kwargs", [
    {"method": "GET", "params": {"update": "CLEAR ALL"}},
    {"method": "POST", "content": "update=CLEAR+ALL", "headers": {"content-type": FORM}},
    {"method": "POST", "content": "update=CLEAR+NAMED&update=CLEAR+DEFAULT", "headers": {"content-type": FORM}},
    {"method": "POST", "content": "CLEAR ALL", "headers": {"content-type": "application/sparql-update"}},
    {"method": "POST", "content": "CLEAR ALL", "headers": {"content-type": "application/sparql-update; charset=UTF-16"}},
])
def test_update_is_refused(client, store, request_kwargs):
    response = client.request(url="/sparql", **request_kwargs)
    assert response.status_code == 403
    assert response.json() == {"error": READ_ONLY}
    assert len(store) == 3


@pytest.mark.parametrize(("request_kwargs", "status", "words"), [
    ({"method": "POST", "content": "ASK {}", "headers": {"content-type": "text/plain"}}, 415, "text/plain"),
    ({"method": "POST", "content": "query=ASK+%7B%7D"}, 415, "without Content-Type"),
    ({"method": "POST", "content": "ASK {}".encode("utf-16"),
      "headers": {"content-type": DIRECT + "; charset=UTF-16"}}, 415, "utf-16"),
    ({"method": "POST", "content": "query=ASK+%7B%7D", "headers": {"content-type": FORM + "; charset=latin-1"}}, 415,
     "latin-1"),
    ({"method": "POST", "content": b"ASK {} # \xff", "headers": {"content-type": DIRECT}}, 400, "UTF-8"),
    ({"method": "GET", "params": [("query", "ASK {}"), ("query", "SELECT * {}")]}, 400, "exactly one query"),
    ({"method": "POST", "params": {"query": "ASK {}"}, "content": "ASK {}", "headers": {"content-type": DIRECT}}, 400,
     "exactly one query"),
    ({"method": "GET", "params": {"query": "ASK {}", "update": "CLEAR ALL"}}, 400, "not both"),
    ({"method": "GET", "params": {"query": "ASK {}", "default-graph-uri": "not an iri"}}, 400, "default-graph-uri"),
    ({"method": "GET", "params": {"query": "ASK {}", "named-graph-uri": "relative"}}, 400, "named-graph-uri"),
    ({"method": "GET", "url": "/sparql?query=ASK%20%7B%7D%20%23%FF"}, 400, "UTF-8"),
    ({"method": "PUT", "params": {"query": "ASK {}"}}, 405, None),
    ({"method": "POST"}, 400, "carries a query"),  # a POST runs a query; GET without one describes the service
    ({"method": "POST", "content": "", "headers": {"content-type": FORM}}, 400, "carries a query"),
    ({"method": "POST", "content": f"default-graph-uri={G1}", "headers": {"content-type": FORM}}, 400,
     "carries a query"),
])
def test_protocol_errors(client, request_kwargs, status, words):
    response = client.request(**{"url": "/sparql", **request_kwargs})
    assert response.status_code == status, response.text
    if words:
        assert words in response.json()["error"]


def test_body_limit(store):
    with serve(store, max_body_bytes=64) as client:
        query = "ASK { " + "#" * 100 + "\n}"
        response = client.post("/sparql", content=query, headers={"content-type": DIRECT})
        assert response.status_code == 413 and "64 bytes" in response.json()["error"]

        def chunks():  # no Content-Length: the limit holds while streaming
            yield query.encode()

        response = client.post("/sparql", content=chunks(), headers={"content-type": DIRECT})
        assert response.status_code == 413
        assert client.post("/sparql", content=b"ASK {}", headers={"content-type": DIRECT}).status_code == 200


@pytest.mark.parametrize("query", [
    "SELECT * { SERVICE <http://127.0.0.1:9/sparql> { ?s ?p ?o } }",
    "SELECT * { SERVICE SILENT <http://127.0.0.1:9/sparql> { ?s ?p ?o } }",
    "SELECT * { VALUES ?e { <http://127.0.0.1:9/> } service ?e { ?s ?p ?o } }",
    "ASK { ?s ?p 1SERVICE <http://127.0.0.1:9/> {} }",
])
def test_service_is_refused_before_evaluation(client, query):
    response = client.get("/sparql", params={"query": query})
    assert response.status_code == 400
    assert response.json()["error"].startswith("SERVICE (federated query) is not available")


@pytest.mark.parametrize(("query", "expected"), [
    ("SELECT * { ?s ?p ?o }", Keywords(False, False)),
    ("SELECT * FROM <http://g> { ?s ?p ?o }", Keywords(False, True)),
    ("select * from named <http://g> { graph ?g { ?s ?p ?o } }", Keywords(False, True)),
    ("SELECT * { SERVICE <http://x> {} }", Keywords(True, False)),
    ("SELECT * {?s ?p ?o.SERVICE <http://x> {} }", Keywords(True, False)),
    ("SELECT ?service ?from { ?i sr:service ?service ; ex:from ?from ; ex:my-service ?x }", Keywords(False, False)),
    ("SELECT * { ?s ?p 'SERVICE <x> FROM' . ?s ?p \"\"\"from\nservice\"\"\" }", Keywords(False, False)),
    ("SELECT * { ?s <http://x.org/service/from> ?o } # SERVICE <http://x> FROM", Keywords(False, False)),
    ("SELECT * { ?s ?p 'x'@from, _:service, $SERVICE }", Keywords(False, False)),
    ("SELECT * { ?s ?p ?o } ORDER BY ?fromage ?serviceable", Keywords(False, False)),
    ("SELECT * { <http://x> ?p ?o FILTER(?o < 5) SERVICE ?o {} }", Keywords(True, False)),
])
def test_scan(query, expected):
    assert scan(query) == expected


# --- dataset --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("params", "expected"), [
    ({}, ["one", "two", "zero"]),  # the union of every graph, the store's default graph included
    ({"default-graph-uri": G1}, ["one"]),
    ({"default-graph-uri": [G1, G2]}, ["one", "two"]),
    ({"named-graph-uri": G1}, []),  # naming only named graphs leaves an empty default graph
    ({"default-graph-uri": EX + "nothing"}, []),
])
def test_default_graph(client, params, expected):
    assert objects(client.get("/sparql", params={"query": SELECT_O, **params})) == expected


def test_named_graphs(client):
    query = "SELECT ?g ?o { GRAPH ?g { ?s ?p ?o } }"
    every = client.get("/sparql", params={"query": query}).json()["results"]["bindings"]
    assert sorted(b["g"]["value"] for b in every) == [G1, G2]
    only = client.get("/sparql", params={"query": query, "named-graph-uri": G2}).json()["results"]["bindings"]
    assert [(b["g"]["value"], b["o"]["value"]) for b in only] == [(G2, "two")]


def test_query_dataset_is_honoured_without_protocol_graphs(client):
    from_g1 = f"SELECT ?o FROM <{G1}> WHERE {{ ?s ?p ?o }}"
    assert objects(client.get("/sparql", params={"query": from_g1})) == ["one"]
    named = f"SELECT ?o FROM NAMED <{G2}> WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }}"
    assert objects(client.get("/sparql", params={"query": named})) == ["two"]


def test_protocol_graphs_replace_the_query_dataset(client):
    from_g1 = f"SELECT ?o FROM <{G1}> WHERE {{ ?s ?p ?o }}"
    assert objects(client.get("/sparql", params={"query": from_g1, "default-graph-uri": G2})) == ["two"]
    assert objects(client.get("/sparql", params={"query": from_g1, "named-graph-uri": G2})) == []


# --- service description --------------------------------------------------------------------------

def description(response) -> ox.Store:
    assert response.status_code == 200, response.text
    graph = ox.Store()
    fmt = ox.RdfFormat.from_media_type(response.headers["content-type"])
    graph.load(response.content, fmt)
    return graph


def ask(graph: ox.Store, pattern: str) -> bool:
    return bool(graph.query(f"PREFIX sd: <{SD}> ASK {{ {pattern} }}"))


@pytest.mark.parametrize("request_kwargs", [
    {"method": "GET"},
    {"method": "GET", "params": {"default-graph-uri": G1}},
])
def test_service_description(client, request_kwargs):
    response = client.request(url="/sparql", **request_kwargs)
    assert response.headers["content-type"] == "text/turtle; charset=utf-8"
    graph = description(response)
    assert ask(graph, "?s a sd:Service ; sd:endpoint <http://testserver/sparql> ; "
                      "sd:supportedLanguage sd:SPARQL11Query ; sd:feature sd:UnionDefaultGraph ; "
                      "sd:defaultEntailmentRegime <http://www.w3.org/ns/entailment/Simple>")
    assert ask(graph, "?s sd:defaultDataset/sd:namedGraph/sd:name <urn:semreg:inferred>")
    formats = {str(t[0].value) for t in graph.query(f"SELECT ?f {{ ?s <{SD}resultFormat> ?f }}")}
    assert formats == {"http://www.w3.org/ns/formats/" + name for name in (
        "SPARQL_Results_JSON", "SPARQL_Results_XML", "SPARQL_Results_CSV", "SPARQL_Results_TSV",
        "Turtle", "N-Triples", "JSON-LD", "RDF_XML")}


@pytest.mark.parametrize("accept", ["application/n-triples", "application/ld+json", "application/rdf+xml"])
def test_service_description_formats(client, accept):
    response = client.get("/sparql", headers={"accept": accept})
    assert response.headers["content-type"].startswith(accept)
    assert ask(description(response), "?s a sd:Service")


def test_service_description_406_and_configured_url(store):
    with serve(store, endpoint_url="https://registry.example/sparql") as client:
        assert client.get("/sparql", headers={"accept": "application/sparql-results+json"}).status_code == 406
        graph = description(client.get("/sparql"))
        assert ask(graph, "?s sd:endpoint <https://registry.example/sparql>")


# --- limits ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def big_store() -> ox.Store:
    store = ox.Store()
    store.bulk_extend(ox.Quad(n(f"s{i}"), n("p"), ox.Literal(i), n("g")) for i in range(2000))
    return store


@pytest.mark.parametrize("accept", ["application/sparql-results+json", "text/csv", "text/tab-separated-values",
                                    "application/sparql-results+xml"])
def test_result_limit_select(store, accept):
    with serve(store, result_limit=3) as client:
        assert len(objects(client.get("/sparql", params={"query": SELECT_O}))) == 3
        response = client.get("/sparql", params={"query": "SELECT * { VALUES ?x { 1 2 3 4 } }"},
                              headers={"accept": accept})
        assert response.status_code == 400
        assert response.json() == {"error": "the query has more than 3 results, this endpoint's limit; page through "
                                            "them with LIMIT and OFFSET, or aggregate them.", "result_limit": 3}


@pytest.fixture(scope="module")
def limited_to_10(big_store):
    """One endpoint (and query pool) over `big_store` with a result limit of 10, for the cases that only read."""
    with serve(big_store, result_limit=10) as client:
        yield client


@pytest.mark.parametrize("accept", ["application/sparql-results+json", "text/csv", "text/tab-separated-values",
                                    "application/sparql-results+xml"])
@pytest.mark.parametrize("query", ["SELECT * { ?s ?p ?o } # LIMIT 10", "SELECT * { ?s ?p ?o } #\n# LIMIT 10",
                                   "SELECT * { ?s ?p ?o } #LIMIT 1 OFFSET 2",
                                   "SELECT * { { SELECT * { ?s ?p ?o } } } LIMIT 5000"])
def test_result_limit_counts_what_is_produced_whatever_the_text_says(limited_to_10, query, accept):
    response = limited_to_10.get("/sparql", params={"query": query}, headers={"accept": accept})
    assert response.status_code == 400, response.text[:200]
    assert response.json()["result_limit"] == 10
    within = limited_to_10.get("/sparql", params={"query": "SELECT * { ?s ?p ?o } LIMIT 10"}, headers={"accept": accept})
    assert within.status_code == 200 and within.text.count("http://ex.org/s") == 10


def test_result_limit_graph(store):
    with serve(store, result_limit=2) as client:
        construct = "CONSTRUCT WHERE { ?s ?p ?o }"
        assert client.get("/sparql", params={"query": construct}).status_code == 400
        assert client.get("/sparql", params={"query": construct + " LIMIT 2"}).status_code == 200


def test_result_limit_stops_a_large_result(big_store):
    with serve(big_store, result_limit=1000) as client:
        response = client.get("/sparql", params={"query": "SELECT * { ?a ?b ?c . ?d ?e ?f }"})
        assert response.status_code == 400 and response.json()["result_limit"] == 1000


@pytest.mark.parametrize("query", [
    "SELECT * { ?a ?b ?c . ?d ?e ?f }",  # streams: the worker stops at its next write
    "SELECT (COUNT(*) AS ?n) { ?a ?b ?c . ?d ?e ?f }",  # streams nothing: the client is answered anyway
])
def test_time_limit(big_store, query):
    with serve(big_store, time_limit_s=0.2, result_limit=None) as client:
        response = client.get("/sparql", params={"query": query})
        assert response.status_code == 503
        assert response.headers["retry-after"] == "1"
        assert "time limit of 0.2 s" in response.json()["error"]


def stepping_clock(deadline_after: int):
    """A clock that passes the deadline (10) after `deadline_after` readings."""
    readings = itertools.count()
    return lambda: 0.0 if next(readings) < deadline_after else 11.0


@pytest.mark.parametrize("query", ["SELECT * { ?s ?p ?o }", "CONSTRUCT WHERE { ?s ?p ?o }"])
def test_worker_checks_the_deadline_while_streaming(big_store, query):
    limits = Limits(deadline=10.0, time_limit_s=10.0, result_limit=None, clock=stepping_clock(3))
    with pytest.raises(Unavailable) as caught:
        run_query(big_store, QueryRequest(query), accept=None, limits=limits)
    assert caught.value.headers == {"Retry-After": "10"}


def test_worker_gives_up_a_job_that_waited_past_its_deadline(big_store):
    limits = Limits(deadline=10.0, time_limit_s=10.0, result_limit=None, clock=stepping_clock(0))
    with pytest.raises(Unavailable):
        run_query(big_store, QueryRequest("ASK {}"), accept=None, limits=limits)


def test_pool_is_free_again_after_a_stopped_query(big_store):
    with serve(big_store, time_limit_s=0.5, result_limit=None, max_workers=1) as client:
        assert client.get("/sparql", params={"query": "SELECT * { ?a ?b ?c . ?d ?e ?f }"}).status_code == 503
        # the stopped process is replaced by a fork of the template: on a loaded machine that can take longer
        # than this server's 0.5 s limit, so the small query is asked until the pool answers it
        deadline = time.monotonic() + 30
        while (status := client.get("/sparql", params={"query": "ASK {}"}).status_code) == 503:
            assert time.monotonic() < deadline, "the pool never answered again after a stopped query"
        assert status == 200


# --- pure protocol parsing ------------------------------------------------------------------------

@pytest.mark.parametrize(("params", "expected"), [
    ([], QueryRequest(None)),
    ([("query", "ASK {}"), ("other", "x")], QueryRequest("ASK {}")),
    ([("query", "ASK {}"), ("default-graph-uri", G1), ("named-graph-uri", G2)],
     QueryRequest("ASK {}", (ox.NamedNode(G1),), (ox.NamedNode(G2),))),
    ([("default-graph-uri", G1)], QueryRequest(None, (ox.NamedNode(G1),))),
])
def test_from_params(params, expected):
    assert from_params(params) == expected


@pytest.mark.parametrize(("params", "error"), [
    ([("update", "CLEAR ALL")], Forbidden),
    ([("query", "ASK {}"), ("update", "CLEAR ALL")], BadRequest),
    ([("query", "ASK {}"), ("query", "ASK {}")], BadRequest),
])
def test_from_params_errors(params, error):
    with pytest.raises(error):
        from_params(params)


@pytest.mark.parametrize(("header", "expected"), [
    ("", ("", None)),
    ("application/sparql-query", ("application/sparql-query", None)),
    ('Application/X-WWW-Form-URLencoded ; Charset="UTF-8"', (FORM, "utf-8")),
])
def test_split_content_type(header, expected):
    assert split_content_type(header) == expected


def test_error_bodies_are_json(client):
    response = client.get("/sparql", params={"query": "ASK {"})
    assert response.headers["content-type"] == "application/json"
    assert set(json.loads(response.text)) >= {"error"}
