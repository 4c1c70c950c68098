"""The distinct-tag catalogue: which instances carry each tag, indexed by component for expansion.

`expand(query, match, hierarchy)` finds every registered tag that matches a query with its degree and
distance, walking only the registered terms that the reasoner relates to each queried component.
Results are cached per (query, match) and kept exact as tags come and go.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from semreg import expansion
from semreg.matching import EXACT, NARROWER, combine, needs_directions, rank_key, tag_match
from semreg.reasoner import Hierarchy
from semreg.terms import ANY, Tag

Match = tuple[Tag, str, int]  # (tag, degree, distance)
CACHE_SIZE = 4096
# Past this many (new tag × cached query) checks in one change, the cache is cleared instead.
MAX_INCREMENTAL_CHECKS = 20_000


class Catalogue:
    def __init__(self) -> None:
        self.holders: dict[Tag, set[str]] = {}
        self.by_position: tuple[dict[str, set[Tag]], ...] = ({}, {}, {})
        self._cache: OrderedDict[tuple[Tag, frozenset[str]], list[Match]] = OrderedDict()
        self.hierarchy: Hierarchy = Hierarchy()

    # -- maintenance -----------------------------------------------------------------------------
    def add(self, instance_id: str, tags: Iterable[Tag]) -> list[Tag]:
        """Record that an instance carries `tags`; returns the tags that are new to the catalogue."""
        new = []
        for tag in tags:
            holders = self.holders.get(tag)
            if holders is None:
                self.holders[tag] = {instance_id}
                for pos, term in enumerate(tag):
                    self.by_position[pos].setdefault(term, set()).add(tag)
                new.append(tag)
            else:
                holders.add(instance_id)
        if new:
            self._on_new_tags(new)
        return new

    def remove(self, instance_id: str, tags: Iterable[Tag]) -> list[Tag]:
        """Forget that an instance carries `tags`; returns the tags no instance carries any more."""
        gone = []
        for tag in tags:
            holders = self.holders.get(tag)
            if holders is None:
                continue
            holders.discard(instance_id)
            if not holders:
                del self.holders[tag]
                for pos, term in enumerate(tag):
                    bucket = self.by_position[pos][term]
                    bucket.discard(tag)
                    if not bucket:
                        del self.by_position[pos][term]
                gone.append(tag)
        if gone:
            gone_set = set(gone)
            for key, matches in self._cache.items():
                if any(m[0] in gone_set for m in matches):
                    self._cache[key] = [m for m in matches if m[0] not in gone_set]
        return gone

    def set_hierarchy(self, hierarchy: Hierarchy) -> None:
        self.hierarchy = hierarchy
        self._cache.clear()

    def _on_new_tags(self, new: list[Tag]) -> None:
        if len(new) * len(self._cache) > MAX_INCREMENTAL_CHECKS:
            self._cache.clear()
            return
        for (query, match), matches in self._cache.items():
            added = False
            for tag in new:
                m = tag_match(tag, query, self.hierarchy)
                if m is not None and m[0] in match:
                    matches.append((tag, m[0], m[1]))
                    added = True
            if added:
                matches.sort(key=lambda x: rank_key(x[1], x[2], x[0]))

    # -- queries -----------------------------------------------------------------------------------
    def expand(self, query: Tag, match: frozenset[str]) -> list[Match]:
        """Every registered tag matching `query` with a degree in `match`, ranked."""
        key = (query, match)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        result = self._expand(query, match)
        self._cache[key] = result
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return result

    def _expand(self, query: Tag, match: frozenset[str]) -> list[Match]:
        want_narrower, _ = needs_directions(match)
        candidates = [expansion.candidates(self.hierarchy, q, match, within=self.by_position[pos])
                      for pos, q in enumerate(query)]

        # Walk the position with the fewest candidate tags; look the other two up.
        best: tuple[int, int, dict[str, tuple[str, int]]] | None = None  # (count, position, candidates)
        for pos, found in enumerate(candidates):
            if found is None:
                continue
            count = sum(len(self.by_position[pos][t]) for t in found)
            if best is None or count < best[0]:
                best = (count, pos, found)
        tags: Iterable[Tag]
        if best is None:
            tags = self.holders.keys()
        else:
            _, best_pos, best_cand = best
            tags = (tag for t in best_cand for tag in self.by_position[best_pos][t])
        out: list[Match] = []
        for tag in tags:
            degrees = []
            distance = 0
            for pos, by_term in enumerate(candidates):
                r = tag[pos]
                if by_term is None:
                    if r == ANY:
                        degrees.append(EXACT)
                    elif want_narrower:
                        degrees.append(NARROWER)
                    else:
                        break
                    continue
                m = by_term.get(r)
                if m is None:
                    break
                degrees.append(m[0])
                distance += m[1]
            else:
                degree = combine(degrees)
                if degree is not None and degree in match:
                    out.append((tag, degree, distance))
        out.sort(key=lambda x: rank_key(x[1], x[2], x[0]))
        return out

    def tag_counts(self) -> list[tuple[Tag, int]]:
        return sorted(((t, len(ids)) for t, ids in self.holders.items()), key=lambda x: x[0].text)
