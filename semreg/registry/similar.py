"""The registered tags that match a query as `similar`: they fail logically, but each component is close.

A tag's similarity to a query is the least of its components' (`semreg.reasoning.similarity`), a wildcard on
either side counting as 1. The candidates are bounded as the logical expansion bounds them: per queried
component, the registered terms at that position at or above the floor (at most `similarity.TOP_K`, best
first, remembered per set of registered terms), then the tags holding one of them at every position; of
those, the tags that match logically in any degree are left out (they are not near misses).

As request work (`semreg.work.lane`), the index's first build for a hierarchy runs on a worker thread, and the
terms looked at and scored are charged to the question's `scored` budget, the loop handed back between them.
"""
from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Protocol

from semreg.rdf.terms import ANY, Tag
from semreg.reasoning.hierarchy import Hierarchy
from semreg.reasoning.matching import SIMILAR, similar_distance, tag_match
from semreg.reasoning.similarity import index_of
from semreg.work.budget import SCORED, WALKED
from semreg.work.lane import charge, checkpoint, offload

Match = tuple[Tag, str, int]


class Registered(Protocol):
    """What this needs of a catalogue (`semreg.registry.catalogue.Catalogue`)."""

    hierarchy: Hierarchy
    by_position: tuple[dict[str, set[Tag]], ...]
    outsider_words: tuple[dict[str, set[str]], ...]
    terms_version: int

    @property
    def holders(self) -> Mapping[Tag, Collection[str]]: ...


def similar_matches(catalogue: Registered, query: Tag, floor: float) -> list[Match]:
    """Every registered tag matching `query` as similar at or above `floor`, best first."""
    h = catalogue.hierarchy
    index = index_of(h)
    offload(index.prepare)
    close: list[dict[str, float] | None] = []
    for pos, q in enumerate(query):
        if q == ANY:
            close.append(None)
            continue
        registered = catalogue.by_position[pos]
        near = dict(index.nearest(q, registered.keys(), floor, (pos, catalogue.terms_version),
                                  catalogue.outsider_words[pos], _spend))
        if q in registered:
            near[q] = 1.0
        if ANY in registered:
            near[ANY] = 1.0
        close.append(near)
    # the tags of the position with the fewest, then those whose other terms are close too (no union of the
    # others: a predicate near every registered one would gather every tag)
    # (a term may have gone while the scoring paused: `get`)
    asked = [(sum(len(catalogue.by_position[pos].get(t, ())) for t in near), pos) for pos, near in enumerate(close)
             if near is not None]
    if asked:
        fewest = min(asked)[1]
        tags: Iterable[Tag] = (tag for t in close[fewest] or () for tag in catalogue.by_position[fewest].get(t, ()))
    else:
        tags = catalogue.holders
    out = []
    for tag in tags:
        charge(WALKED)
        if any(near is not None and term not in near for term, near in zip(tag, close)):
            continue
        if tag_match(tag, query, h) is not None:
            continue
        score = min((1.0 if near is None else near[term] for term, near in zip(tag, close)), default=1.0)
        if score >= floor:
            out.append((tag, SIMILAR, similar_distance(score)))
    out.sort(key=lambda m: (m[2], m[0]))
    return out


def _spend(n: int) -> None:
    charge(SCORED, n)
    checkpoint()


def similar_match(h: Hierarchy, tag: Tag, query: Tag, floor: float) -> Match | None:
    """`tag` as a similar match of `query`, or None (it matches logically, or is not close enough)."""
    if tag_match(tag, query, h) is not None:
        return None
    index = index_of(h)
    score = min(1.0 if ANY in (r, q) else index.similarity(r, q) for r, q in zip(tag, query))
    return (tag, SIMILAR, similar_distance(score)) if score >= floor else None
