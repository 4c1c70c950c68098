"""Degrees of match, distance and ranking: the contract's matching semantics as pure functions.

Per component, a registered term `r` against a queried term `q` (`ANY` is the wildcard):
- exact:     r ≡ q, or both wildcard;
- narrower:  r ⊑ q and not r ≡ q, or q wildcard and r not;
- broader:   q ⊑ r and not r ≡ q, or r wildcard and q not;
- otherwise no match.
A tag is exact when all three components are exact, narrower when all are exact or narrower,
broader when all are exact or broader, overlap when all match but in both directions.
Ranking: exact, narrower, broader, overlap; then distance ascending; then tag text.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from semreg.errors import BadRequest
from semreg.rdf.terms import ANY, Tag

EXACT, NARROWER, BROADER, OVERLAP = "exact", "narrower", "broader", "overlap"
DEGREES = (EXACT, NARROWER, BROADER, OVERLAP)
RANK = {d: n for n, d in enumerate(DEGREES)}
DEFAULT_MATCH = frozenset({EXACT, NARROWER})


class Relations(Protocol):
    """What matching needs of the reasoner (`semreg.reasoning.reasoner.Hierarchy` provides it)."""

    def is_equivalent(self, a: str, b: str) -> bool: ...

    def distance(self, lower: str, upper: str) -> int | None: ...


ComponentMatch = tuple[str, int]  # (degree, distance)


def component_match(r: str, q: str, rel: Relations) -> ComponentMatch | None:
    """How a registered term relates to a queried one, with its distance; None when it does not match."""
    if r == ANY or q == ANY:
        if r == q:
            return EXACT, 0
        return (NARROWER, 0) if q == ANY else (BROADER, 0)
    if rel.is_equivalent(r, q):
        return EXACT, 0
    d = rel.distance(r, q)
    if d is not None:
        return NARROWER, d
    d = rel.distance(q, r)
    if d is not None:
        return BROADER, d
    return None


def combine(degrees: Iterable[str]) -> str | None:
    """The tag degree from its three component degrees."""
    seen = set(degrees)
    if seen <= {EXACT}:
        return EXACT
    if seen <= {EXACT, NARROWER}:
        return NARROWER
    if seen <= {EXACT, BROADER}:
        return BROADER
    if seen <= {EXACT, NARROWER, BROADER}:
        return OVERLAP
    return None


def tag_match(registered: Tag, query: Tag, rel: Relations) -> ComponentMatch | None:
    """(degree, distance) of a registered tag against a query, or None."""
    total = 0
    degrees = []
    for r, q in zip(registered, query):
        m = component_match(r, q, rel)
        if m is None:
            return None
        degrees.append(m[0])
        total += m[1]
    degree = combine(degrees)
    return None if degree is None else (degree, total)


def rank_key(degree: str, distance: int, tag: Tag) -> tuple[int, int, Tag]:
    """Degree, then distance, then the tag's text. IRIs hold no character at or below the space that
    joins the three terms, so comparing the tags as tuples orders them as their texts would."""
    return RANK[degree], distance, tag


def parse_match(value: str | None) -> frozenset[str]:
    """`match=` → the set of degrees: a comma list of degrees, or `all`; default exact,narrower."""
    if value is None or value.strip() == "":
        return DEFAULT_MATCH
    parts = [p.strip().lower() for p in value.split(",") if p.strip()]
    if parts == ["all"]:
        return frozenset(DEGREES)
    unknown = [p for p in parts if p not in RANK]
    if unknown or not parts:
        raise BadRequest(f"match takes a comma list of {', '.join(DEGREES)}, or all; '{unknown[0] if unknown else value}' "
                         f"is none of them.", field="match")
    return frozenset(parts)


def needs_directions(match: frozenset[str]) -> tuple[bool, bool]:
    """Whether a query with these degrees needs narrower and broader expansions of its components."""
    return bool(match & {NARROWER, OVERLAP}), bool(match & {BROADER, OVERLAP})


def sort_matches(matches: Sequence[tuple[Tag, str, int]]) -> list[tuple[Tag, str, int]]:
    return sorted(matches, key=lambda m: rank_key(m[1], m[2], m[0]))
