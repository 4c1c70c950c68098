"""The closure (reasonable) against the reference (owlrl), rule by rule, and the hierarchy index."""
from __future__ import annotations

import owlrl
import pyoxigraph as ox
import pytest
import rdflib
from conftest import DATA, ONTOLOGIES

from semreg.reasoner import OWL, RDF, RDFS, build_hierarchy, compute_closure, hierarchy_triples, is_meta

EX = "http://example.org/r#"
PREFIXES = f"@prefix : <{EX}> . @prefix rdfs: <{RDFS}> . @prefix owl: <{OWL}> . @prefix rdf: <{RDF}> .\n"


def triples(turtle: str) -> list[ox.Triple]:
    return [ox.Triple(q.subject, q.predicate, q.object)
            for q in ox.parse((PREFIXES + turtle).encode(), format=ox.RdfFormat.TURTLE)]


def hierarchy(turtle: str):
    ts = triples(turtle)
    return build_hierarchy(ts, compute_closure(ts).inferred)


def relation(graph_triples, predicate: str) -> set[tuple[str, str]]:
    return {(s.value, o.value) for s, p, o in ((t.subject, t.predicate, t.object) for t in graph_triples)
            if p.value == predicate and isinstance(s, ox.NamedNode) and isinstance(o, ox.NamedNode)
            and s != o and o.value not in (OWL + "Thing",) and s.value != OWL + "Nothing"}


def owlrl_relation(data: bytes, fmt: str, predicate: str) -> set[tuple[str, str]]:
    g = rdflib.Graph()
    g.parse(data=data, format=fmt)
    owlrl.DeductiveClosure(owlrl.OWLRL_Semantics).expand(g)
    return {(str(s), str(o)) for s, o in g.subject_objects(rdflib.URIRef(predicate))
            if isinstance(s, rdflib.URIRef) and isinstance(o, rdflib.URIRef) and s != o
            and str(o) != OWL + "Thing" and str(s) != OWL + "Nothing"}


@pytest.mark.parametrize("path", [ONTOLOGIES / "obras.ttl", DATA.parent / "conformance" / "vehicles.ttl",
                                  DATA / "ontologies" / "foaf-0.99.n3"], ids=lambda p: p.name)
@pytest.mark.parametrize("predicate", [RDFS + "subClassOf", RDFS + "subPropertyOf"], ids=["subClassOf", "subPropertyOf"])
def test_closure_agrees_with_owlrl(path, predicate):
    data = path.read_bytes()
    ts = [ox.Triple(q.subject, q.predicate, q.object) for q in ox.parse(data, format=ox.RdfFormat.TURTLE)]
    closure = compute_closure(ts)
    h = build_hierarchy(ts, closure.inferred)
    completed = [*ts, *closure.inferred, *hierarchy_triples(h, [*ts, *closure.inferred])]
    ours = relation(completed, predicate)
    reference = owlrl_relation(data, "turtle", predicate)
    assert ours == reference
    for lower, upper in reference:
        if is_meta(lower) or is_meta(upper):
            continue  # RDF/RDFS/OWL vocabulary is not part of the matching hierarchy
        assert h.is_below(lower, upper) or h.is_equivalent(lower, upper), (lower, upper)


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


def test_empty_input():
    closure = compute_closure([])
    assert closure.inferred == [] and build_hierarchy([], []).size == 0


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
