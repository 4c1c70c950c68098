"""Which changes a watch of a question naming `similar` recomputes for: a tag close enough to match as a near
miss, or one it matched, in its environment; not every change there."""
from __future__ import annotations

import pytest
from support.hierarchies import EX, hierarchy

from semreg.rdf.terms import ANY, Tag
from semreg.reasoning.matching import parse_match
from semreg.registry.discovery import DiscoverQuery, relevant
from semreg.registry.registry import Change

FILMS = """
:Film rdfs:subClassOf :Media . :ComedyFilm rdfs:subClassOf :Film . :ActionFilm rdfs:subClassOf :Film .
:Price a owl:Class . :Camera a owl:Class .
"""


def tag(name: str) -> Tag:
    return Tag(EX + name, ANY, ANY)


def change(name: str, environment: str = "default") -> Change:
    return Change("x", "registered", 1, "up", True, frozenset({tag(name)}), frozenset({"svc"}),
                  frozenset({environment}))


@pytest.mark.parametrize("match, floor, name, environment, expected", [
    ("exact,similar", None, "ActionFilm", "default", True),    # a near miss
    ("exact,similar", None, "Camera", "default", False),       # nothing like a comedy
    ("exact,similar", None, "ActionFilm", "prod", False),      # another environment
    ("exact,similar", "0.99", "ActionFilm", "default", False),  # below the floor
    ("exact", None, "ActionFilm", "default", False),           # similar not asked
    ("exact,similar", None, "ComedyFilm", "default", True),    # the question's own term
])
def test_a_change_is_relevant_to_a_similar_question_when_it_is_near(match, floor, name, environment, expected):
    q = DiscoverQuery(tag("ComedyFilm"), parse_match(match, floor))
    assert relevant(hierarchy(FILMS), q, frozenset(), [change(name, environment)]) is expected
