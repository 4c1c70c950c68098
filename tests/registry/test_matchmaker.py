"""The learned matchmaker (`semreg.registry.matchmaker`): its model and features as tables, the shipped weights, and
the score through the real reasoner and registry in conjunctive discovery with `similar` (`rank=score` too)."""
from __future__ import annotations

import json
import math
from importlib import resources

import orjson
import pyoxigraph as ox
import pytest

from semreg.clock import FakeClock
from semreg.errors import BadRequest
from semreg.rdf.terms import ANY, PrefixMap, Tag
from semreg.reasoning.matching import BY_SCORE, DEFAULT_MATCH, RANK, parse_match, with_ranking
from semreg.reasoning.reasoner import build_hierarchy, compute_closure
from semreg.reasoning.signals import SAME, Signals
from semreg.reasoning.similarity import index_of
from semreg.registry import conjunctive, matchmaker
from semreg.registry.conjunctive import Combined, ConjunctiveQuery
from semreg.registry.instances import Registration
from semreg.registry.matchmaker import FEATURES, Model
from semreg.registry.query_params import conjunctive_query
from semreg.registry.registry import Registry

EX = "http://ex.org/m#"
ONTOLOGY = f"""@prefix : <{EX}> . @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
:Film rdfs:subClassOf :Media . :ComedyFilm rdfs:subClassOf :Film . :ActionFilm rdfs:subClassOf :Film .
:VideoMedia rdfs:subClassOf :Media . :Price rdfs:subClassOf :Amount . :EuroPrice rdfs:subClassOf :Price .
:Camera rdfs:subClassOf :Device . :DigitalCamera rdfs:subClassOf :Camera .
:out rdfs:subPropertyOf :handles . :in rdfs:subPropertyOf :handles ."""


def out(term: str) -> Tag:
    return Tag(EX + term, EX + "out", ANY)


def into(term: str) -> Tag:
    return Tag(EX + term, EX + "in", ANY)


@pytest.fixture(scope="module")
def hierarchy():
    triples = [ox.Triple(q.subject, q.predicate, q.object) for q in ox.parse(ONTOLOGY.encode(), format=ox.RdfFormat.TURTLE)]
    return build_hierarchy(triples, compute_closure(triples).inferred)


# -- the model and the features: tables --------------------------------------------------------------------
def test_the_shipped_weights_load_and_name_every_feature():
    model = matchmaker.shipped()
    assert len(model.weights) == len(FEATURES)
    assert Model.from_json(model.as_json()) == model
    on_disk = json.loads(resources.files("semreg.registry").joinpath(matchmaker.WEIGHTS_FILE).read_text())
    assert set(on_disk["weights"]) == set(FEATURES)


@pytest.mark.parametrize("data, message", [
    ({"bias": 0, "weights": {"text": 1.0}}, "names the weights"),
    ({"bias": "x", "weights": dict.fromkeys(FEATURES, 0.0)}, "bias is a number"),
])
def test_a_model_with_other_features_is_refused(data, message):
    with pytest.raises(ValueError, match=message):
        Model.from_json(data)


def test_the_score_is_the_logistic_of_the_weighted_sum():
    model = Model(-1.0, tuple(1.0 if name == "text" else 0.0 for name in FEATURES))
    x = tuple(0.5 if name == "text" else 0.0 for name in FEATURES)
    assert model.score(x) == round(1 / (1 + math.exp(0.5)), 4)
    assert Model(1000.0, (0.0,) * len(FEATURES)).score(x) == 1.0  # no overflow


