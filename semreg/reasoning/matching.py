"""Degrees of match, distance and ranking: the contract's matching semantics as pure functions.

Per component, a registered term `r` against a queried term `q` (`ANY` is the wildcard):
- exact:     r ≡ q, or both wildcard;
- narrower:  r ⊑ q and not r ≡ q, or q wildcard and r not;
- broader:   q ⊑ r and not r ≡ q, or r wildcard and q not;
- otherwise no match.
A tag is exact when all three components are exact, narrower when all are exact or narrower,
broader when all are exact or broader, overlap when all match but in both directions.
Ranking: exact, narrower, broader, overlap; then distance ascending; then tag text.

`similar` (`semreg.reasoning.similarity`) ranks after every logical degree and is never in the default
nor in `all`: only a `match` that names it asks for it. A similar match is a tag that fails logically but
whose components are each at least `min_similarity` close to the query's; its distance is
`SIMILARITY_SCALE` · (1 − similarity), rounded, so that ranking by distance ranks by similarity and the
match stays a (tag, degree, distance) triple everywhere (a cluster's parts carry it unchanged); it is shown
as `"distance": 0` with its `similarity`, and a conjunction leaves it out of its summed distance
(`semreg.registry.conjunctive.combine`). The floor travels in the match set as one more element,
`similar>=0.300` (always three places, so one floor is one key of the caches and of the wire). A conjunctive
question's `rank=score` travels the same way (`BY_SCORE`).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Protocol

from semreg.errors import BadRequest
from semreg.rdf.terms import ANY, Tag

EXACT, NARROWER, BROADER, OVERLAP = "exact", "narrower", "broader", "overlap"
DEGREES = (EXACT, NARROWER, BROADER, OVERLAP)
RANK = {d: n for n, d in enumerate(DEGREES)}
DEFAULT_MATCH = frozenset({EXACT, NARROWER})
SIMILAR = "similar"
RANK[SIMILAR] = len(DEGREES)
SIMILARITY_SCALE = 1000
FLOOR_PREFIX = SIMILAR + ">="
DEFAULT_FLOOR = 0.3
BY_SCORE = "rank=score"  # in a match set: rank a conjunction by the matchmaker's score (`with_ranking`)


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


def similar_distance(similarity: float) -> int:
    return round(SIMILARITY_SCALE * (1 - similarity))


def similarity_of(distance: int) -> float:
    """A similar match's similarity from its distance."""
    return round(1 - distance / SIMILARITY_SCALE, 3)


def floor_of(match: frozenset[str]) -> float | None:
    """The similarity floor a match set asks for, or None when it does not name `similar`."""
    if SIMILAR not in match:
        return None
    for part in match:
        if part.startswith(FLOOR_PREFIX):
            return float(part[len(FLOOR_PREFIX):])
    return DEFAULT_FLOOR


def degrees_of(match: frozenset[str]) -> list[str]:
    """The degrees of a match set in ranking order (the floor left out)."""
    return sorted((d for d in match if d in RANK), key=RANK.__getitem__)


def match_text(match: frozenset[str]) -> str:
    return ",".join(degrees_of(match))


def rank_key(degree: str, distance: int, tag: Tag) -> tuple[int, int, Tag]:
    """Degree, then distance, then the tag's text. IRIs hold no character at or below the space that
    joins the three terms, so comparing the tags as tuples orders them as their texts would."""
    return RANK[degree], distance, tag


def parse_match(value: str | None, min_similarity: str | None = None) -> frozenset[str]:
    """`match=` → the set of degrees: a comma list of degrees, or `all` (the logical ones), either with
    `similar`; default exact,narrower. `min_similarity=` (a number in [0, 1]) needs `similar`."""
    if value is None or value.strip() == "":
        match = DEFAULT_MATCH
    else:
        parts = [p.strip().lower() for p in value.split(",") if p.strip()]
        if "all" in parts and set(parts) <= {"all", SIMILAR}:
            parts = [*DEGREES, *(p for p in parts if p == SIMILAR)]
        unknown = [p for p in parts if p not in RANK]
        if unknown or not parts:
            raise BadRequest(f"match takes a comma list of {', '.join(DEGREES)} and {SIMILAR}, or all (with "
                             f"{SIMILAR} or not); '{unknown[0] if unknown else value}' is none of them.", field="match")
        match = frozenset(parts)
    if min_similarity is None or min_similarity.strip() == "":
        return match
    if SIMILAR not in match:
        raise BadRequest("min_similarity sets the floor of the similar degree; add similar to match to ask for it.",
                         field="min_similarity")
    try:
        floor = float(min_similarity)
    except ValueError:
        floor = math.nan
    if not 0.0 <= floor <= 1.0:  # NaN fails too
        raise BadRequest(f"min_similarity must be a number between 0 and 1, not '{min_similarity[:40]}'.",
                         field="min_similarity")
    return match | {f"{FLOOR_PREFIX}{floor:.3f}"}


def with_ranking(match: frozenset[str], rank: str | None) -> frozenset[str]:
    """`rank=` of a conjunctive question: `degree` (the default: the contract's order, degree first) or `score`
    (with `similar` only: by the learned matchmaker's score alone, the degrees mixed), kept in the match set as
    one more element (`BY_SCORE`) so that it travels with it, as the floor does."""
    if rank is None or rank.strip() == "" or rank.strip().lower() == "degree":
        return match
    if rank.strip().lower() != "score":
        raise BadRequest(f"rank takes degree (the default) or score, not '{rank[:40]}'.", field="rank")
    if SIMILAR not in match:
        raise BadRequest("rank=score ranks by the matchmaker's score, which scores only with similar: add similar to "
                         "match.", field="rank")
    return match | {BY_SCORE}


def by_score(match: frozenset[str]) -> bool:
    return BY_SCORE in match


def needs_directions(match: frozenset[str]) -> tuple[bool, bool]:
    """Whether a query with these degrees needs narrower and broader expansions of its components."""
    return bool(match & {NARROWER, OVERLAP}), bool(match & {BROADER, OVERLAP})


def needs_logic(match: frozenset[str]) -> bool:
    return any(d in match for d in DEGREES)


def sort_matches(matches: Sequence[tuple[Tag, str, int]]) -> list[tuple[Tag, str, int]]:
    return sorted(matches, key=lambda m: rank_key(m[1], m[2], m[0]))
