"""The hierarchy index: what it makes of a closure, and its incremental update against a full build."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.hierarchies import EX, hierarchy, reasoner_of
from support.owlrl_reference import ontologies

from semreg.rdf import parsing
from semreg.reasoning.hierarchy import EQUIVALENCES, SUB_CLASS, SUB_PROPERTY, TYPE, excluded
from semreg.reasoning.reasoner import Reasoner, hierarchy_rows
from semreg.reasoning.rules.triggers import OWL, RDF


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
    ("scm-int, scm-eqc1, scm-sco: equivalent to an anonymous intersection",
     ":F owl:equivalentClass [ owl:intersectionOf ( :D [ a owl:Restriction ; owl:onProperty :h ; "
     "owl:someValuesFrom :G ] ) ] .", "F", "D"),
    ("scm-cls: a declared class is below owl:Thing", ":A a owl:Class .", "A", OWL + "Thing"),
    ("prp-dom: what a property is said of", ":p rdfs:domain :A . :x :p :y .", "x", "A"),
])
def test_rules_reach_the_hierarchy(rule, turtle, lower, upper):
    h = hierarchy(turtle)
    assert h.is_below(EX + lower if ":" not in lower else lower, upper if ":" in upper else EX + upper), rule


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
    """schema.org says schema:Class ≡ rdfs:Class. RL then types every class by schema:Class and so by
    schema:Intangible (cax-eqc1, cax-sco): the closure has it, the index leaves it out (its one exception)."""
    reasoner = reasoner_of(":Class owl:equivalentClass rdfs:Class . :Class rdfs:subClassOf :Intangible . "
                           ":Book a rdfs:Class ; rdfs:subClassOf :Work . :Work a rdfs:Class .")
    ids = reasoner.closure.terms.iri_ids
    assert reasoner.closure.has(ids[EX + "Book"], ids[RDF + "type"], ids[EX + "Intangible"])
    h = reasoner.hierarchy
    assert h.kind(EX + "Book") == "class"
    assert not h.is_below(EX + "Book", EX + "Intangible")
    assert h.is_below(EX + "Book", EX + "Work")


def test_an_individual_of_a_punned_class_is_not_below_its_types():
    """Types are not transitive: i a :Eagle, :Eagle a :Species does not make i a :Species."""
    h = hierarchy(":i a :Eagle . :Eagle a :Species .")
    assert h.kind(EX + "Eagle") == "individual"
    assert h.is_below(EX + "i", EX + "Eagle") and h.is_below(EX + "Eagle", EX + "Species")
    assert not h.is_below(EX + "i", EX + "Species")


def test_inconsistency_is_data_not_a_crash():
    h = hierarchy(":A owl:disjointWith :B . :i a :A , :B .")
    assert h.is_below(EX + "i", EX + "A")


def expected_index(reasoner: Reasoner) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(below, equivalent) as docs/concepts/reasoning.md maps the closure onto the index."""
    h = reasoner.hierarchy
    rows = hierarchy_rows(reasoner.closure)
    out = h.meta_like
    below, same = set(), set()
    for p, group in rows.items():
        for s, o, _ in group:
            if excluded(s, out) or excluded(o, out):
                continue
            if p in EQUIVALENCES:
                same.add((s, o))
            elif p in (SUB_CLASS, SUB_PROPERTY) or (p == TYPE and h.kind(s) == "individual"):
                below.add((s, o))
    return below, same


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(ontologies(terms=(5, 20)))
def test_the_index_is_the_closure(text):
    """x ⊑ y in the index exactly when the closure has x subClassOf / subPropertyOf y, or x type y for an
    individual x; x ≡ y exactly when it has an equivalence or sameAs between them."""
    reasoner = Reasoner()
    reasoner.put("t", parsing.parse(text.encode(), "text/turtle").triples)
    h = reasoner.hierarchy
    below, same = expected_index(reasoner)
    assert {(a, b) for a, b in same if not h.is_equivalent(a, b)} == set()
    assert {(a, b) for a, b in below if not (h.is_below(a, b) or h.is_equivalent(a, b))} == set()
    for lower, r in h.rep.items():
        assert (lower, r) in same or (r, lower) in same
    for r, ups in h.up.items():
        for u in ups:
            assert any((m, n) in below for m in h.equivalents(r) for n in h.equivalents(u)), (r, u)


changes = st.lists(st.tuples(st.sampled_from("ab"), st.one_of(st.none(), ontologies(terms=(5, 15)))),
                   min_size=1, max_size=5)


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(changes)
def test_the_incremental_index_is_the_full_one(steps):
    """`semreg.reasoning.reindex.update`, forced on every change, gives what `semreg.reasoning.hierarchy.index` builds."""
    reasoner = Reasoner(reindex_share=float("inf"), rebuild_share=float("inf"))
    graphs: dict[str, list] = {}
    for name, text in steps:
        if text is None:
            graphs.pop(name, None)
            reasoner.delete(name)
        else:
            graphs[name] = parsing.parse(text.encode(), "text/turtle").triples
            reasoner.put(name, graphs[name])
        full = Reasoner()
        full.rebuild(graphs)
        assert reasoner.hierarchy == full.hierarchy
