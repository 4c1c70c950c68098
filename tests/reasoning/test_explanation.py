"""Why a tag matched: the steps per component, on tiny hierarchies, as a table."""
from __future__ import annotations

import pytest
from support.hierarchies import EX, hierarchy

from semreg.rdf.terms import ANY, Tag
from semreg.reasoning.explanation import explain
from semreg.reasoning.hierarchy import EQUIVALENT_CLASS, SAME_AS, SUB_CLASS, SUB_PROPERTY, TYPE

ONTOLOGY = """
:Obra a owl:Class . :Livro rdfs:subClassOf :Obra . :Romance rdfs:subClassOf :Livro .
:Book owl:equivalentClass :Livro .
:tem a owl:ObjectProperty . :temPrincipal rdfs:subPropertyOf :tem .
:dom a :Romance . :dom owl:sameAs :quixote .
:C owl:intersectionOf ( :Obra :Extra ) . :Extra a owl:Class .
"""


def step(s, p, o, asserted=True):
    return {"s": EX + s, "p": p, "o": EX + o, "asserted": asserted}


@pytest.mark.parametrize("registered, queried, degree, steps", [
    ("Romance", "Obra", "narrower", [step("Romance", SUB_CLASS, "Livro"), step("Livro", SUB_CLASS, "Obra")]),
    ("Obra", "Romance", "broader", [step("Romance", SUB_CLASS, "Livro"), step("Livro", SUB_CLASS, "Obra")]),
    ("Book", "Livro", "exact", [step("Book", EQUIVALENT_CLASS, "Livro")]),
    ("Livro", "Livro", "exact", []),
    ("dom", "Livro", "narrower", [step("dom", TYPE, "Romance"), step("Romance", SUB_CLASS, "Livro")]),
    ("dom", "quixote", "exact", [step("dom", SAME_AS, "quixote")]),
    ("C", "Obra", "narrower", [step("C", SUB_CLASS, "Obra", asserted=False)]),  # entailed, no asserted path
])
def test_subject_steps(registered, queried, degree, steps):
    why = explain(hierarchy(ONTOLOGY), Tag(EX + registered, ANY, ANY), Tag(EX + queried, ANY, ANY))
    assert why["s"] == {"degree": degree, "steps": steps}
    assert why["p"] == why["o"] == {"degree": "exact", "steps": [], "wildcard": True}


def test_predicates_take_subproperty_steps_and_wildcards_say_so():
    h = hierarchy(ONTOLOGY)
    why = explain(h, Tag(EX + "Livro", EX + "temPrincipal", ANY), Tag(EX + "Obra", EX + "tem", EX + "Obra"))
    assert why["p"] == {"degree": "narrower", "steps": [step("temPrincipal", SUB_PROPERTY, "tem")]}
    assert why["o"] == {"degree": "broader", "steps": [], "wildcard": True}
    assert explain(h, Tag(EX + "Obra", ANY, ANY), Tag(EX + "tem", ANY, ANY))["s"] == {"degree": None, "steps": []}


def test_a_chain_is_as_long_as_the_distance():
    h = hierarchy(ONTOLOGY)
    for lower in ("Romance", "Livro", "dom", "C"):
        assert len(h.chain(EX + lower, EX + "Obra")) - 1 == h.distance(EX + lower, EX + "Obra")
    assert h.chain(EX + "Obra", EX + "Romance") is None
