"""The reasoner: what the hierarchy index makes of a closure, and the closure of real ontologies."""
from __future__ import annotations

import pyoxigraph as ox
import pytest
from conftest import DATA

from semreg.reasoner import build_hierarchy, compute_closure
from semreg.rules import OWL, RDF, RDFS

EX = "http://example.org/r#"
PREFIXES = f"@prefix : <{EX}> . @prefix rdfs: <{RDFS}> . @prefix owl: <{OWL}> . @prefix rdf: <{RDF}> .\n"


def triples(turtle: str) -> list[ox.Triple]:
    return [ox.Triple(q.subject, q.predicate, q.object)
            for q in ox.parse((PREFIXES + turtle).encode(), format=ox.RdfFormat.TURTLE)]


def hierarchy(turtle: str):
    ts = triples(turtle)
    return build_hierarchy(ts, compute_closure(ts).inferred)


@pytest.mark.parametrize("rule, turtle, lower, upper", [
    ("scm-sco: subClassOf is transitive", ":A rdfs:subClassOf :B . :B rdfs:subClassOf :C .", "A", "C"),
    ("scm-spo: subPropertyOf is transitive", ":p rdfs:subPropertyOf :q . :q rdfs:subPropertyOf :r .", "p", "r"),
    ("cax-sco: types go up the class hierarchy", ":i a :A . :A rdfs:subClassOf :B .", "i", "B"),
    ("scm-eqc1: equivalent classes are mutual subclasses", ":A owl:equivalentClass :B . :C rdfs:subClassOf :B .",
     "C", "A"),
    ("scm-eqp1: equivalent properties", ":p owl:equivalentProperty :q . :r rdfs:subPropertyOf :q .", "r", "p"),
    ("eq-rep-s: same-as individuals share types", ":i owl:sameAs :j . :j a :A .", "i", "A"),
    ("scm-int: an intersection is below its members",
     ":C owl:intersectionOf ( :A :B ) . :A a owl:Class . :B a owl:Class .", "C", "A"),
])
def test_rules_reach_the_hierarchy(rule, turtle, lower, upper):
    h = hierarchy(turtle)
    assert h.is_below(EX + lower, EX + upper), rule


def test_equivalence_merges_terms_and_costs_no_step():
    h = hierarchy(":Car rdfs:subClassOf :Vehicle . :Automobile owl:equivalentClass :Car . "
                  ":ElectricCar rdfs:subClassOf :Car .")
    assert h.is_equivalent(EX + "Car", EX + "Automobile")
    assert h.distance(EX + "Automobile", EX + "Vehicle") == 1
    assert h.distance(EX + "ElectricCar", EX + "Automobile") == 1
    assert EX + "Automobile" in h.narrower_distances(EX + "Vehicle")


def test_mutual_subclasses_are_equivalent():
    h = hierarchy(":A rdfs:subClassOf :B . :B rdfs:subClassOf :A .")
    assert h.is_equivalent(EX + "A", EX + "B") and not h.is_below(EX + "A", EX + "B")


def test_distance_is_fewest_asserted_steps():
    h = hierarchy(":A rdfs:subClassOf :B . :B rdfs:subClassOf :C . :C rdfs:subClassOf :D . :A rdfs:subClassOf :D .")
    assert h.distance(EX + "A", EX + "D") == 1
    assert h.distance(EX + "B", EX + "D") == 2
    assert h.distance(EX + "D", EX + "A") is None


def test_entailed_only_relation_counts_one_step():
    h = hierarchy(":C owl:intersectionOf ( :A :B ) . :A a owl:Class . :B a owl:Class .")
    assert h.distance(EX + "C", EX + "A") == 1


def test_classes_typed_by_meta_classes_are_not_individuals():
    """schema.org says schema:Class ≡ rdfs:Class; that must not put every class below schema:Intangible."""
    h = hierarchy(":Class owl:equivalentClass rdfs:Class . :Class rdfs:subClassOf :Intangible . "
                  ":Book a rdfs:Class ; rdfs:subClassOf :Work . :Work a rdfs:Class .")
    assert h.kind(EX + "Book") == "class"
    assert not h.is_below(EX + "Book", EX + "Intangible")
    assert h.is_below(EX + "Book", EX + "Work")


def test_inconsistency_is_data_not_a_crash():
    ts = triples(":A owl:disjointWith :B . :i a :A , :B .")
    closure = compute_closure(ts)
    h = build_hierarchy(ts, closure.inferred)
    assert h.is_below(EX + "i", EX + "A")


def test_empty_input_entails_only_the_axioms():
    """cls-thing, cls-nothing1, prp-ap and dt-type1 hold in every closure; none of them is in the index."""
    closure = compute_closure([])
    assert {(t.subject.value, t.predicate.value, t.object.value) for t in closure.inferred} >= {
        (OWL + "Thing", RDF + "type", OWL + "Class"), (RDFS + "label", RDF + "type", OWL + "AnnotationProperty")}
    assert build_hierarchy([], closure.inferred).size == 0


@pytest.mark.slow
def test_schema_org_and_dbpedia_together():
    store = ox.Store()
    for name in ("schemaorg-30.0-current-https.ttl", "dbpedia-ontology-2026.08.20.ttl"):
        store.bulk_load(path=str(DATA / "ontologies" / name), format=ox.RdfFormat.TURTLE,
                        to_graph=ox.NamedNode("urn:t:" + name))
    ts = list(store.quads_for_pattern(None, None, None, None))
    closure = compute_closure(ts)
    h = build_hierarchy(ts, closure.inferred)
    s = "https://schema.org/"
    narrower = h.narrower_distances(s + "CreativeWork")
    assert narrower[s + "Book"] == 1 and narrower[s + "Movie"] == 1
    assert narrower[s + "Audiobook"] == 2  # Audiobook ⊑ Book ⊑ CreativeWork
    assert s + "Person" not in narrower
    dbo = "http://dbpedia.org/ontology/"
    assert h.is_below(dbo + "LightNovel", dbo + "Novel") and h.is_below(dbo + "Book", dbo + "Work")
    assert h.kind(s + "genre") == "property"
