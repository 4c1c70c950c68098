"""Liveness that no request takes away (docs/operations/limits.md): a question's work runs in slices, so heartbeats and
`/healthz` are answered while it runs; a question past a budget is a 400 naming it, past its time a 503; while
the loop is behind, new request work is shed with 503 and `Retry-After` and heartbeats are not. In this
process: the app over HTTP, the real store in memory, a fake clock for leases.

The lane's slice is set to 0 where a test needs a question to hand the loop back at every checkpoint: what is
asserted is then the order in which answers arrive, not how long anything took."""
from __future__ import annotations

import logging
import time

import pytest
from support.inprocess import InProcess

HO = "http://ho.example/o#"
FOUND = {"all": [{"s": f"ho:Ask{k}Widget", "p": f"ho:rel{k}", "o": f"ho:Ask{k}Style"} for k in range(64)],
         "match": "all,similar", "min_similarity": 0.011}
ONTOLOGY = b"""@prefix ho: <http://ho.example/o#> . @prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ho:Service a owl:Class . ho:Widget a owl:Class ; rdfs:subClassOf ho:Service .
ho:Style a owl:Class . ho:Genre a owl:Class ; rdfs:subClassOf ho:Style .
ho:hasGenre a owl:ObjectProperty ."""


def widgets(n: int, start: int = 0) -> list[dict]:
    """Instances whose two tags name terms no ontology knows (the freeze found from outside)."""
    return [{"id": f"w{i}", "service": "w", "address": "10.0.0.1", "port": 1000 + i, "ttl": 0,
             "tags": [f"ho:Widget{i}Service ho:hasGenre ho:Genre{i}Style", f"ho:Widget{i}Service ho:hasKind ho:Kind{i}"]}
            for i in range(start, start + n)]


def setup(server: InProcess, n: int, ontology: bool = True) -> None:
    c = server.client()
    assert c.put("/v1/prefixes/ho", json={"iri": HO}).status_code in (200, 201)
    if ontology:
        assert c.put("/v1/ontologies/ho", content=ONTOLOGY, headers={"Content-Type": "text/turtle"}).status_code == 201
    assert c.post("/v1/instances/batch", json={"instances": widgets(n)}).status_code == 200


@pytest.fixture(scope="module")
def srv():
    with InProcess(max_scored=1) as server:
        setup(server, 800)
        yield server


def test_the_question_that_froze_the_node_scores_nothing():
    """64 patterns of terms no ontology knows, at a floor just above 0, over 1,600 such registered terms: each was
    a candidate and scored one by one, for every pattern (2.4 s, the loop held). They share no weighted word with
    the question, so none is looked at: it answers within a budget of one term scored."""
    with InProcess(max_scored=1) as server:
        setup(server, 800, ontology=False)
        found(server.client())


def found(c) -> None:
    for floor in (0.011, 0.0111, 0.0112):  # a new floor each time misses every cache
        r = c.post("/v1/discover", json={**FOUND, "min_similarity": floor})
        assert r.status_code == 200, r.text
        assert r.json()["instances"] == []
    r = c.put("/v1/queries/found", json=FOUND)  # the saved query's check asks the same
    assert r.status_code in (200, 201), r.text


def test_a_question_past_its_budget_is_a_400_naming_it_and_changes_nothing(srv, caplog):
    """The same registrations once an ontology names widgets: the question's words are weighted, its candidates
    are scored, one term is past the budget."""
    c = srv.client()
    caplog.set_level(logging.INFO, "semreg.work")
    before = c.get("/v1/queries").json()
    near = {"all": [{"s": "ho:Widget7Service", "p": "ho:hasGenre", "o": "ho:Genre7Style"}], "match": "similar",
            "min_similarity": 0.05}
    r = c.post("/v1/discover", json=near)  # its words are the ontology's: candidates to score, past 1
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["budget"] == "scored" and body["limit"] == 1 and body["spent"] > 1
    assert "--max-scored" in body["error"] and "too broad" in body["error"]
    r = c.put("/v1/queries/near", json=near)
    assert r.status_code == 400 and r.json()["budget"] == "scored"
    assert c.get("/v1/queries").json() == before
    assert 'semreg_work_refused_total{reason="scored"} 2.0' in c.get("/metrics").text
    # the operator's line: who asked (the token's name, here none, and the address), what and why
    [line, *_] = [r for r in caplog.records if r.getMessage() == "request work refused"]
    assert (line.caller, line.reason, line.what) == ("anonymous@127.0.0.1", "scored", "this question")


def test_heartbeats_and_healthz_are_answered_while_a_question_runs():
    with InProcess() as server:
        setup(server, 300)
        c = server.client()
        assert c.put("/v1/instances/beat", json={"service": "b", "address": "10.0.0.2", "port": 1, "ttl": 30,
                                                 "tags": ["ho:Widget"]}).status_code == 201
        server.node.lane.slice_s = 0.0  # the question hands the loop back at every checkpoint
        question = c.submit("POST", "/v1/discover", json={
            "all": [{"s": f"ho:Widget{k}Service", "p": "ho:hasGenre", "o": f"ho:Genre{k}Style"} for k in range(64)],
            "match": "all,similar", "min_similarity": 0.05})
        assert c.put("/v1/instances/beat/heartbeat", json={}).status_code == 200
        assert c.get("/healthz").status_code == 200
        assert not question.done()  # both answered while the question still ran
        assert question.result(60).status_code == 200
        assert server.node.lane.slices > 64


def test_work_past_its_time_limit_is_a_503_with_retry_after():
    with InProcess() as server:
        setup(server, 10)
        server.node.lane.time_limit_s = -1.0  # already past at its first checkpoint
        r = server.client().post("/v1/discover", json={"all": ["ho:Widget1Service ho:hasGenre ho:Genre1Style"]})
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert "--work-time-limit" in r.json()["error"]


def test_while_the_loop_is_behind_questions_are_shed_and_heartbeats_are_not():
    with InProcess(shed_late_share=0.5) as server:
        setup(server, 10)
        c = server.client()
        assert c.put("/v1/instances/beat", json={"service": "b", "address": "10.0.0.2", "port": 1, "ttl": 30,
                                                 "tags": ["ho:Widget"]}).status_code == 201
        lag = server.node.lag
        now = time.monotonic()
        lag.observe(1.2, now - 0.1)  # the loop ran 1.2 s late, then 0.6 s: 80 % of the window in stalls
        lag.observe(0.6, now)
        r = c.get("/v1/discover", params={"s": "ho:Widget"})
        assert r.status_code == 503 and r.headers["retry-after"] == "2", r.text
        assert "shedding" in r.json()["error"]
        assert c.put("/v1/instances/beat/heartbeat", json={}).status_code == 200
        assert c.get("/healthz").status_code == 200
        assert c.get("/v1/instances/beat").status_code == 200
        assert server.node.lane.refused["shed"] >= 1
        metrics = c.get("/metrics").text
        assert 'semreg_work_refused_total{reason="shed"} 1.0' in metrics
        assert "semreg_loop_late_share 0.8" in metrics
