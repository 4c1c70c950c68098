"""The `similar` degree over HTTP (API.md, Discovery): only when `match` names it, ranked after every logical
degree by similarity, bounded by `min_similarity` (a 400 otherwise), explained by `/v1/expand`, never routed to
unless asked. In this process, on a fake clock."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.inprocess import InProcess

ONTOLOGY = b"""@prefix : <http://example.org/f#> . @prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
:Media a owl:Class . :Film rdfs:subClassOf :Media . :ComedyFilm rdfs:subClassOf :Film .
:ActionFilm rdfs:subClassOf :Film . :ScienceFictionFilm rdfs:subClassOf :Film .
:Price a owl:Class . :Camera a owl:Class .
"""
EX = "http://example.org/f#"
KINDS = {"comedy": "ComedyFilm", "action": "ActionFilm", "scifi": "ScienceFictionFilm", "film": "Film",
         "price": "Price"}
LOGICAL = ("exact", "narrower", "broader", "overlap")


@pytest.fixture(scope="module")
def client():
    with InProcess() as srv:
        c = srv.client()
        assert c.put("/v1/ontologies/films", content=ONTOLOGY, headers={"Content-Type": "text/turtle"}).status_code == 201
        for n, (iid, kind) in enumerate(KINDS.items()):
            r = c.put(f"/v1/instances/{iid}", json={"service": iid, "address": "10.0.0.1", "port": 8000 + n, "ttl": 0,
                                                    "tags": [f"<{EX}{kind}>"]})
            assert r.status_code == 201, r.text
        yield c


def discover(client, **params):
    r = client.get("/v1/discover", params={"s": EX + "ComedyFilm", **params})
    assert r.status_code == 200, r.text
    return r.json()


def test_similar_ranks_after_every_logical_degree_by_similarity(client):
    body = discover(client, match="all,similar")
    ranked = [(v["id"], v["match"]["degree"]) for v in body["instances"]]
    assert ranked[:2] == [("comedy", "exact"), ("film", "broader")]
    similar = [v for v in body["instances"] if v["match"]["degree"] == "similar"]
    assert {v["id"] for v in similar} == {"action", "scifi"}
    values = [v["match"]["similarity"] for v in similar]
    assert values == sorted(values, reverse=True) and all(0 <= s <= 1 for s in values)
    assert "price" not in {v["id"] for v in body["instances"]}


def test_min_similarity_is_the_floor(client):
    everything = discover(client, match="similar", min_similarity="0")
    assert {v["id"] for v in everything["instances"]} >= {"action", "scifi"}
    top = max(v["match"]["similarity"] for v in everything["instances"])
    above = discover(client, match="similar", min_similarity=str(top))
    assert [v["match"]["similarity"] for v in above["instances"]] == [top]
    assert discover(client, match="similar", min_similarity="1")["instances"] == []


@pytest.mark.parametrize("params", [{"match": "all", "min_similarity": "0.5"}, {"min_similarity": "0.5"},
                                    {"match": "similar", "min_similarity": "1.5"},
                                    {"match": "similar", "min_similarity": "-0.1"},
                                    {"match": "similar", "min_similarity": "nan"},
                                    {"match": "similar", "min_similarity": "close"},
                                    {"match": "similar,nearly"}])
def test_bad_similarity_parameters_are_a_400(client, params):
    r = client.get("/v1/discover", params={"s": EX + "ComedyFilm", **params})
    assert r.status_code == 400, r.text
    assert r.json()["field"] in ("match", "min_similarity")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(degrees=st.lists(st.sampled_from([*LOGICAL, "all"]), max_size=5))
def test_similar_never_appears_unless_match_names_it(client, degrees):
    params = {"match": ",".join(degrees)} if degrees and (degrees == ["all"] or "all" not in degrees) else {}
    body = discover(client, **params)
    assert all(v["match"]["degree"] != "similar" for v in body["instances"])
    assert all(m["degree"] != "similar" for m in body["matches"])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.text(max_size=12))
def test_any_min_similarity_is_a_floor_or_a_400(client, raw):
    r = client.get("/v1/discover", params={"s": EX + "ComedyFilm", "match": "similar", "min_similarity": raw})
    assert r.status_code in (200, 400), r.text
    if r.status_code == 200:
        floor = float(raw) if raw.strip() else 0.3
        assert all(v["match"]["similarity"] >= round(floor, 3) for v in r.json()["instances"])


def test_route_never_picks_a_similar_match_unless_asked(client):
    for _ in range(5):
        r = client.get("/v1/route", params={"s": EX + "ScienceFictionFilm", "match": "all"}, follow_redirects=False)
        assert r.status_code == 307 and r.headers["X-Semreg-Instance"] in ("scifi", "film")
    r = client.get("/v1/route", params={"s": EX + "Camera", "match": "all"}, follow_redirects=False)
    assert r.status_code == 503
    r = client.get("/v1/route", params={"s": EX + "ComedyFilm", "match": "similar"}, follow_redirects=False)
    assert r.status_code == 307 and r.headers["X-Semreg-Instance"] in ("action", "scifi")


def test_expand_explains_a_similar_match(client):
    r = client.get("/v1/expand", params={"s": EX + "ComedyFilm", "match": "exact,similar"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["match"] == ["exact", "similar"]
    near = {row["iri"]: row for row in body["components"]["s"] if row["degree"] == "similar"}
    assert near[EX + "ActionFilm"]["shared_words"][0] == "film"
    assert near[EX + "ActionFilm"]["common_ancestor"] == EX + "Film"
    tags = {t["tag"]["s"]: t for t in body["tags"] if t["degree"] == "similar"}
    why = tags[EX + "ActionFilm"]["why"]["s"]
    assert why["degree"] is None and "film" in why["similar"]["shared_words"]
    assert 0 < tags[EX + "ActionFilm"]["similarity"] <= 1
