"""A ring member started with `--no-sparql` forwards `/sparql` to a member that serves it: the answer is the
serving member's, byte for byte, for every form of the protocol; the caller's token is checked on both members;
with no member serving, 503 with `Retry-After`.

The ring is in this process (`support.inprocess_ring`): `a` serves SPARQL, `b` and `c` do not, so every
forwarded request lands on `a` and its answer can be compared with `a`'s own, byte for byte.
"""
from __future__ import annotations

import collections
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.inprocess import InProcess
from support.inprocess_ring import InProcessRing, RingNode
from support.paths import ONTOLOGIES, ROOT
from support.raw import Raw
from support.ring import load, new_ring, upload
from support.server import wait_for
from support.tokens import ADMIN, BOUND, READ, TOKENS

from semreg.bench.scenarios.soak import read_memory
from semreg.cluster.membership import Member, View
from semreg.cluster.ring import Ring
from semreg.cluster.sparql_forward import SERVED_HEADER, serving_order
from semreg.http.sparql_forward import FIELDS

QUERIES = sorted((ROOT / "queries").glob("*.rq"))
ACCEPTS = ["application/sparql-results+json", "application/sparql-results+xml", "text/csv",
           "text/tab-separated-values", "*/*", "application/json;q=0.5, text/csv"]
INSTANCE = "SELECT ?id ?port WHERE { ?i <https://w3id.org/semreg#id> ?id ; <https://w3id.org/semreg#port> ?port }"


