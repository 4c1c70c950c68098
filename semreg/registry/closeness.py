"""How close an instance is to a conjunctive question asked with `similar`, for ranking within a degree.

Figures in [0, 1], computed only when the question's `match` names `similar`:
- `tag_similarity(tag, pattern)`: the least of the components' similarities (`semreg.reasoning.similarity`),
  a wildcard on either side counting as 1: a logical match's closeness to its pattern (a similar match carries
  its own in its distance, `semreg.reasoning.matching`);
- `provided_closeness(tags, provided)`: how well what the caller provides fits what the instance needs, as the
  best-match average of two sets of concepts: the mean of (a) over the provided tags, the best closeness of a
  tag of the instance that it stands for (`semreg.registry.conjunctive.covered`'s *needed*), and (b) over the
  instance's needed tags, the best closeness of a provided tag that stands for it. A pair that matches
  logically in any degree counts 1 (a service asking for a narrower input than the caller names may well take
  it: the issue's first loss), else its similarity when at or above the floor, else 0. An instance needing
  nothing has (b) = 1; a question providing what no instance takes has (a) = 0.
With `similar`, `provided` ranks instead of filtering (`semreg.registry.conjunctive.part`).
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from semreg.rdf.terms import ANY, Tag
from semreg.reasoning.hierarchy import Hierarchy
from semreg.reasoning.matching import EXACT, NARROWER, component_match, tag_match
from semreg.reasoning.similarity import index_of

# (instance's tag, provided tag) → closeness (-1: the provided tag does not stand for it), within a question
Pairs = dict[tuple[Tag, Tag], float]


def tag_similarity(h: Hierarchy, tag: Tag, pattern: Tag) -> float:
    index = index_of(h)
    return min(1.0 if ANY in (r, q) else index.similarity(r, q) for r, q in zip(tag, pattern))


def stands_for(given: Tag, tag: Tag, h: Hierarchy) -> bool:
    """Whether a provided tag stands for an instance's (its predicate at or below the provided tag's)."""
    return tag.p != ANY and (m := component_match(tag.p, given.p, h)) is not None and m[0] in (EXACT, NARROWER)


def provided_closeness(h: Hierarchy, tags: Iterable[Tag], provided: Sequence[Tag], floor: float,
                       pairs: Pairs | None = None) -> float:
    """The best-match average of the provided tags and the instance's needed ones, rounded to 3 places."""
    pairs = {} if pairs is None else pairs
    tags = tuple(tags)
    best_needed: dict[Tag, float] = {}
    offered = 0.0
    for given in provided:
        best = 0.0
        for tag in tags:
            figure = _pair(h, tag, given, floor, pairs)
            if figure >= 0:  # the provided tag stands for it
                best = max(best, figure)
                best_needed[tag] = max(best_needed.get(tag, 0.0), figure)
        offered += best
    taken = sum(best_needed.values()) / len(best_needed) if best_needed else 1.0
    return round((offered / len(provided) + taken) / 2, 3)


def _pair(h: Hierarchy, tag: Tag, given: Tag, floor: float, pairs: Pairs) -> float:
    """The closeness of a pair, or -1 when the provided tag does not stand for the instance's."""
    key = (tag, given)
    found = pairs.get(key)
    if found is None:
        if not stands_for(given, tag, h):
            found = -1.0
        elif tag_match(tag, given, h) is not None:
            found = 1.0
        else:
            s = tag_similarity(h, tag, given)
            found = s if s >= floor else 0.0
        pairs[key] = found
    return found
