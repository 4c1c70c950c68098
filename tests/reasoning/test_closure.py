"""The closure engine: a sequence of changes gives what a fresh computation of the result gives."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.owlrl_reference import ontologies

from semreg.rdf import parsing
from semreg.reasoning.closure import Closure
from semreg.reasoning.rules.triggers import OWL, RDF, RDFS
from semreg.reasoning.terms import Terms

EX = "http://example.org/c#"


def parse(data: bytes):
    """As an upload is parsed (blank nodes labelled by the document, the same on every parse)."""
    return parsing.parse(data, "text/turtle").triples


PREFIXES = f"@prefix : <{EX}> . @prefix rdfs: <{RDFS}> . @prefix owl: <{OWL}> . @prefix rdf: <{RDF}> .\n"


def facts_of(closure: Closure) -> set[tuple[str, str, str]]:
    terms = closure.terms.terms
    return {(str(terms[s]), str(terms[p]), str(terms[o])) for s, p, o in closure.facts()}


def fresh(graphs: dict[str, str]) -> set[tuple[str, str, str]]:
    closure = Closure()
    for name in sorted(graphs):
        closure.assert_graph(name, closure.intern(parse(graphs[name].encode())))
    return facts_of(closure)


changes = st.lists(st.tuples(st.sampled_from("abc"), st.one_of(st.none(), ontologies(terms=(5, 15)))),
                   min_size=1, max_size=6)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(changes)
def test_any_sequence_of_changes_gives_the_fresh_closure(steps):
    """Semi-naive insertion and delete-and-rederive, over graphs that share terms, in any order."""
    closure = Closure()
    graphs: dict[str, str] = {}
    for name, text in steps:
        if text is None:
            graphs.pop(name, None)
            closure.retract_graph(name)
        else:
            graphs[name] = text
            closure.assert_graph(name, closure.intern(parse(text.encode())))
        assert facts_of(closure) == fresh(graphs)


# graphs of individuals the same as literals, some of one data value (dt-eq), most of different ones (dt-diff)
_LITERALS = ("42", "42.0", '"+042"^^xsd:int', "-15", '"abc"', '"abc"@en', '"300"^^xsd:byte', '"<a/>"^^rdf:XMLLiteral',
             '"<a></a>"^^rdf:XMLLiteral', '"2009"^^xsd:gYear')
_SAME_LINE = st.one_of(
    st.tuples(st.integers(0, 3), st.sampled_from(_LITERALS)).map(lambda t: f":i{t[0]} owl:sameAs {t[1]} ."),
    st.tuples(st.integers(0, 3), st.integers(0, 3)).map(lambda t: f":i{t[0]} owl:sameAs :i{t[1]} ."),
    st.tuples(st.integers(0, 3), st.sampled_from(_LITERALS)).map(lambda t: f":i{t[0]} :p {t[1]} ."),
    st.just(":p a owl:FunctionalProperty ."))
literal_changes = st.lists(st.tuples(st.sampled_from("abc"), st.one_of(st.none(), st.lists(_SAME_LINE, min_size=1,
                                                                                          max_size=5).map(
    lambda ls: f"{PREFIXES}@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .\n" + "\n".join(ls)))),
    min_size=1, max_size=6)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(literal_changes)
def test_data_values_under_any_sequence_of_changes(steps):
    """dt-eq and dt-diff, which read literals of several facts, come and go as the fresh closure has them."""
    closure = Closure()
    graphs: dict[str, str] = {}
    for name, text in steps:
        if text is None:
            graphs.pop(name, None)
            closure.retract_graph(name)
        else:
            graphs[name] = text
            closure.assert_graph(name, closure.intern(parse(text.encode())))
        assert facts_of(closure) == fresh(graphs)


def test_dt_diff_only_between_literals_the_same_as_something():
    """A literal held only as a value (a label, an assertion) is compared with nothing: the triples
    dt-diff would give it have a literal subject, which RDF cannot hold, and cost a pair each."""
    closure = closure_of(g=':w owl:sameAs 42 . :v owl:sameAs -15 . :x :p 7 , "abc" .')
    different = {(str(closure.terms.terms[s]), str(closure.terms.terms[o]))
                 for s, p, o in closure.facts(closure.terms.iri_ids[OWL + "differentFrom"])}
    assert ('"42"^^<http://www.w3.org/2001/XMLSchema#integer>', '"-15"^^<http://www.w3.org/2001/XMLSchema#integer>'
            ) in different
    assert (f"<{EX}w>", f"<{EX}v>") in different
    assert not any("7" in s or "abc" in s or "7" in o or "abc" in o for s, o in different)


def closure_of(**graphs: str) -> Closure:
    closure = Closure()
    for name, turtle in graphs.items():
        closure.assert_graph(name, closure.intern(parse((PREFIXES + turtle).encode())))
    return closure


def holds(closure: Closure, s: str, p: str, o: str) -> bool:
    ids = closure.terms.iri_ids
    full = [x if x.startswith("http") else {"a": RDF + "type", "sco": RDFS + "subClassOf"}.get(x, EX + x) for x in (s, p, o)]
    if any(x not in ids for x in full):
        return False
    return closure.has(*(ids[x] for x in full))


# graphs, the graph withdrawn, a triple that must stay, a triple that must go (DRed's cases)
WITHDRAWALS = [
    ("a fact asserted by two graphs stays until both withdraw it",
     {"g1": ":A rdfs:subClassOf :B .", "g2": ":A rdfs:subClassOf :B ."}, "g1", ("A", "sco", "B"), None),
    ("a fact derived two ways stays when one way goes (re-derived)",
     {"g1": ":A rdfs:subClassOf :B . :B rdfs:subClassOf :D .", "g2": ":A rdfs:subClassOf :C . :C rdfs:subClassOf :D ."},
     "g1", ("A", "sco", "D"), ("A", "sco", "B")),
    ("a fact asserted in one graph and derived from another stays",
     {"g1": ":A rdfs:subClassOf :C .", "g2": ":A rdfs:subClassOf :B . :B rdfs:subClassOf :C ."},
     "g1", ("A", "sco", "C"), None),
    ("what only the withdrawn graph supported goes, down a chain",
     {"g1": ":B rdfs:subClassOf :C .", "g2": ":A rdfs:subClassOf :B . :x a :A ."},
     "g1", ("x", "a", "B"), ("x", "a", "C")),
    ("scm-cls's owl:Nothing ⊑ c is re-derived from another graph's declaration",
     {"g1": ":C a owl:Class .", "g2": ":C a owl:Class ; rdfs:subClassOf :D ."},
     "g1", (OWL + "Nothing", "sco", "C"), None),
    ("owl:Nothing ⊑ c goes with the last declaration of c",
     {"g1": ":C a owl:Class .", "g2": ":C rdfs:subClassOf :D ."}, "g1", ("C", "sco", "D"), (OWL + "Nothing", "sco", "C")),
    ("a list's conclusions go with its axiom (cls-int1, scm-int)",
     {"g1": ":C owl:intersectionOf ( :A :B ) .", "g2": ":x a :A , :B ."}, "g1", ("x", "a", "A"), ("x", "a", "C")),
    ("owl:sameAs and everything eq-rep copied go together",
     {"g1": ":i owl:sameAs :j .", "g2": ":i a :A . :j a :B ."}, "g1", ("j", "a", "B"), ("i", "a", "B")),
    ("a cycle that supports itself does not survive its support (eq-sym)",
     {"g1": ":i owl:sameAs :j .", "g2": ":k a :A ."}, "g1", ("k", "a", "A"), ("j", OWL + "sameAs", "i")),
    ("dt-diff goes with the last owl:sameAs of one of its literals",
     {"g1": ":v owl:sameAs -15 .", "g2": ":w owl:sameAs 42 . :u owl:sameAs 7 ."}, "g1",
     ("w", OWL + "differentFrom", "u"), ("w", OWL + "differentFrom", "v")),
    ("dt-diff is re-derived through another owl:sameAs of its literal",
     {"g1": ":v owl:sameAs -15 .", "g2": ":w owl:sameAs 42 . :u owl:sameAs -15 ."}, "g1",
     ("w", OWL + "differentFrom", "u"), ("w", OWL + "differentFrom", "v")),
    ("a transitive property's closure is re-derived through what remains (prp-trp)",
     {"g1": ":p a owl:TransitiveProperty . :x :p :y .", "g2": ":p a owl:TransitiveProperty . :y :p :z . :x :p :w . :w :p :z ."},
     "g1", ("x", "p", "z"), ("x", "p", "y")),
]


@pytest.mark.parametrize("case, graphs, withdrawn, stays, goes", WITHDRAWALS, ids=[w[0] for w in WITHDRAWALS])
def test_withdrawing_a_graph(case, graphs, withdrawn, stays, goes):
    closure = closure_of(**graphs)
    change = closure.retract_graph(withdrawn)
    assert holds(closure, *stays), case
    if goes is not None:
        assert not holds(closure, *goes), case
        assert any(closure.terms.iris[f[0]] is not None for f in change.removed)
    rest = {k: PREFIXES + v for k, v in graphs.items() if k != withdrawn}
    assert facts_of(closure) == fresh(rest)


def test_replacing_a_graph_withdraws_only_what_it_no_longer_says():
    closure = closure_of(g=":A rdfs:subClassOf :B . :B rdfs:subClassOf :C .")
    change = closure.assert_graph("g", closure.intern(parse((PREFIXES + ":A rdfs:subClassOf :B . :B rdfs:subClassOf :D .")
                                                            .encode())))
    assert holds(closure, "A", "sco", "D") and not holds(closure, "A", "sco", "C")
    ids = closure.terms.iri_ids
    assert (ids[EX + "A"], ids[RDFS + "subClassOf"], ids[EX + "B"]) not in change.removed  # kept, not re-derived


def test_the_same_graph_again_changes_nothing():
    closure = closure_of(g=":A rdfs:subClassOf :B . :x a :A .")
    change = closure.assert_graph("g", closure.intern(parse((PREFIXES + ":A rdfs:subClassOf :B . :x a :A .").encode())))
    assert change.added == [] and change.removed == []


def test_terms_are_interned_once_with_the_vocabulary_first():
    terms = Terms()
    first = terms.iri_id(EX + "A")
    assert terms.iri_id(EX + "A") == first and terms.iris[first] == EX + "A"
    assert terms.iris[0] == RDF + "type"