def test_features_read_the_degree_the_distance_and_the_mean_signals():
    x = dict(zip(FEATURES, matchmaker.features("narrower", 4, [Signals(1.0, 0.5, 0.0, 0.2), Signals(0.5, 0.5, 0.2, 0.0)],
                                               0.75, False, [Signals(0.2, 0.4, 0.6, 0.0)])))
    assert (x["narrower"], x["broader"], x["overlap"], x["similar"]) == (1.0, 0.0, 0.0, 0.0)
    assert x["distance"] == pytest.approx(math.log1p(2))
    assert (x["text"], x["structure"], x["given_up"], x["assumed"]) == pytest.approx((0.75, 0.5, 0.1, 0.1))
    assert (x["provided"], x["covered"]) == (0.75, 0.0)
    assert (x["input_text"], x["input_structure"], x["input_given_up"]) == pytest.approx((0.2, 0.4, 0.6))
    # without provided (or nothing needed): constants, which change no ranking within a question
    y = dict(zip(FEATURES, matchmaker.features("exact", 0, [SAME], None, None)))
    assert (y["provided"], y["covered"], y["input_text"], y["input_given_up"]) == (1.0, 1.0, 1.0, 0.0)
    assert y["unasked"] == 0.0 and x["unasked"] == 0.0
    z = dict(zip(FEATURES, matchmaker.features("exact", 0, [SAME], None, None, unasked=2)))
    assert z["unasked"] == pytest.approx(math.log1p(2))


def test_a_tags_signals_are_its_weakest_components(hierarchy):
    index = index_of(hierarchy)
    pattern = Tag(EX + "Film", EX + "out", EX + "Price")
    found = matchmaker.tag_signals(index, Tag(EX + "ComedyFilm", EX + "out", EX + "Camera"), pattern)
    film = matchmaker.tag_signals(index, Tag(EX + "ComedyFilm", EX + "out", EX + "Price"), pattern)
    camera = matchmaker.tag_signals(index, Tag(EX + "Film", EX + "out", EX + "Camera"), pattern)
    assert found == Signals(min(film.text, camera.text), min(film.structure, camera.structure),
                            max(film.given_up, camera.given_up), max(film.assumed, camera.assumed))
    assert camera.given_up == 1.0 and film.given_up == 0.0  # Camera is nothing of a Price; ComedyFilm all of a Film
    assert matchmaker.tag_signals(index, pattern, pattern) == SAME


def test_a_need_is_scored_against_the_provided_tag_that_fits_it_best(hierarchy):
    index = index_of(hierarchy)
    best = matchmaker.need(index, into("Camera"), [into("Price"), into("DigitalCamera")])
    assert best is not None and best.given_up == 0.0  # the caller's DigitalCamera is all of a Camera
    assert matchmaker.need(index, out("Camera"), [into("Camera")]) is None  # an output is not what provided stands for


# -- through the registry ----------------------------------------------------------------------------------
SERVICES = {"comedy": [out("ComedyFilm"), into("Camera")], "film": [out("Film"), into("Camera")],
            "action": [out("ActionFilm"), into("Camera")], "video": [out("VideoMedia"), into("Price")],
            "media": [out("Media"), into("DigitalCamera")], "camera": [out("Camera")]}


@pytest.fixture(scope="module")
def registry(hierarchy):
    r = Registry(FakeClock())
    r.catalogue.set_hierarchy(hierarchy)
    r.put_many([Registration(iid, iid, "10.0.0.1", 80, ttl_s=0.0, tags=tuple(tags)) for iid, tags in SERVICES.items()])
    return r


def ask(registry, **body):
    q = conjunctive_query({"all": [{"s": EX + "ComedyFilm", "p": EX + "out"}], **body}, PrefixMap())
    return q, conjunctive.merge(q, [conjunctive.part(registry.catalogue, registry.instances, q)])


