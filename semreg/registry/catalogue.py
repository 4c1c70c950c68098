"""The distinct-tag catalogue: which instances carry each tag, indexed by component for expansion.

`expand(query, match)` finds every registered tag that matches a query with its degree and distance.
It works per component: a queried term at one position expands (`semreg.reasoning.expansion`) to the registered
terms it relates to there. A question naming a subject and an object looks its tags up by (subject, object)
pairs (`semreg.registry.pairs`) where those are fewer; otherwise the tags under the component whose terms
hold the fewest tags are walked, each tested against the other components term by term; then graded. No
set of the tags a broad term reaches is made.

What different questions share is kept: the components (a term at a position, with the directions the
degrees need: a few hundred distinct ones serve tens of thousands of distinct questions), bounded by the
terms they hold in all (`COMPONENT_TERMS_KEPT`), and each question's answer, bounded by count
(`CACHE_SIZE`) and kept exact as tags come and go. Components are dropped when the registered terms at a
position change (a new tag made of known terms leaves them as they are).

A question may run as request work in slices (`semreg.work.lane`): it charges what it expands and walks to its
budget and hands the loop back between the terms of a walk and every few hundred tags graded, reading the
tags of a term from a copy. An answer computed while tags came or went is returned but not kept (`generation`).
The terms no ontology names are indexed by the words of their names (`outsider_words`), so that a `similar`
question finds them by word instead of scoring each (`semreg.reasoning.similarity`).
"""
from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Iterable

from semreg.rdf.terms import ANY, Tag
from semreg.reasoning import expansion
from semreg.reasoning.matching import (
    EXACT,
    NARROWER,
    RANK,
    combine,
    floor_of,
    needs_directions,
    needs_logic,
    rank_key,
    tag_match,
)
from semreg.reasoning.reasoner import Hierarchy
from semreg.reasoning.similarity import known, name_words
from semreg.registry.pairs import PairIndex
from semreg.registry.similar import similar_match, similar_matches
from semreg.work.budget import EXPANDED, WALKED
from semreg.work.lane import charge, checkpoint

Match = tuple[Tag, str, int]  # (tag, degree, distance)
CACHE_SIZE = 4096
COMPONENT_TERMS_KEPT = 1_000_000  # candidate terms the kept components hold in all
# Past this many (new tag × cached query) checks in one change, the answer cache is cleared instead.
MAX_INCREMENTAL_CHECKS = 20_000
GRADED_BETWEEN_CHECKPOINTS = 512

_TERMS_VERSIONS = itertools.count(1)

Component = expansion.Candidates  # the registered terms a queried term reaches at its position
# A tag's holders: most tags have one, kept as a 1-tuple (48 bytes against a set's 216: a third of the index
# at a million instances of distinct tags); a set once a second instance carries it.
Holders = tuple[str] | set[str]


