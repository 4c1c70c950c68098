"""A node alone started with `--no-sparql`: no replica, no query processes; `/sparql` answers 501 after the
access gate, whatever the request, and changes nothing; the registry's routes answer as on any node."""
from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import quote_from_bytes

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.inprocess import InProcess
from support.paths import ONTOLOGIES
from support.tokens import ADMIN, BOUND, READ, TOKENS

from semreg.http.sparql_forward import SparqlOff

SENTENCE = "this node does not serve SPARQL: it was started with --no-sparql."


@pytest.fixture(scope="module")
def alone(tmp_path_factory) -> Iterator[InProcess]:
    path = tmp_path_factory.mktemp("no-sparql") / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    with InProcess(tokens_file=path, sparql=False) as srv:
        admin = srv.client(ADMIN)
        r = admin.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                      headers={"Content-Type": "text/turtle"})
        assert r.status_code == 201, r.text
        r = admin.put("/v1/instances/livros", json={"service": "livros", "address": "10.0.0.1", "port": 9001, "ttl": 0,
                                                    "tags": ["ex:Livro ex:temUmGenero ex:Terror"]})
        assert r.status_code == 201, r.text
        yield srv


def test_the_node_keeps_no_replica_and_no_query_processes(alone: InProcess) -> None:
    assert alone.node.replica is None
    assert isinstance(alone.app.state.semreg.sparql, SparqlOff)
    assert alone.node.cluster is None
    ready = alone.client().get("/readyz").json()
    assert ready["replica_pending"] == 0 and ready["instances"] == 1
    metrics = alone.client(ADMIN).get("/metrics").text
    assert "semreg_sparql_processes" not in metrics and "semreg_replica_pending 0.0" in metrics


@pytest.mark.parametrize("method, url, kw", [
    ("GET", "/sparql?query=ASK%7B%7D", {}),
    ("GET", "/sparql", {}),  # the service description: there is no service to describe
    ("POST", "/sparql", {"content": b"ASK {}", "headers": {"Content-Type": "application/sparql-query"}}),
    ("POST", "/sparql", {"data": {"query": "SELECT * WHERE { ?s ?p ?o }"}}),
    ("POST", "/sparql", {"content": b"INSERT DATA { <a:b> <a:c> <a:d> }",
                         "headers": {"Content-Type": "application/sparql-update"}}),
])
def test_sparql_is_a_501_saying_why(alone: InProcess, method: str, url: str, kw: dict) -> None:
    r = alone.client(READ).request(method, url, **kw)
    assert r.status_code == 501, r.text
    assert r.headers["content-type"] == "application/json" and r.json()["error"].startswith(SENTENCE)


def test_the_gate_answers_first(alone: InProcess) -> None:
    """Without a token, or with one bound to environments, the answer is what a serving node gives."""
    r = alone.client().get("/sparql", params={"query": "ASK {}"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == 'Bearer realm="semreg"'
    assert alone.client(BOUND).get("/sparql", params={"query": "ASK {}"}).status_code == 403


def test_the_registry_answers_without_the_replica(alone: InProcess) -> None:
    c = alone.client(ADMIN)
    r = c.get("/v1/discover", params={"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"})
    assert r.status_code == 200 and [i["id"] for i in r.json()["instances"]] == ["livros"]
    assert c.put("/v1/queries/horror", json={"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}).status_code in (
        200, 201)
    assert [i["id"] for i in c.get("/v1/queries/horror/discover").json()["instances"]] == ["livros"]
    assert c.get("/v1/backup").status_code == 200
    assert c.get("/v1/cluster").json()["members"][0]["sparql"] is False
    assert c.get("/ui/queries.json").status_code == 200  # the console's examples; its SPARQL view gets the 501


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=st.sampled_from(["GET", "POST"]), query=st.binary(max_size=300),
       content_type=st.sampled_from(["application/sparql-query", "application/x-www-form-urlencoded", "text/plain",
                                     "application/sparql-update", ""]),
       body=st.binary(max_size=300), accept=st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40))
def test_any_request_is_a_4xx_or_the_501_and_changes_nothing(alone: InProcess, method: str, query: bytes,
                                                              content_type: str, body: bytes, accept: str) -> None:
    before = alone.client(ADMIN).get("/v1/instances").json()
    headers = {"Accept": accept.strip()}
    if content_type:
        headers["Content-Type"] = content_type
    url = "/sparql?query=" + quote_from_bytes(query)
    r = alone.client(READ).request(method, url, content=body if method == "POST" else None, headers=headers)
    assert r.status_code == 501 or 400 <= r.status_code < 500, (r.status_code, r.text)
    assert alone.client(ADMIN).get("/v1/instances").json() == before
