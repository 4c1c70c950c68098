"""Readers for the W3C SPARQL 1.1 test manifests (https://w3c.github.io/rdf-tests/sparql/sparql11/).

- `protocol_tests`: `protocol/manifest.ttl`, whose tests are sequences of HTTP requests (the HTTP
  vocabulary, `ht:`) with expected statuses, booleans and result formats, and the graphs they need
  (`ut:graphData`: a file and, as `rdfs:label`, the graph's name).
- `syntax_tests`: `syntax-query/manifest.ttl`, positive and negative syntax tests (one query file each).
- `write_graphs`: the graphs of the protocol tests into an on-disk pyoxigraph store, before a server
  opens it.
"""
from __future__ import annotations

import gc
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pyoxigraph as ox
import rdflib
from rdflib import RDF, RDFS, Namespace
from rdflib.collection import Collection

MF = Namespace("http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#")
HT = Namespace("http://www.w3.org/2011/http#")
CNT = Namespace("http://www.w3.org/2011/content#")
UT = Namespace("http://www.w3.org/2009/sparql/tests/test-update#")
HTS = "http://www.w3.org/2011/http-statusCodes#StatusCode"

MANIFEST_PATH_PREFIX = "/sparql/"
ENDPOINT_PATH = "/sparql"


@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str  # rewritten to ENDPOINT_PATH
    headers: dict[str, str]
    body: bytes | None
    status_classes: frozenset[int]  # 2 for 2xx, ...
    expected_boolean: bool | None
    expected_format: str | None  # "boolean", "tabular", "RDF"

    @property
    def is_update(self) -> bool:
        """An update operation: an update body, or an `update` parameter in the URL or a form body."""
        media_type = self.headers.get("content-type", "").split(";")[0].strip().lower()
        params = parse_qsl(urlsplit(self.path).query)
        if media_type == "application/x-www-form-urlencoded" and self.body is not None:
            params += parse_qsl(self.body.decode("utf-8", "replace"))
        return media_type == "application/sparql-update" or any(name == "update" for name, _ in params)


@dataclass(frozen=True)
class ProtocolTest:
    name: str  # the fragment of the test's IRI, e.g. query_post_form
    title: str
    requests: tuple[HttpRequest, ...]
    graphs: tuple[tuple[str, Path], ...] = field(default=())  # (graph IRI, N-Triples file)

    @property
    def needs_update(self) -> bool:
        """True when the test succeeds only if an update succeeds (not tests that expect updates to fail)."""
        return any(r.is_update and 4 not in r.status_classes for r in self.requests)


@dataclass(frozen=True)
class SyntaxTest:
    name: str  # mf:name, the query file's name
    path: Path
    positive: bool


def _manifest(path: Path) -> tuple[rdflib.Graph, list[rdflib.term.Node]]:
    graph = rdflib.Graph().parse(path, format="turtle", publicID=path.as_uri())
    manifest = next(graph.subjects(RDF.type, MF.Manifest))
    return graph, list(Collection(graph, graph.value(manifest, MF.entries)))


def _file(node: rdflib.term.Node) -> Path:
    return Path(urlsplit(str(node)).path)


def protocol_tests(path: Path) -> list[ProtocolTest]:
    graph, entries = _manifest(path)
    return [_protocol_test(graph, test) for test in entries]


def _protocol_test(graph: rdflib.Graph, test: rdflib.term.Node) -> ProtocolTest:
    connection = graph.value(test, MF.action)
    requests = tuple(_request(graph, r) for r in Collection(graph, graph.value(connection, HT.requests)))
    graphs = tuple(sorted((str(graph.value(d, RDFS.label)), _file(graph.value(d, UT.graph)))
                          for d in graph.objects(test, UT.graphData)))
    return ProtocolTest(name=str(test).rpartition("#")[2], title=str(graph.value(test, MF.name)),
                        requests=requests, graphs=graphs)


def _request(graph: rdflib.Graph, request: rdflib.term.Node) -> HttpRequest:
    path = str(graph.value(request, HT.absolutePath))
    assert path.startswith(MANIFEST_PATH_PREFIX), path
    headers = {}
    header_list = graph.value(request, HT.headers)
    if header_list is not None:
        for header in Collection(graph, header_list):
            headers[str(graph.value(header, HT.fieldName)).lower()] = str(graph.value(header, HT.fieldValue))
    body = None
    body_node = graph.value(request, HT.body)
    if body_node is not None:
        encoding = str(graph.value(body_node, CNT.characterEncoding) or "UTF-8")
        body = str(graph.value(body_node, CNT.chars)).encode(encoding)
    response = graph.value(request, HT.resp)
    statuses = frozenset(int(str(s)[len(HTS)]) for s in graph.objects(response, MF.expectedStatus))
    boolean = graph.value(response, MF.expectedBoolean)
    fmt = graph.value(response, MF.expectedFormat)
    return HttpRequest(
        method=str(graph.value(request, HT.methodName)),
        path=ENDPOINT_PATH + path[len(MANIFEST_PATH_PREFIX) - 1:].lstrip("/"),
        headers=headers, body=body, status_classes=statuses,
        expected_boolean=None if boolean is None else bool(boolean.toPython()),
        expected_format=None if fmt is None else str(fmt),
    )


def syntax_tests(path: Path) -> list[SyntaxTest]:
    graph, entries = _manifest(path)
    kinds = {MF.PositiveSyntaxTest11: True, MF.NegativeSyntaxTest11: False}
    return [SyntaxTest(name=str(graph.value(test, MF.name)), path=_file(graph.value(test, MF.action)),
                       positive=kinds[graph.value(test, RDF.type)])
            for test in entries]


def write_graphs(data_dir: Path, tests: list[ProtocolTest]) -> dict[str, Path]:
    """Load every test's graphs into one on-disk store at `data_dir` and close it; graph IRI → file.

    Tests share graphs only when they name the same file for the same graph, which is checked.
    """
    wanted: dict[str, Path] = {}
    for test in tests:
        for iri, file in test.graphs:
            assert wanted.setdefault(iri, file) == file, f"{test.name} loads {file} into {iri}, another test {wanted[iri]}"
    store = ox.Store(str(data_dir))
    for iri, file in wanted.items():
        store.load(path=str(file), format=ox.RdfFormat.N_TRIPLES, to_graph=ox.NamedNode(iri))
    store.flush()
    del store
    gc.collect()  # the store's lock is released only when it is dropped
    return wanted