class Catalogue:
    def __init__(self) -> None:
        self.holders: dict[Tag, Holders] = {}
        self.by_position: tuple[dict[str, set[Tag]], ...] = ({}, {}, {})
        self._cache: OrderedDict[tuple[Tag, frozenset[str]], list[Match]] = OrderedDict()
        self._components: OrderedDict[tuple[int, str, bool, bool], Component] = OrderedDict()
        self._component_terms = 0
        self._sorted: dict[Tag, tuple[str, ...]] = {}  # tag → its holders' ids, sorted
        self._terms: dict[str, str] = {}  # each term of a registered tag → the one string object kept for it
        self.pairs = PairIndex()  # the tags by subject and object together (`_walked`)
        self.hierarchy: Hierarchy = Hierarchy()
        # per position: word → the registered terms there that no ontology names, whose name has the word
        self.outsider_words: tuple[dict[str, set[str]], ...] = ({}, {}, {})
        self.generation = 0  # moves whenever a tag comes or goes or the hierarchy changes
        # names this catalogue's registered terms as they are (similar's cache key, in an index that every
        # catalogue of one hierarchy shares): drawn from one counter, so no two catalogues' states share one
        self.terms_version = next(_TERMS_VERSIONS)

    # -- maintenance -----------------------------------------------------------------------------
    def shared(self, tags: tuple[Tag, ...]) -> tuple[Tag, ...]:
        """`tags` made of the string objects the catalogue already keeps for their terms, where it has one; a
        tag already made of them is itself, and `tags` themselves when all are (start-up reads records with
        shared strings already).

        Every registration parsed from JSON brings strings of its own; a million instances of 3 tags over a
        few thousand terms held 9,000,000 copies of them (~700 bytes an instance, measured with tracemalloc).
        The strings kept are those of the registered tags, so a term is let go with its last tag."""
        terms = self._terms
        out = []
        changed = False
        for tag in tags:
            s, p, o = tag
            kept = terms.get(s, s), terms.get(p, p), terms.get(o, o)
            if kept[0] is s and kept[1] is p and kept[2] is o:
                out.append(tag)
            else:
                out.append(tuple.__new__(Tag, kept))
                changed = True
        return tuple(out) if changed else tags

    def add(self, instance_id: str, tags: Iterable[Tag]) -> list[Tag]:
        """Record that an instance carries `tags`; returns the tags that are new to the catalogue. (Start-up
        calls it for each of a million instances: the lookups are kept in locals and the terms' version is
        drawn once a call; putting 300,000 instances back in process took 18-26 µs each against 19-30,
        within this machine's noise.)"""
        new = []
        terms_changed = False
        holders_of, sorted_ = self.holders, self._sorted
        for tag in tags:
            if sorted_:
                sorted_.pop(tag, None)
            holders = holders_of.get(tag)
            if holders is None:
                holders_of[tag] = (instance_id,)
                for pos, (at, term) in enumerate(zip(self.by_position, tag)):
                    bucket = at.get(term)
                    if bucket is None:
                        at[term] = {tag}
                        self._terms.setdefault(term, term)
                        terms_changed = True
                        if not known(self.hierarchy, term):
                            self._index_outsider(pos, term)
                    else:
                        bucket.add(tag)
                self.pairs.add(tag)
                new.append(tag)
            elif isinstance(holders, set):
                holders.add(instance_id)
            elif holders[0] != instance_id:
                holders_of[tag] = {holders[0], instance_id}
        if new:
            self.terms_version = next(_TERMS_VERSIONS)
            self.generation += 1
        if terms_changed:
            self._drop_components()
        if new:
            self._on_new_tags(new)
        return new

    def remove(self, instance_id: str, tags: Iterable[Tag]) -> list[Tag]:
        """Forget that an instance carries `tags`; returns the tags no instance carries any more."""
        gone = []
        terms_changed = False
        for tag in tags:
            self._sorted.pop(tag, None)
            holders = self.holders.get(tag)
            if holders is None or instance_id not in holders:
                continue
            if isinstance(holders, set) and len(holders) > 1:
                holders.discard(instance_id)
                if len(holders) == 1:
                    self.holders[tag] = (next(iter(holders)),)
            else:
                del self.holders[tag]
                for pos, term in enumerate(tag):
                    bucket = self.by_position[pos][term]
                    bucket.discard(tag)
                    if not bucket:
                        del self.by_position[pos][term]
                        if all(term not in at for at in self.by_position):
                            del self._terms[term]
                        terms_changed = True
                        self._unindex_outsider(pos, term)
                self.pairs.remove(tag)
                gone.append(tag)
                self.terms_version = next(_TERMS_VERSIONS)
                self.generation += 1
        if terms_changed:
            self._drop_components()
        if gone:
            gone_set = set(gone)
            for key, matches in self._cache.items():
                if any(m[0] in gone_set for m in matches):
                    self._cache[key] = [m for m in matches if m[0] not in gone_set]
        return gone

    def set_hierarchy(self, hierarchy: Hierarchy) -> None:
        before = self.hierarchy
        self.hierarchy = hierarchy
        self.generation += 1
        self._cache.clear()
        self._drop_components()
        # the terms an upload names or stops naming move in or out of the word index (the ontologies' terms
        # are a few thousand; the registered ones may be millions)
        moved = (before.kinds.keys() | before.rep.keys()) ^ (hierarchy.kinds.keys() | hierarchy.rep.keys())
        for pos, registered in enumerate(self.by_position):
            for term in moved:
                if term in registered:
                    if known(hierarchy, term):
                        self._unindex_outsider(pos, term)
                    else:
                        self._index_outsider(pos, term)

    def _index_outsider(self, pos: int, term: str) -> None:
        index = self.outsider_words[pos]
        for word in name_words(term):
            index.setdefault(word, set()).add(term)

    def _unindex_outsider(self, pos: int, term: str) -> None:
        index = self.outsider_words[pos]
        for word in name_words(term):
            named = index.get(word)
            if named is not None:
                named.discard(term)
                if not named:
                    del index[word]

    def _drop_components(self) -> None:
        self._components.clear()
        self._component_terms = 0

    def _on_new_tags(self, new: list[Tag]) -> None:
        if len(new) * len(self._cache) > MAX_INCREMENTAL_CHECKS:
            self._cache.clear()
            return
        for (query, match), matches in self._cache.items():
            added = False
            floor = floor_of(match)
            for tag in new:
                m = tag_match(tag, query, self.hierarchy)
                if m is not None and m[0] in match:
                    matches.append((tag, m[0], m[1]))
                    added = True
                elif m is None and floor is not None:
                    found = similar_match(self.hierarchy, tag, query, floor)
                    if found is not None:
                        matches.append(found)
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
        generation = self.generation
        result = self._expand(query, match)
        if generation == self.generation:  # else tags came or went while it ran in slices: not kept
            self._cache[key] = result
            if len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return result

    def _component(self, pos: int, term: str, want_narrower: bool, want_broader: bool) -> Component:
        key = (pos, term, want_narrower, want_broader)
        found = self._components.get(key)
        if found is not None:
            self._components.move_to_end(key)
            return found
        found = expansion.candidates(self.hierarchy, term, want_narrower, want_broader, within=self.by_position[pos])
        assert found is not None
        self._components[key] = found
        self._component_terms += len(found)
        while self._component_terms > COMPONENT_TERMS_KEPT and len(self._components) > 1:
            _, dropped = self._components.popitem(last=False)
            self._component_terms -= len(dropped)
        return found

    def _expand(self, query: Tag, match: frozenset[str]) -> list[Match]:
        out = self._logical(query, match) if needs_logic(match) else []
        floor = floor_of(match)
        if floor is not None:
            out += similar_matches(self, query, floor)
        return out

    def _logical(self, query: Tag, match: frozenset[str]) -> list[Match]:
        want_narrower, want_broader = needs_directions(match)
        components = [None if q == ANY else self._component(pos, q, want_narrower, want_broader)
                      for pos, q in enumerate(query)]
        charge(EXPANDED, sum(len(c) for c in components if c is not None))
        out: list[Match] = []
        for k, tag in enumerate(self._walked(components)):
            if k % GRADED_BETWEEN_CHECKPOINTS == GRADED_BETWEEN_CHECKPOINTS - 1:
                checkpoint()
            degrees = []
            distance = 0
            for pos, component in enumerate(components):
                r = tag[pos]
                if component is None:
                    if r == ANY:
                        degrees.append(EXACT)
                    elif want_narrower:
                        degrees.append(NARROWER)
                    else:
                        break
                    continue
                reached = component.get(r)
                if reached is None:
                    break
                component_degree, d = reached
                degrees.append(component_degree)
                distance += d
            else:
                degree = combine(degrees)
                if degree is not None and degree in match:
                    out.append((tag, degree, distance))
        out.sort(key=lambda x: (RANK[x[1]], x[2], x[0]))
        return out

    def _walked(self, components: list[Component | None]) -> Iterable[Tag]:
        """The tags a question's components may match: those whose terms its components reach at every
        position a component is given for (every tag when all three positions are wildcards). Found by
        (subject, object) pairs (`semreg.registry.pairs`) when there are fewer of those than tags under the
        narrowest component, else by walking the tags under it (`_walked_terms`)."""
        present = [(pos, c) for pos, c in enumerate(components) if c is not None]
        if not present:
            charge(WALKED, len(self.holders))
            return list(self.holders)
        by_position = self.by_position
        walk, pos, component = min(((sum(len(by_position[p].get(t, ())) for t in c), p, c) for p, c in present),
                                   key=lambda wpc: wpc[0])
        subjects, prop, objects = components
        if subjects is not None and objects is not None and len(subjects) * len(objects) < walk:
            charge(WALKED, len(subjects) * len(objects))
            return self._walked_pairs(subjects, prop, objects)
        charge(WALKED, walk)
        return self._walked_terms(present, pos, component)

    def _walked_pairs(self, subjects: Component, prop: Component | None, objects: Component) -> list[Tag]:
        found = self.pairs.tags(subjects, objects)
        return list(found) if prop is None else [t for t in found if t[1] in prop]

    def _walked_terms(self, present: list[tuple[int, Component]], pos: int, component: Component) -> Iterable[Tag]:
        """The tags under the terms of `component` (at `pos`), kept only where the other components reach
        their terms: a comprehension over each term's tags, since grading each of them in `_logical`'s loop
        took ~4 ms a question at a million instances."""
        registered = self.by_position[pos]
        others = [(p, c) for p, c in present if p != pos]
        if not others:  # each term's tags copied: the walk may pause, and a registration add to them meanwhile
            return (tag for term in component for tag in tuple(registered.get(term, ())))
        out: list[Tag] = []
        if len(others) == 1:
            (a, ca), = others
            for term in component:
                out += [t for t in registered.get(term, ()) if t[a] in ca]
                checkpoint()
        else:
            (a, ca), (b, cb) = others
            for term in component:
                out += [t for t in registered.get(term, ()) if t[a] in ca and t[b] in cb]
                checkpoint()
        return out

    def holder_ids(self, tag: Tag) -> tuple[str, ...]:
        """The ids of the instances carrying `tag`, sorted (kept until they change)."""
        found = self._sorted.get(tag)
        if found is None:
            found = self._sorted[tag] = tuple(sorted(self.holders.get(tag, ())))
        return found

    def tag_counts(self) -> list[tuple[Tag, int]]:
        return sorted(((t, len(ids)) for t, ids in self.holders.items()), key=lambda x: x[0].text)
