"""Reading OWLS-TC 3 on the real files (`semreg.bench.owlstc`), and the retrieval measures as tables."""
from __future__ import annotations

import math

import pyoxigraph as ox
import pytest
from support.paths import DATA

from semreg.bench import retrieval
from semreg.bench.owlstc import ONTOLOGY_BASE, ontology_ntriples, read_collection, read_service
from semreg.bench.scenarios import owlstc as scenario

OWLSTC = DATA / "owls-tc3"
ONT = "http://127.0.0.1/ontology/"


@pytest.fixture(scope="module")
def collection():
    return read_collection(OWLSTC)


def test_the_collection_is_read_whole(collection):
    assert len(collection.services) == 1007
    assert len(collection.requests) == 14
    assert len({s.instance_id for s in collection.services}) == 1007
    files = {s.file for s in collection.services}
    for request in collection.requests:
        assert request.relevant and request.relevant <= files
        assert set(request.grades) <= files and all(0 <= g <= 3 for g in request.grades.values())
        assert request.service.inputs or request.service.outputs


def test_a_service_by_reference_and_one_inline():
    car = read_service(OWLSTC / "queries" / "1.1" / "car_price_service.owls")
    assert car.inputs == (ONT + "my_ontology.owl#Car",)
    assert car.outputs == (ONT + "concept.owl#Price",)
    inline = read_service(OWLSTC / "services" / "1.1" / "AcceptCostAndHealingPlan_service.owls")
    assert inline.inputs == (ONT + "PatientOntology.owl#CostAndHealingPlan",)
    assert len(inline.outputs) == 1


def test_ontologies_with_bad_rdf_ids_and_other_encodings_become_n_triples(collection):
    names = {p.name for p in collection.ontologies}
    assert {"simplified_sumo.owl", "support.owl", "time-entry.owl"} <= names and "Process.owl" not in names
    for path in collection.ontologies:
        if path.name in ("simplified_sumo.owl", "support.owl", "my_ontology.owl"):
            triples = list(ox.parse(ontology_ntriples(path), ox.RdfFormat.N_TRIPLES))
            assert triples
    sumo = ontology_ntriples(OWLSTC / "ontology" / "simplified_sumo.owl").decode()
    assert ONTOLOGY_BASE + "simplified_sumo.owl#" in sumo


@pytest.mark.parametrize("ranked, relevant, expected", [
    (["a", "b", "c"], {"a", "c"}, {"P": 2 / 3, "R": 1.0, "AP": (1 + 2 / 3) / 2}),
    (["x", "a"], {"a", "b"}, {"P": 0.5, "R": 0.5, "AP": 0.25}),
    ([], {"a"}, {"P": 0.0, "R": 0.0, "AP": 0.0}),
])
def test_binary_measures(ranked, relevant, expected):
    assert retrieval.binary(ranked, relevant) == pytest.approx(expected)


@pytest.mark.parametrize("ranked, grades, expected", [
    (["a", "b"], {"a": 3, "b": 1}, {"P": 4 / 6, "R": 1.0, "AP": 1.0, "nDCG": 1.0}),           # the ideal order
    (["b", "a"], {"a": 3, "b": 1}, {"P": 4 / 6, "R": 1.0, "AP": (1 + 4 / 2) / (3 + 4 / 2),
                                    "nDCG": (1 + 7 / math.log2(3)) / (7 + 1 / math.log2(3))}),
    (["x", "a"], {"a": 2}, {"P": 2 / 6, "R": 1.0, "AP": 0.5, "nDCG": 3 / math.log2(3) / 3}),  # a miss first
    (["x"], {"a": 2}, {"P": 0.0, "R": 0.0, "AP": 0.0, "nDCG": 0.0}),
])
def test_graded_measures(ranked, grades, expected):
    assert retrieval.graded(ranked, grades) == pytest.approx(expected)


def test_macro_is_the_mean_per_measure():
    assert retrieval.macro([{"P": 1.0, "AP": 0.5}, {"P": 0.0, "AP": 0.25}]) == {"P": 0.5, "AP": 0.375}


def test_each_request_is_asked_as_the_variants_say(collection):
    no_outputs = next(r for r in collection.requests if not r.service.outputs)
    for variant in scenario.VARIANTS:
        body = scenario.question(no_outputs, variant)
        # which services its inputs can feed: any service taking an input, its inputs as provided, in every variant
        assert body["all"] == [{"s": scenario.ANY, "p": scenario.INPUT}]
        assert body["provided"] == [{"s": i, "p": scenario.INPUT} for i in no_outputs.service.inputs]
    both = next(r for r in collection.requests if r.service.outputs and r.service.inputs)
    assert "provided" not in scenario.question(both, "similar")
    scored = scenario.question(both, "similar, provided, by score")
    assert scored["rank"] == "score" and scored["match"] == "all,similar" and "provided" in scored
    assert "rank" not in scenario.question(both, "similar, provided")
    assert "min_similarity" not in scored  # the server's default floor
    lower = scenario.question(both, "similar >= 0.1, provided, by score")
    assert lower == {**scored, "min_similarity": 0.1}
