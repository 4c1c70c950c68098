"""The terms the uploaded ontologies know, and the known terms nearest to one they do not.

A term is known when it is the wildcard, an RDF, RDFS, OWL or XSD term, or an IRI in a triple of an
uploaded ontology (its subject, predicate or object). A tag or query may name any other IRI (a service
may say what no ontology models yet), but such a term matches only itself, which is also what a
misspelling does, silently: `ex:Livr` registers, and `ex:Obar` discovers nothing. So registration and
discovery answers carry a `TermWarning` for each unknown term, with the known terms closest to it:

- the same local name in another letter case (`ex:livro` → `ex:Livro`);
- else local names of the same namespace that are close as strings (`difflib`, ratio ≥ 0.75);
- else the same local name in another namespace (`http://schema.org/Person` → `https://schema.org/Person`).

The namespace of an IRI is everything up to its last `#`, or else its last `/`, or else its last `:`
(`semreg.rdf.terms.split_iri`).
A `Lexicon` is built per set of ontologies and never changes; what it finds is remembered.
"""
from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from semreg.rdf.terms import ANY, OWL, RDF, RDFS, XSD
from semreg.rdf.terms import split_iri as split

BUILT_IN = (RDF, RDFS, OWL, XSD)
MAX_WARNINGS = 20  # distinct unknown terms named in one answer (the first, by position)
MAX_SUGGESTIONS = 3
CLOSE = 0.75  # difflib's ratio from which a local name is close
REMEMBERED = 10_000  # suggestions kept per lexicon (bounded memory)

Compact = Callable[[str], str]  # an IRI as a person reads it (a CURIE where a prefix covers it)


@dataclass(frozen=True)
class TermWarning:
    """A term no uploaded ontology knows, where the request named it first, and the known terms close to it."""

    field: str
    iri: str
    suggestions: tuple[str, ...] = ()

    def message(self, compact: Compact) -> str:
        shown = compact(self.iri)
        named = shown if shown == self.iri else f"{shown} ({self.iri})"
        text = f"{self.field}: {named} is not a term of any uploaded ontology, so it matches only itself"
        if self.suggestions:
            close = [compact(s) for s in self.suggestions]
            text += "; did you mean " + (close[0] if len(close) == 1 else ", ".join(close[:-1]) + " or " + close[-1])
            return text + "?"
        return text + "."

    def as_json(self, compact: Compact) -> dict[str, Any]:
        return {"field": self.field, "term": self.iri, "message": self.message(compact),
                "suggestions": list(self.suggestions)}


class Lexicon:
    """The IRIs of the uploaded ontologies (`terms`: ontology name → its IRIs)."""

    def __init__(self, terms: Mapping[str, frozenset[str]] | None = None) -> None:
        self._sets = tuple((terms or {}).values())
        self._locals: dict[str, dict[str, list[str]]] | None = None  # namespace → lower-case local → IRIs
        self._anywhere: dict[str, list[str]] = {}  # lower-case local → IRIs, over every namespace
        self._suggested: dict[str, tuple[str, ...]] = {}

    def knows(self, iri: str) -> bool:
        for terms in self._sets:  # the usual answer first: a term of an uploaded ontology
            if iri in terms:
                return True
        return iri == ANY or iri.startswith(BUILT_IN)

    def check(self, named: Iterable[tuple[str, str]]) -> list[TermWarning]:
        """A warning per distinct unknown IRI among `(field, iri)` pairs, at its first field (at most
        `MAX_WARNINGS`)."""
        found: dict[str, str] = {}
        for field, iri in named:
            if iri not in found and not self.knows(iri):
                found[iri] = field
                if len(found) == MAX_WARNINGS:
                    break
        return [TermWarning(field, iri, self.suggest(iri)) for iri, field in found.items()]

    def suggest(self, iri: str) -> tuple[str, ...]:
        """The known terms closest to `iri`, closest first (none when nothing is close)."""
        hit = self._suggested.get(iri)
        if hit is None:
            hit = self._suggest(iri)
            if len(self._suggested) >= REMEMBERED:
                self._suggested.clear()
            self._suggested[iri] = hit
        return hit

    def _suggest(self, iri: str) -> tuple[str, ...]:
        namespace, local = split(iri)
        key = local.lower()
        here = self._index().get(namespace, {})
        found = list(here.get(key, ()))
        if not found and key:
            for close in difflib.get_close_matches(key, here, MAX_SUGGESTIONS, CLOSE):
                found += here[close]
        if not found and key:
            found = [t for t in self._anywhere.get(key, ()) if t != iri]
        return tuple(dict.fromkeys(found))[:MAX_SUGGESTIONS]

    def _index(self) -> dict[str, dict[str, list[str]]]:
        if self._locals is None:
            locals_: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
            anywhere: dict[str, list[str]] = defaultdict(list)
            for iri in sorted(set().union(*self._sets)):
                namespace, local = split(iri)
                if local:
                    locals_[namespace][local.lower()].append(iri)
                    anywhere[local.lower()].append(iri)
            self._locals, self._anywhere = locals_, anywhere
        return self._locals
