"""Interned terms: each RDF term an integer, the vocabulary of `semreg.reasoning.rules.triggers` first at
fixed ids, with what the rules need to know of each literal (its RL datatypes, its data value)."""
from __future__ import annotations

from collections.abc import Hashable

import pyoxigraph as ox

from semreg.reasoning import literals
from semreg.reasoning.rules.triggers import DATATYPE_ANCESTORS, RDFS, RL_DATATYPES, VOCABULARY

Term = ox.NamedNode | ox.BlankNode | ox.Literal
NAMED, BLANK, LITERAL = range(3)


class Terms:
    """Interned terms: id ↔ pyoxigraph term; vocabulary ids as in `semreg.reasoning.rules.triggers.VOCABULARY`."""

    def __init__(self) -> None:
        self._ids: dict[Term, int] = {}
        self.terms: list[Term] = []
        self.iris: list[str | None] = []  # the IRI of a named node, None for blank nodes and literals
        self.iri_ids: dict[str, int] = {}
        self.kinds = bytearray()  # NAMED, BLANK or LITERAL
        self.literal_types: dict[int, tuple[int, ...]] = {}
        self.literal_values: dict[int, Hashable] = {}  # a literal's data value (`semreg.reasoning.literals`)
        self.same_value: dict[Hashable, list[int]] = {}  # the literals of each data value
        for iri in VOCABULARY:
            self.id(ox.NamedNode(iri))

    def id(self, term: Term) -> int:
        i = self._ids.get(term)
        if i is None:
            i = self._ids[term] = len(self.terms)
            self.terms.append(term)
            if isinstance(term, ox.NamedNode):
                self.iris.append(term.value)
                self.iri_ids[term.value] = i
                self.kinds.append(NAMED)
            else:
                self.iris.append(None)
                if isinstance(term, ox.Literal):
                    self.kinds.append(LITERAL)
                    self._type_literal(i, term)
                else:
                    self.kinds.append(BLANK)
        return i

    def known(self, term: Term) -> int | None:
        return self._ids.get(term)

    def iri_id(self, iri: str) -> int:
        return self.id(ox.NamedNode(iri))

    def _type_literal(self, i: int, literal: ox.Literal) -> None:
        dt = literal.datatype.value
        types = _TYPE_IDS.get(dt)
        if types is None:
            return
        self.literal_types[i] = types
        key = literals.value(dt, literal.value, literal.language)
        if key is not None:
            self.literal_values[i] = key
            self.same_value.setdefault(key, []).append(i)

    def __len__(self) -> int:
        return len(self.terms)


# an RL datatype's IRI → the ids of it and the datatypes above it (RL datatypes have fixed ids), its own
# first (dt-eq reads it). rdfs:Literal is an RL datatype whose value space holds every data value, so
# dt-type2 types every literal by it; owlrl's table of the datatypes above each leaves it out. An
# ill-typed literal (no data value) is typed so too, as by its own datatype: it is an inconsistency
# (dt-not-type), from which any triple follows.
_LITERAL = RDFS + "Literal"
_TYPE_IDS = {dt: tuple(VOCABULARY.index(d) for d in dict.fromkeys((dt, *DATATYPE_ANCESTORS.get(dt, ()), _LITERAL)))
             for dt in RL_DATATYPES}