def test_with_similar_each_match_is_scored_and_ranked_by_its_score_within_its_degree(registry):
    q, result = ask(registry, match="all,similar", provided=[{"s": EX + "DigitalCamera", "p": EX + "in"}])
    ranked = list(zip(result.members, result.best))
    degrees = [RANK[m.degree] for _, m in ranked]
    assert degrees == sorted(degrees)  # the contract's order: degree first
    for (_, a), (_, b) in zip(ranked, ranked[1:]):
        if a.degree == b.degree:
            assert a.score >= b.score
    model = matchmaker.shipped()
    for _, m in ranked:
        assert 0.0 <= m.score <= 1.0 and len(m.signals) == len(FEATURES)
        assert m.score == model.score(m.signals)  # what the answer shows is what was scored
        assert dict(zip(FEATURES, m.signals))[m.degree if m.degree != "exact" else "narrower"] in (0.0, 1.0)
    # the answer says what each match was scored on
    listed = orjson.loads(conjunctive.match_json(ranked[0][1]))
    assert set(listed["signals"]) == set(FEATURES) and listed["score"] == ranked[0][1].score
    body = orjson.loads(result.rendered())
    assert body["matches"][0]["signals"] == listed["signals"]
    assert body["instances"][0]["match"]["score"] == listed["score"] and "signals" not in body["instances"][0]["match"]


def test_unasked_counts_the_tags_neither_matched_nor_needed(registry):
    def unasked(result):
        return {i.id: dict(zip(FEATURES, m.signals))["unasked"] for i, m in zip(result.members, result.best)}

    provided = [{"s": EX + "DigitalCamera", "p": EX + "in"}]
    _, result = ask(registry, match="all,similar", provided=provided)
    assert unasked(result)["comedy"] == 0.0  # its output is asked, its input needed
    _, result = ask(registry, match="all,similar")
    assert unasked(result)["comedy"] == round(math.log1p(1), 4)  # nothing provided: the input is not asked for
    q, result = ask(registry, match="all,similar", provided=provided, all=[{"s": EX + "Camera", "p": EX + "in"}])
    # the question asks for the input and provides nothing an output stands for: the output is the one unasked
    assert unasked(result)["comedy"] == round(math.log1p(1), 4)


def test_rank_score_mixes_the_degrees_by_score(registry):
    q, result = ask(registry, match="all,similar", rank="score", provided=[{"s": EX + "DigitalCamera", "p": EX + "in"}])
    assert BY_SCORE in q.match
    scores = [m.score for m in result.best]
    assert scores == sorted(scores, reverse=True)
    _, by_degree = ask(registry, match="all,similar", provided=[{"s": EX + "DigitalCamera", "p": EX + "in"}])
    assert {i.id for i in result.members} == {i.id for i in by_degree.members}  # the same answer, ranked otherwise


def test_without_similar_nothing_is_scored_and_the_order_is_the_contracts(registry):
    _, result = ask(registry, match="all")
    assert all(m.score is None and m.signals is None for m in result.best)
    assert [(i.id, m.degree) for i, m in zip(result.members, result.best)] == [
        ("comedy", "exact"), ("film", "broader"), ("media", "broader")]
    assert b'"score"' not in result.rendered()


@pytest.mark.parametrize("match, rank, message", [
    ("all", "score", "add similar to match"),
    ("all,similar", "best", "rank takes degree"),
])
def test_rank_score_needs_similar_and_takes_two_values(match, rank, message):
    with pytest.raises(BadRequest, match=message):
        with_ranking(parse_match(match), rank)


def test_rank_degree_is_the_default():
    assert with_ranking(DEFAULT_MATCH, "degree") == with_ranking(DEFAULT_MATCH, None) == DEFAULT_MATCH


def test_ranking_by_score_sorts_combined_matches_across_degrees():
    a = Combined(out("Film"), "narrower", 1, ((out("Film"), "narrower", 1),), 0.5, None, 0.2, None)
    b = Combined(out("Media"), "similar", 0, ((out("Media"), "similar", 400),), 0.6, None, 0.9, None)
    assert sorted([b, a], key=conjunctive.rank) == [a, b]
    assert sorted([a, b], key=conjunctive.rank_by_score) == [b, a]
    assert conjunctive.ranking(ConjunctiveQuery((out("Film"),), parse_match("all,similar") | {BY_SCORE})) \
        is conjunctive.rank_by_score