class Caller:
    """The blocking calls `support.ring.load` makes, through one ring node with a token."""

    def __init__(self, node: RingNode, token: str) -> None:
        self.node = node
        self.headers = {"Authorization": f"Bearer {token}"}

    def request(self, method: str, url: str, **kw: Any) -> httpx.Response:
        return self.node.request(method, url, headers={**self.headers, **kw.pop("headers", {})}, **kw)

    def post(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("POST", url, **kw)

    def put(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("PUT", url, **kw)

    def delete(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("DELETE", url, **kw)

    def get(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("GET", url, **kw)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> Iterator[InProcessRing]:
    work = tmp_path_factory.mktemp("sparql-forward")
    tokens = work / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    r = InProcessRing(work / "ring")
    try:
        a = r.add("a", tokens_file=tokens)
        r.add("b", tokens_file=tokens, sparql=False)
        c = r.add("c", tokens_file=tokens, sparql=False)
        answer = r.answered(a, "PUT", "/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                            headers={"Content-Type": "text/turtle", "Authorization": f"Bearer {ADMIN}"})
        assert answer.status_code == 201, answer.text
        load(Caller(c, ADMIN))  # written through a member without the replica: read through any
        yield r
    finally:
        r.close()


def same(ring: InProcessRing, method: str, url: str, token: str = READ, **kw: Any) -> httpx.Response:
    """The request through `c` (forwarded) and through `a` (served): the same status, type and bytes."""
    headers = {"Authorization": f"Bearer {token}", **kw.pop("headers", {})}
    direct = ring.nodes["a"].request(method, url, headers=headers, **kw)
    forwarded = ring.nodes["c"].request(method, url, headers=headers, **kw)
    assert (forwarded.status_code, forwarded.headers.get("content-type"), forwarded.content) == (
        direct.status_code, direct.headers.get("content-type"), direct.content), (forwarded.text[:300], direct.text[:300])
    assert SERVED_HEADER not in forwarded.headers
    return forwarded


@pytest.mark.parametrize("path", QUERIES, ids=lambda p: p.name)
def test_every_example_query_answers_alike_in_every_form_of_the_protocol(mixed: InProcessRing, path: Path) -> None:
    query = path.read_text()
    for accept in ACCEPTS:
        r = same(mixed, "GET", "/sparql", params={"query": query}, headers={"Accept": accept})
        assert r.status_code == 200, r.text
    same(mixed, "POST", "/sparql", data={"query": query})
    same(mixed, "POST", "/sparql", content=query.encode(), headers={"Content-Type": "application/sparql-query",
                                                                   "Accept": "text/csv"})


def test_a_write_through_any_member_is_in_the_next_forwarded_query(mixed: InProcessRing) -> None:
    b, c = mixed.nodes["b"], mixed.nodes["c"]
    body = {"service": "late", "address": "10.9.9.9", "port": 9999, "ttl": 0, "tags": ["ex:Livro"]}
    assert Caller(b, ADMIN).put("/v1/instances/late", json=body).status_code == 201
    r = Caller(c, READ).get("/sparql", params={"query": 'ASK { ?i <https://w3id.org/semreg#id> "late" }'})
    assert r.json()["boolean"] is True
    assert Caller(b, ADMIN).delete("/v1/instances/late").status_code == 204


def test_datasets_formats_and_refusals_are_the_serving_members(mixed: InProcessRing) -> None:
    registry = "urn:semreg:registry"
    r = same(mixed, "GET", "/sparql", params={"query": INSTANCE + " ORDER BY ?id LIMIT 5", "default-graph-uri": registry})
    assert len(r.json()["results"]["bindings"]) == 5
    same(mixed, "GET", "/sparql", params={"query": "SELECT ?g (COUNT(*) AS ?n) WHERE { GRAPH ?g { ?s ?p ?o } } GROUP BY ?g",
                                         "named-graph-uri": [registry, "urn:semreg:inferred"]})
    same(mixed, "GET", "/sparql", params={"query": "CONSTRUCT { ?i ?p ?o } WHERE { ?i ?p ?o } LIMIT 7"},
         headers={"Accept": "application/n-triples"})
    assert same(mixed, "GET", "/sparql", params={"query": "SELEC nothing"}).status_code == 400
    assert same(mixed, "GET", "/sparql", params={"query": "ASK {}"}, headers={"Accept": "image/png"}).status_code == 406
    assert same(mixed, "GET", "/sparql", params={"query": "SELECT * WHERE { SERVICE <http://x.test/> { ?s ?p ?o } }"}
                ).status_code == 400
    assert same(mixed, "POST", "/sparql", content=b"DROP ALL",
                headers={"Content-Type": "application/sparql-update"}).status_code in (403, 415)
    assert same(mixed, "POST", "/sparql", content=b"x" * (1024 * 1024 + 1),
                headers={"Content-Type": "application/sparql-query"}).status_code == 413


def test_the_service_description_names_the_forwarding_members_url(mixed: InProcessRing) -> None:
    r = Caller(mixed.nodes["c"], READ).get("/sparql")
    assert r.status_code == 200 and "<http://c.test/sparql>" in r.text and "a.test" not in r.text


def test_the_callers_token_is_checked_here_and_again_by_the_serving_member(mixed: InProcessRing) -> None:
    c = mixed.nodes["c"]
    query = {"query": "ASK {}"}
    assert c.get("/sparql", params=query).status_code == 401
    assert c.get("/sparql", params=query, headers={"Authorization": "Bearer not-a-token-0123456789"}).status_code == 401
    assert c.get("/sparql", params=query, headers={"Authorization": f"Bearer {BOUND}"}).status_code == 403
    # a holder of the cluster secret gains nothing: the serving member checks the caller's token itself
    a = mixed.nodes["a"]
    for token, status in ((None, 401), ("Bearer not-a-token-0123456789", 401), (f"Bearer {BOUND}", 403),
                          (f"Bearer {READ}", 200)):
        r = internal(mixed, a, forwarded(authorization=token))
        assert r.status_code == status, r.text
        assert r.headers[SERVED_HEADER] == "a"
    assert internal(mixed, a, forwarded(), secret="wrong-secret-0123456789abcdef").status_code == 401


def test_the_forwarding_member_counts_what_it_forwarded(mixed: InProcessRing) -> None:
    c = mixed.nodes["c"]
    before = mixed.call(lambda: c.app.state.semreg.sparql.forward.forwarded)
    assert Caller(c, READ).get("/sparql", params={"query": "ASK {}"}).status_code == 200
    metrics = Caller(c, ADMIN).get("/metrics").text
    assert f"semreg_sparql_forwarded_total {before + 1}.0" in metrics, metrics[-2000:]
    assert "semreg_sparql_forward_passed_over_total 0.0" in metrics
    assert "semreg_sparql_processes" not in metrics


def test_a_member_that_does_not_serve_sparql_refuses_a_forwarded_request(mixed: InProcessRing) -> None:
    r = internal(mixed, mixed.nodes["b"], forwarded())
    assert r.status_code == 501 and SERVED_HEADER not in r.headers


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fields=st.dictionaries(st.sampled_from([*FIELDS, "extra"]),
                              st.one_of(st.none(), st.integers(), st.text(max_size=50), st.lists(st.integers(), max_size=2)),
                              max_size=len(FIELDS) + 1))
def test_malformed_forwarded_fields_are_a_400_never_a_500(mixed: InProcessRing, fields: dict) -> None:
    r = internal(mixed, mixed.nodes["a"], {**forwarded(), **fields} if len(fields) % 2 else fields)
    assert r.status_code < 500, r.text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=st.sampled_from(["GET", "POST"]), query=st.text(max_size=120),
       content_type=st.sampled_from(["application/sparql-query", "application/x-www-form-urlencoded", "text/plain",
                                     "application/sparql-query; charset=latin-1", ""]),
       body=st.binary(max_size=200), accept=st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40))
def test_any_request_answers_through_the_forward_as_on_the_serving_member(mixed: InProcessRing, method: str, query: str,
                                                                          content_type: str, body: bytes,
                                                                          accept: str) -> None:
    headers = {"Accept": accept.strip(), **({"Content-Type": content_type} if content_type else {})}
    r = same(mixed, method, "/sparql", params={"query": query, "format": "json"},
             content=body if method == "POST" else None, headers=headers)
    assert r.status_code < 500 or r.status_code == 503, r.text


def test_with_no_member_serving_sparql_the_answer_is_503_with_retry_after(tmp_path: Path) -> None:
    r = InProcessRing(tmp_path / "ring")
    try:
        b = r.add("b", sparql=False)
        r.add("c", sparql=False)
        answer = b.get("/sparql", params={"query": "ASK {}"})
        assert answer.status_code == 503 and answer.headers["retry-after"] == "5", answer.text
        assert "no member of the ring serves SPARQL" in answer.json()["error"]
    finally:
        r.close()


@pytest.mark.parametrize("serving, suspects, turn, expected", [
    (("a", "b", "d"), (), 0, ["a", "b", "d"]),  # ring order (this node, c, is never asked)
    (("a", "b", "d"), (), 1, ["b", "d", "a"]),  # each request starts one further
    (("a", "b", "d"), (), 5, ["d", "a", "b"]),
    (("a", "b", "c", "d"), ("b",), 1, ["d", "a", "b"]),  # a suspect after the others
    (("a", "b"), ("a", "b"), 0, ["a", "b"]),  # suspects are still asked, last
    (("c",), (), 0, []),
    ((), (), 3, []),
])
def test_the_members_asked_rotate_and_suspects_come_last(serving: tuple, suspects: tuple, turn: int,
                                                         expected: list) -> None:
    members = {m: Member(m, f"http://{m}", "alive", 0.0, m in serving) for m in ("a", "b", "c", "d")}
    assert serving_order(View(members, 1, Ring(list(members))), "c", frozenset(suspects), turn) == expected


def forwarded(**overrides: Any) -> dict[str, Any]:
    """The fields a forwarding member sends for `GET /sparql?query=ASK{}` with the read token."""
    return {"method": "GET", "query_string": "query=ASK%7B%7D", "content_type": "", "body": "", "accept": None,
            "url": "http://c.test/sparql", "authorization": f"Bearer {READ}", "client": "10.1.2.3", **overrides}


def internal(ring: InProcessRing, node: RingNode, fields: Any, secret: str | None = None) -> httpx.Response:
    shown = secret if secret is not None else ring.secret.read_text().strip()
    return node.internal_request("POST", "/internal/v1/sparql", json=fields, headers={"X-Semreg-Cluster": shown})


@pytest.mark.process
@pytest.mark.slow
def test_real_nodes_a_member_without_sparql_answers_every_example_as_a_serving_member_and_one_node(
        tmp_path: Path) -> None:
    """Three `semreg serve` processes and a real etcd (as the conftest's `ring`), and a fourth with
    `--no-sparql`: it keeps no SPARQL process, and every `queries/*.rq` answers through it with the solutions a
    serving member gives and one node holding the same data gives; its raw bytes meet uvicorn's framing first."""
    cluster = new_ring(tmp_path / "ring")
    try:
        forwarding_member_answers_as_one_node(cluster)
    finally:
        cluster.close()


def forwarding_member_answers_as_one_node(cluster: Any) -> None:
    plain = cluster.add("--no-sparql")
    wait_for(lambda: cluster.converged(), 60, "four members on one ring")
    assert {m["id"]: m["sparql"] for m in plain.client().get("/v1/cluster").json()["members"]} == {
        "n1": True, "n2": True, "n3": True, "n4": False}
    kinds = read_memory(plain.pid)
    assert kinds["template"][2] == 0 and kinds["queries"][2] == 0, kinds
    upload(plain)
    with plain.client() as client:
        load(client)
    with InProcess() as single:
        alone = single.client()
        upload(alone)
        load(alone)
        with plain.client() as through, cluster.nodes[0].client() as serving:
            for path in QUERIES:
                query = path.read_text()
                want = solutions(alone, query)
                assert solutions(through, query) == want == solutions(serving, query), path.name
                for accept in ("text/csv", "application/sparql-results+xml"):
                    forwarded = through.get("/sparql", params={"query": query}, headers={"Accept": accept})
                    direct = serving.get("/sparql", params={"query": query}, headers={"Accept": accept})
                    assert forwarded.status_code == direct.status_code == 200
                    assert forwarded.headers["content-type"] == direct.headers["content-type"]
                    assert sorted(forwarded.text.splitlines()) == sorted(direct.text.splitlines()), path.name
    raw = Raw(plain.port)
    try:  # a smuggling attempt never reaches the forward: uvicorn's parser refuses it
        raw.send(b"POST /sparql HTTP/1.1\r\nHost: x\r\nContent-Type: application/sparql-query\r\n"
                 b"Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /v1/backup HTTP/1.1\r\n\r\n")
        head, _ = raw.response()
        assert head.status == 400
    finally:
        raw.close()


def solutions(client: Any, query: str) -> collections.Counter:
    """The solution multiset of a SELECT (or the boolean of an ASK), in JSON."""
    r = client.post("/sparql", content=query.encode(), headers={"Content-Type": "application/sparql-query"})
    assert r.status_code == 200, r.text
    answer = r.json()
    if "boolean" in answer:
        return collections.Counter([answer["boolean"]])
    return collections.Counter(frozenset((var, tuple(sorted(term.items()))) for var, term in row.items())
                               for row in answer["results"]["bindings"])
