"""The reasoner: after any change, the index and the triples of `urn:semreg:inferred` are those of a
computation from scratch, and the change costs what it touches."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.owlrl_reference import ontologies
from support.paths import DATA

from semreg.rdf import parsing
from semreg.reasoning.reasoner import Reasoner, build_hierarchy, compute_closure
from semreg.reasoning.rules.triggers import OWL, RDF, RDFS

EX = "http://example.org/r#"
PREFIXES = f"@prefix : <{EX}> . @prefix rdfs: <{RDFS}> . @prefix owl: <{OWL}> . @prefix rdf: <{RDF}> .\n"
REAL = DATA / "ontologies"


def parsed(path_or_text) -> list:
    if isinstance(path_or_text, str):
        return parsing.parse((PREFIXES + path_or_text).encode(), "text/turtle").triples
    return parsing.parse(path_or_text.read_bytes(), "text/turtle").triples


def same_as_from_scratch(reasoner: Reasoner, graphs: dict[str, list], inferred: set) -> None:
    """The index, the inferred graph (as patched) and its size are those of a fresh computation."""
    fresh = Reasoner()
    outcome = fresh.rebuild(graphs)
    assert reasoner.hierarchy == fresh.hierarchy
    assert inferred == set(map(str, fresh.inferred()))
    assert len(inferred) == outcome.inferred_count


def apply(inferred: set[str], outcome) -> None:
    """What the replica feed does with an outcome: the whole graph, or the patch."""
    if not outcome.full:
        inferred.difference_update(map(str, outcome.inferred_removed))
        inferred.update(map(str, outcome.inferred_added))


def run(reasoner: Reasoner, steps, graphs: dict[str, list], inferred: set[str]) -> None:
    for name, triples in steps:
        if triples is None:
            graphs.pop(name, None)
            outcome = reasoner.delete(name)
        else:
            graphs[name] = triples
            outcome = reasoner.put(name, triples)
        if outcome.full:
            inferred.clear()
            inferred.update(map(str, reasoner.inferred()))
        else:
            apply(inferred, outcome)
        same_as_from_scratch(reasoner, graphs, inferred)


changes = st.lists(st.tuples(st.sampled_from("abc"), st.one_of(st.none(), ontologies(terms=(5, 15)))),
                   min_size=1, max_size=6)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(changes)
def test_generated_changes_patch_to_the_fresh_result(steps):
    steps = [(name, None if text is None else parsing.parse(text.encode(), "text/turtle").triples)
             for name, text in steps]
    reasoner = Reasoner()
    run(reasoner, steps, {}, set(map(str, reasoner.inferred())))


@pytest.mark.slow
def test_real_ontologies_change_to_the_fresh_result():
    """schema.org, then small ontologies beside it (SOSA and SSN share terms; FOAF meets schema.org's
    http terms through its own), replaced and withdrawn in turn."""
    foaf = parsed(REAL / "foaf-0.99.n3")
    steps = [("schema", parsed(REAL / "schemaorg-30.0-current-https.ttl")), ("sosa", parsed(REAL / "sosa-2017-04-17.n3")),
             ("foaf", foaf), ("ssn", parsed(REAL / "ssn-2017-04-17.n3")), ("gr", parsed(REAL / "goodrelations-2011-10-01.n3")),
             ("sosa", None), ("foaf", foaf[: len(foaf) // 2]), ("ssn", None), ("schema", None)]
    reasoner = Reasoner()
    run(reasoner, steps, {}, set(map(str, reasoner.inferred())))


@pytest.mark.slow
def test_small_ontologies_beside_dbpedia_and_schema_org_change_to_the_fresh_result():
    reasoner = Reasoner()
    graphs: dict[str, list] = {}
    inferred = set(map(str, reasoner.inferred()))
    run(reasoner, [("schema", parsed(REAL / "schemaorg-30.0-current-https.ttl")),
                   ("dbpedia", parsed(REAL / "dbpedia-ontology-2026.08.20.ttl"))], graphs, inferred)
    small = [("sosa", parsed(REAL / "sosa-2017-04-17.n3")), ("foaf", parsed(REAL / "foaf-0.99.n3")),
             ("sosa", None), ("foaf", None)]
    for name, triples in small:
        run(reasoner, [(name, triples)], graphs, inferred)


def test_a_small_upload_beside_large_ones_is_incremental():
    reasoner = Reasoner()
    reasoner.put("schema", parsed(REAL / "schemaorg-30.0-current-https.ttl"))
    before = reasoner.hierarchy
    outcome = reasoner.put("sosa", parsed(REAL / "sosa-2017-04-17.n3"))
    assert not outcome.full
    assert 0 < len(outcome.inferred_added) < 1000 and len(outcome.inferred_removed) == 0
    assert outcome.hierarchy.up is not before.up  # a new index, sharing the untouched entries
    assert outcome.hierarchy.up.get("https://schema.org/Book") is before.up.get("https://schema.org/Book")


def test_withdrawing_most_of_what_is_asserted_starts_again():
    reasoner = Reasoner()
    reasoner.put("big", parsed(":A rdfs:subClassOf :B . :B rdfs:subClassOf :C . :C rdfs:subClassOf :D ."))
    reasoner.put("small", parsed(":X rdfs:subClassOf :Y ."))
    assert not reasoner.delete("small").full
    assert reasoner.delete("big").full


def test_an_unchanged_upload_costs_nothing():
    reasoner = Reasoner()
    reasoner.put("t", parsed(":A rdfs:subClassOf :B . :x a :A ."))
    again = reasoner.put("t", parsed(":A rdfs:subClassOf :B . :x a :A ."))
    assert not again.full and len(again.inferred_added) == 0 and len(again.inferred_removed) == 0


def test_a_triple_asserted_where_it_was_entailed_leaves_the_inferred_graph():
    reasoner = Reasoner()
    reasoner.put("a", parsed(":A rdfs:subClassOf :B . :B rdfs:subClassOf :C ."))
    entailed = f"<{EX}A> <{RDFS}subClassOf> <{EX}C>"
    assert entailed in set(map(str, reasoner.inferred()))
    outcome = reasoner.put("b", parsed(":A rdfs:subClassOf :C ."))
    assert [str(t) for t in outcome.inferred_removed] == [entailed]
    outcome = reasoner.delete("b")
    assert [str(t) for t in outcome.inferred_added] == [entailed]


def test_empty_input_entails_only_the_axioms():
    """cls-thing, cls-nothing1, prp-ap and dt-type1 hold in every closure; none of them is in the index."""
    closure = compute_closure([])
    assert {(t.subject.value, t.predicate.value, t.object.value) for t in closure.inferred} >= {
        (OWL + "Thing", RDF + "type", OWL + "Class"), (RDFS + "label", RDF + "type", OWL + "AnnotationProperty")}
    assert build_hierarchy([], closure.inferred).size == 0


@pytest.mark.slow
def test_schema_org_and_dbpedia_together():
    reasoner = Reasoner()
    reasoner.put("schema", parsed(REAL / "schemaorg-30.0-current-https.ttl"))
    reasoner.put("dbpedia", parsed(REAL / "dbpedia-ontology-2026.08.20.ttl"))
    h = reasoner.hierarchy
    s = "https://schema.org/"
    narrower = h.narrower_distances(s + "CreativeWork")
    assert narrower[s + "Book"] == 1 and narrower[s + "Movie"] == 1
    assert narrower[s + "Audiobook"] == 2  # Audiobook ⊑ Book ⊑ CreativeWork
    assert s + "Person" not in narrower
    dbo = "http://dbpedia.org/ontology/"
    assert h.is_below(dbo + "LightNovel", dbo + "Novel") and h.is_below(dbo + "Book", dbo + "Work")
    assert h.kind(s + "genre") == "property"
