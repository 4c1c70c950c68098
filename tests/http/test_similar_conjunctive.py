"""The `similar` degree in conjunctive discovery over HTTP (API.md, Discovery): `POST /v1/discover` and saved `all`
queries take `similar` in `match` and `min_similarity`; a conjunction with a similar pattern ranks after every
logical one; each pattern's match says its own similarity; with `similar`, `provided` ranks instead of filtering.
In this process."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.inprocess import InProcess

from semreg.http.conjunctive_schemas import ConjunctiveView

ONTOLOGY = b"""@prefix : <http://example.org/f#> . @prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
:Media a owl:Class . :Film rdfs:subClassOf :Media . :ComedyFilm rdfs:subClassOf :Film .
:ActionFilm rdfs:subClassOf :Film . :ScienceFictionFilm rdfs:subClassOf :Film .
:Price a owl:Class . :EuroPrice rdfs:subClassOf :Price . :Camera a owl:Class .
:out a owl:ObjectProperty . :in a owl:ObjectProperty .
"""
EX = "http://example.org/f#"
LOGICAL = ("exact", "narrower", "broader", "overlap")
# id → (outputs, inputs)
SERVICES = {"comedy": (["ComedyFilm", "Price"], ["Camera"]), "film": (["Film", "Price"], ["Camera"]),
            "action": (["ActionFilm", "Price"], ["Camera"]), "scifi": (["ScienceFictionFilm", "EuroPrice"], ["Camera"]),
            "action-priced": (["ActionFilm", "Price"], ["Price"]), "camera": (["Camera", "Price"], [])}


def tag(term: str, predicate: str) -> dict[str, str]:
    return {"s": EX + term, "p": EX + predicate}


QUESTION = {"all": [tag("ComedyFilm", "out"), tag("Price", "out")]}


@pytest.fixture(scope="module")
def client():
    with InProcess() as srv:
        c = srv.client()
        assert c.put("/v1/ontologies/films", content=ONTOLOGY, headers={"Content-Type": "text/turtle"}).status_code == 201
        for n, (iid, (outputs, inputs)) in enumerate(SERVICES.items()):
            tags = [tag(o, "out") for o in outputs] + [tag(i, "in") for i in inputs]
            r = c.put(f"/v1/instances/{iid}", json={"service": iid, "address": "10.0.0.1", "port": 8000 + n, "ttl": 0,
                                                    "tags": tags})
            assert r.status_code == 201, r.text
        yield c


def ask(client, **body):
    r = client.post("/v1/discover", json={**QUESTION, **body})
    assert r.status_code == 200, r.text
    found = r.json()
    ConjunctiveView.model_validate(found)
    return found


def test_a_similar_pattern_ranks_the_conjunction_after_every_logical_one(client):
    body = ask(client, match="all,similar")
    ranked = [(v["id"], v["match"]["degree"]) for v in body["instances"]]
    assert ranked[:2] == [("comedy", "exact"), ("film", "broader")]
    similar = {v["id"]: v["match"] for v in body["instances"][2:]}
    assert set(similar) == {"action", "action-priced", "scifi"}
    assert all(m["degree"] == "similar" for m in similar.values())
    action = similar["action"]
    film, price = action["patterns"]
    assert (film["degree"], film["distance"], price["degree"]) == ("similar", 0, "exact")
    assert 0.3 <= film["similarity"] < 1 and "similarity" not in price
    # a similar match's similarity is no path: the conjunction's distance is its logical patterns' sum
    assert action["distance"] == 0 and similar["scifi"]["distance"] == 1
    assert action["similarity"] == round((film["similarity"] + 1) / 2, 3)
    assert all(0 <= v["match"]["similarity"] <= 1 for v in body["instances"])  # on every match, when asked
    assert body["instances"][0]["match"]["similarity"] == 1.0


def test_similar_never_appears_unless_match_names_it(client):
    for match in (None, "all", "exact,narrower,broader,overlap", ["broader", "exact"]):
        body = ask(client, **({} if match is None else {"match": match}))
        assert all(v["match"]["degree"] != "similar" and "similarity" not in v["match"] for v in body["instances"])
        assert {v["id"] for v in body["instances"]} <= {"comedy", "film"}


def test_min_similarity_is_the_floor_of_every_similar_pattern(client):
    loose = ask(client, match="similar,exact", min_similarity=0)
    near = [p["similarity"] for v in loose["instances"] for p in v["match"]["patterns"] if p["degree"] == "similar"]
    top = max(near)
    strict = ask(client, match="similar,exact", min_similarity=top)
    assert all(p["similarity"] >= top for v in strict["instances"] for p in v["match"]["patterns"]
               if p["degree"] == "similar")
    assert {v["id"] for v in ask(client, match="similar,exact", min_similarity=1)["instances"]} == {"comedy"}


def test_with_similar_provided_ranks_instead_of_filtering(client):
    provided = [tag("Camera", "in")]
    strict = ask(client, match="all", provided=provided)
    assert {v["id"] for v in strict["instances"]} == {"comedy", "film"}
    soft = ask(client, match="all,similar", provided=provided)
    views = {v["id"]: v["match"] for v in soft["instances"]}
    assert set(views) == {"comedy", "film", "action", "action-priced", "scifi"}
    assert views["action"]["provided"] == 1.0 and views["action-priced"]["provided"] < 1.0
    order = [v["id"] for v in soft["instances"]]
    assert order.index("action") < order.index("action-priced")  # equally near outputs: the better fed first


def test_a_saved_conjunctive_query_keeps_similar_and_its_floor(client):
    r = client.put("/v1/queries/near-comedies", json={**QUESTION, "match": "all,similar", "min_similarity": 0.35})
    assert r.status_code == 201, r.text
    assert (r.json()["match"], r.json()["min_similarity"]) == ("exact,narrower,broader,overlap,similar", 0.35)
    saved = client.get("/v1/queries/near-comedies/discover")
    assert saved.status_code == 200, saved.text
    assert saved.json()["instances"] == ask(client, match="all,similar", min_similarity=0.35)["instances"]


@pytest.mark.parametrize("body, field", [({"match": "all", "min_similarity": 0.5}, "min_similarity"),
                                          ({"min_similarity": 0.5}, "min_similarity"),
                                          ({"match": "similar", "min_similarity": 1.5}, "min_similarity"),
                                          ({"match": "similar", "min_similarity": -0.1}, "min_similarity"),
                                          ({"match": "similar", "min_similarity": "close"}, "min_similarity"),
                                          ({"match": "similar,nearly"}, "match")])
def test_bad_similarity_fields_are_a_400(client, body, field):
    r = client.post("/v1/discover", json={**QUESTION, **body})
    assert r.status_code == 400, r.text
    assert r.json()["field"] == field


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(degrees=st.lists(st.sampled_from([*LOGICAL, "all", "similar"]), max_size=4),
       floor=st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6)))
def test_any_match_and_floor_is_answered_or_refused(client, degrees, floor):
    body = {**QUESTION, "match": degrees, **({} if floor is None else {"min_similarity": floor})}
    r = client.post("/v1/discover", json=body)
    assert r.status_code in (200, 400), r.text
    if r.status_code == 200:
        found = r.json()["instances"]
        if "similar" not in degrees:
            assert all(v["match"]["degree"] != "similar" for v in found)
        else:
            floor_value = 0.3 if floor is None else float(floor)
            assert all(p["similarity"] >= round(floor_value, 3) for v in found for p in v["match"]["patterns"]
                       if p["degree"] == "similar")


def test_one_term_asked_at_two_positions_is_answered(client):
    # the near terms of a queried term are remembered per position: the subject's are not the object's
    r = client.get("/v1/discover", params={"s": EX + "ComedyFilm", "o": EX + "ComedyFilm", "match": "all,similar"})
    assert r.status_code == 200, r.text
    r = client.post("/v1/discover", json={"all": [{"s": EX + "ComedyFilm", "o": EX + "ComedyFilm"}],
                                          "match": "all,similar"})
    assert r.status_code == 200, r.text


# -- the learned matchmaker: score, signals, rank=score --------------------------------------------------------
def test_with_similar_each_match_says_its_score_and_what_it_was_scored_on(client):
    body = ask(client, match="all,similar", provided=[tag("Camera", "in")])
    for match in body["matches"]:
        assert 0 <= match["score"] <= 1
        assert {"text", "structure", "given_up", "assumed", "provided", "covered", "similar"} <= set(match["signals"])
    scores = {m["score"] for m in body["matches"]}
    for view in body["instances"]:  # each view says its score; what it scored is said once, in matches
        assert view["match"]["score"] in scores and "signals" not in view["match"]
    plain = ask(client, match="all")  # without similar: nothing scored, nothing said
    assert all("score" not in v["match"] and "signals" not in v["match"] for v in plain["instances"])


def test_rank_score_ranks_by_the_score_alone_and_rank_degree_is_the_default(client):
    provided = [tag("Camera", "in")]
    by_score = ask(client, match="all,similar", provided=provided, rank="score")
    scores = [v["match"]["score"] for v in by_score["instances"]]
    assert scores == sorted(scores, reverse=True)
    by_degree = ask(client, match="all,similar", provided=provided)
    assert ask(client, match="all,similar", provided=provided, rank="degree") == by_degree
    assert {v["id"] for v in by_score["instances"]} == {v["id"] for v in by_degree["instances"]}
    degrees = [v["match"]["degree"] for v in by_degree["instances"]]
    assert degrees == sorted(degrees, key=("exact", "narrower", "broader", "overlap", "similar").index)


@pytest.mark.parametrize("body", [{"match": "all", "rank": "score"}, {"rank": "score"},
                                  {"match": "all,similar", "rank": "best"}, {"match": "all,similar", "rank": 1}])
def test_rank_score_without_similar_or_another_rank_is_a_400(client, body):
    r = client.post("/v1/discover", json={**QUESTION, **body})
    assert r.status_code == 400, r.text
    assert r.json()["field"] == "rank"


def test_a_saved_conjunctive_query_keeps_rank_score(client):
    r = client.put("/v1/queries/scored-comedies", json={**QUESTION, "match": "all,similar", "rank": "score"})
    assert r.status_code == 201, r.text
    assert r.json()["rank"] == "score"
    saved = client.get("/v1/queries/scored-comedies/discover")
    assert saved.status_code == 200, saved.text
    assert saved.json()["instances"] == ask(client, match="all,similar", rank="score")["instances"]
    r = client.put("/v1/queries/one-scored", json={"s": EX + "ComedyFilm", "match": "similar", "rank": "score"})
    assert r.status_code == 400 and r.json()["field"] == "rank"
