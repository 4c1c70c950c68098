"""The contract's matching semantics as tables (API.md, Matching)."""
from __future__ import annotations

import pytest

from semreg.errors import BadRequest
from semreg.rdf.terms import ANY, Tag
from semreg.reasoning.matching import (
    BROADER,
    DEFAULT_MATCH,
    EXACT,
    NARROWER,
    OVERLAP,
    combine,
    component_match,
    parse_match,
    rank_key,
    sort_matches,
    tag_match,
)


class Rel:
    """A hand-made hierarchy: parents by asserted step, and equivalences."""

    def __init__(self, parents: dict[str, list[str]], equivalent: list[tuple[str, str]] = ()):
        self.parents = parents
        self.eq = {a: b for a, b in equivalent} | {b: a for a, b in equivalent}

    def canon(self, x):
        return min(x, self.eq.get(x, x))

    def is_equivalent(self, a, b):
        return a == b or self.canon(a) == self.canon(b)

    def distance(self, lower, upper):
        if self.is_equivalent(lower, upper):
            return 0
        frontier, seen, d = {self.canon(lower)}, set(), 0
        while frontier:
            d += 1
            nxt = set()
            for x in frontier:
                for m in {x, self.eq.get(x, x)}:
                    nxt |= {self.canon(p) for p in self.parents.get(m, [])}
            if self.canon(upper) in nxt:
                return d
            seen |= frontier
            frontier = nxt - seen
        return None


# The thesis ontology: Livro, Filme, Pintura ⊑ Obra ⊑ Thing; Romance ⊑ Livro; Terror ⊑ Genero.
OBRAS = Rel({"Livro": ["Obra"], "Filme": ["Obra"], "Pintura": ["Obra"], "Obra": ["Thing"], "Romance": ["Livro"],
             "Terror": ["Genero"], "temGeneroPrincipal": ["temUmGenero"]})
# The conformance vehicles: Automobile ≡ Car ⊑ Vehicle; ElectricCar ⊑ Car; Biodiesel a Diesel ⊑ Fuel.
VEHICLES = Rel({"Car": ["Vehicle"], "ElectricCar": ["Car"], "Truck": ["Vehicle"], "Diesel": ["Fuel"],
                "Electricity": ["Fuel"], "Biodiesel": ["Diesel"], "hasPrimaryFuel": ["hasFuel"]},
               [("Automobile", "Car")])


@pytest.mark.parametrize("r, q, expected", [
    ("Livro", "Livro", (EXACT, 0)),
    ("Livro", "Obra", (NARROWER, 1)),
    ("Romance", "Obra", (NARROWER, 2)),
    ("Obra", "Livro", (BROADER, 1)),
    ("Thing", "Romance", (BROADER, 3)),
    ("Livro", "Filme", None),
    ("Terror", "Obra", None),
    (ANY, ANY, (EXACT, 0)),
    ("Livro", ANY, (NARROWER, 0)),
    (ANY, "Livro", (BROADER, 0)),
])
def test_component_degrees(r, q, expected):
    assert component_match(r, q, OBRAS) == expected


@pytest.mark.parametrize("r, q, expected", [
    ("Automobile", "Car", (EXACT, 0)),        # owl:equivalentClass counts both ways
    ("Car", "Automobile", (EXACT, 0)),
    ("Automobile", "Vehicle", (NARROWER, 1)),  # equivalent terms count as one node
    ("ElectricCar", "Automobile", (NARROWER, 1)),
    ("Biodiesel", "Fuel", (NARROWER, 2)),     # an individual's type is a step
    ("hasPrimaryFuel", "hasFuel", (NARROWER, 1)),
])
def test_equivalence_and_individuals(r, q, expected):
    assert component_match(r, q, VEHICLES) == expected


@pytest.mark.parametrize("degrees, expected", [
    ((EXACT, EXACT, EXACT), EXACT),
    ((EXACT, NARROWER, EXACT), NARROWER),
    ((NARROWER, NARROWER, NARROWER), NARROWER),
    ((BROADER, EXACT, EXACT), BROADER),
    ((NARROWER, BROADER, EXACT), OVERLAP),
    ((NARROWER, EXACT, BROADER), OVERLAP),
])
def test_tag_degree_from_components(degrees, expected):
    assert combine(degrees) == expected


CASE_STUDY_TAGS = {
    "gw": Tag("Thing", "type", "Obra"),
    "livros-a": Tag("Obra", "type", "Livro"),
    "livros": Tag("Livro", "temUmGenero", "Terror"),
    "filmes": Tag("Filme", "temUmGenero", "Terror"),
    "pinturas": Tag("Obra", "type", "Pintura"),
}


def test_case_study_obra_tem_um_genero_terror():
    """The thesis query matches exactly the Livro and Filme tags, both narrower."""
    query = Tag("Obra", "temUmGenero", "Terror")
    got = {name: tag_match(tag, query, OBRAS) for name, tag in CASE_STUDY_TAGS.items()}
    assert {n: m for n, m in got.items() if m is not None and m[0] in DEFAULT_MATCH} == {
        "livros": (NARROWER, 1), "filmes": (NARROWER, 1)}


@pytest.mark.parametrize("tag, query, expected", [
    # conformance: (Vehicle hasFuel Fuel)
    (Tag("Truck", "hasFuel", "Diesel"), Tag("Vehicle", "hasFuel", "Fuel"), (NARROWER, 2)),
    (Tag("Automobile", "hasFuel", "Biodiesel"), Tag("Vehicle", "hasFuel", "Fuel"), (NARROWER, 3)),
    (Tag("ElectricCar", "hasPrimaryFuel", "Electricity"), Tag("Vehicle", "hasFuel", "Fuel"), (NARROWER, 4)),
    (Tag("Vehicle"), Tag("Vehicle", "hasFuel", "Fuel"), (BROADER, 0)),
    # concept-only queries
    (Tag("Automobile", "hasFuel", "Biodiesel"), Tag("Car"), (NARROWER, 0)),
    (Tag("ElectricCar", "hasPrimaryFuel", "Electricity"), Tag("Car"), (NARROWER, 1)),
    (Tag("Vehicle"), Tag("Car"), (BROADER, 1)),
    (Tag("Truck", "hasFuel", "Diesel"), Tag("Car"), None),
    # overlap: narrower subject, broader object
    (Tag("Car", "hasFuel", "Fuel"), Tag("Vehicle", "hasFuel", "Diesel"), (OVERLAP, 2)),
    (Tag("Automobile", "hasFuel", "Biodiesel"), Tag("Automobile", "hasPrimaryFuel", "Electricity"), None),
])
def test_tag_degrees_and_distances(tag, query, expected):
    assert tag_match(tag, query, VEHICLES) == expected


def test_ranking_is_degree_then_distance_then_text():
    a, b, c, d = Tag("b"), Tag("a"), Tag("c"), Tag("d")
    ranked = sort_matches([(a, NARROWER, 2), (b, NARROWER, 2), (c, EXACT, 5), (d, BROADER, 0)])
    assert [m[0] for m in ranked] == [c, b, a, d]
    assert rank_key(EXACT, 9, a) < rank_key(NARROWER, 0, a) < rank_key(BROADER, 0, a) < rank_key(OVERLAP, 0, a)


@pytest.mark.parametrize("text, expected", [
    (None, {EXACT, NARROWER}), ("", {EXACT, NARROWER}), ("all", {EXACT, NARROWER, BROADER, OVERLAP}),
    ("broader", {BROADER}), ("exact, overlap", {EXACT, OVERLAP}), ("NARROWER", {NARROWER}),
])
def test_parse_match(text, expected):
    assert parse_match(text) == expected


@pytest.mark.parametrize("text", ["sideways", "exact,nope", ",", "all,exact"])
def test_parse_match_rejects_unknown_degrees(text):
    with pytest.raises(BadRequest):
        parse_match(text)
