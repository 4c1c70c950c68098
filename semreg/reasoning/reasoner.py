"""Reasoning over the uploaded ontologies: one closure, kept up to date per upload, and what it yields.

`Reasoner` keeps the OWL 2 RL closure of all ontologies together (`semreg.reasoning.closure`, rules in
`semreg.reasoning.rules.triggers`), the hierarchy index matching runs on (`semreg.reasoning.hierarchy`) and the entailed triples
of `urn:semreg:inferred`. A change touches only what it reaches: an upload inserts its new triples
into the closure, a deletion or replacement withdraws what they alone supported (delete and
re-derive); the index is revisited only around the terms in changed triples (`semreg.reasoning.reindex`) and
the inferred graph gets a patch. So a small ontology beside large ones costs about what the small one
costs. The result is always that of a computation from scratch (the tests compare the two after
every change); `rebuild()` is that computation, used at start-up, and a change falls back to it when
it withdraws more than half of what is asserted (over-deleting and re-deriving most of the closure
costs more than starting again). The index alone is built again in full when a change declares a
term equivalent to an RDF/RDFS/OWL term, or withdraws such a declaration (it changes which terms are
meta-classes, everywhere).

owlrl is the reference: the tests compare the two, pair by pair, on real ontologies and on generated
ones (`tests/reasoning/test_reasoner_owlrl.py`).
"""
from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import pyoxigraph as ox

from semreg.rdf.terms import RDFS
from semreg.reasoning import hierarchy as _hierarchy
from semreg.reasoning import reindex, similarity
from semreg.reasoning.closure import SYSTEM, Closure
from semreg.reasoning.hierarchy import EMPTY, HIERARCHY_PREDICATES, Hierarchy, is_meta
from semreg.reasoning.rules.triggers import EQC, EQP, LABEL, SAME, SCO, SPO, Fact, T
from semreg.reasoning.terms import LITERAL, NAMED, Terms

__all__ = ["EMPTY", "Hierarchy", "Outcome", "Reasoner", "build_hierarchy", "compute_closure", "is_meta"]

_HIERARCHY_IDS = (T, SCO, SPO, EQC, EQP, SAME)
# A change that withdraws more than this share of the asserted facts is computed from scratch.
REBUILD_SHARE = 0.5
# A change to more hierarchy triples than this share of the indexed terms is indexed in full: the
# incremental update costs more per triple, and pays off only when it revisits a small part of the index
# (SOSA beside schema.org and DBpedia: 143 triples against 7,800 terms, 35 ms against 300 ms).
REINDEX_SHARE = 0.25


@dataclass(frozen=True)
class Outcome:
    """The closure after a change: its index, the patch to its entailed triples, and what it cost."""

    hierarchy: Hierarchy
    inferred_added: Iterable[ox.Triple]  # converted as they are read (on the replica feed's thread)
    inferred_removed: Iterable[ox.Triple]
    inferred_count: int  # triples in `urn:semreg:inferred` after the change
    full: bool  # the closure was computed from scratch: write the inferred graph whole
    timings_ms: dict[str, float] = field(default_factory=dict)
    inferred_gained: int = 0  # triples the change brought into `urn:semreg:inferred`

    @property
    def reasoning_ms(self) -> float:
        return self.timings_ms.get("closure", 0.0) + self.timings_ms.get("index", 0.0)


class Reasoner:
    """The closure of named graphs (one per ontology). One change at a time (the caller serialises)."""

    def __init__(self, rebuild_share: float = REBUILD_SHARE, reindex_share: float = REINDEX_SHARE) -> None:
        self.rebuild_share = rebuild_share
        self.reindex_share = reindex_share
        self._terms = Terms()
        self._closure = Closure(self._terms)
        self._facts: dict[str, set[Fact]] = {}
        self._hierarchy: Hierarchy = _hierarchy.index(hierarchy_rows(self._closure), {})
        self._inferred: set[Fact] = set()
        self._inferred = {f for f in self._closure.facts() if self._is_inferred(f)}

    @property
    def closure(self) -> Closure:
        return self._closure

    @property
    def hierarchy(self) -> Hierarchy:
        return self._hierarchy

    def inferred(self) -> list[ox.Triple]:
        """Every triple of `urn:semreg:inferred`: what the closure entails beyond what is asserted."""
        return self._triples(self._inferred)

    def put(self, name: str, triples: Iterable[ox.Triple | ox.Quad]) -> Outcome:
        """Add the graph `name`, or replace it."""
        started = time.perf_counter()
        with _collector_paused():
            return self._change(name, set(self._closure.intern(triples)), started)

    def delete(self, name: str) -> Outcome:
        with _collector_paused():
            return self._change(name, set(), time.perf_counter())

    def rebuild(self, graphs: Mapping[str, Iterable[ox.Triple | ox.Quad]]) -> Outcome:
        """The closure of `graphs` from scratch (start-up)."""
        started = time.perf_counter()
        with _collector_paused():
            closure = Closure(self._terms)
            self._facts = {name: set(closure.intern(triples)) for name, triples in graphs.items()}
            return self._from_scratch(closure, started)

    # -- changes -----------------------------------------------------------------------------------------
    def _change(self, name: str, facts: set[Fact], started: float) -> Outcome:
        old = self._facts.get(name, set())
        asserted = sum(map(len, self._facts.values()))
        if facts:
            self._facts[name] = facts
        else:
            self._facts.pop(name, None)
        closure = self._closure
        if len(old - facts) > self.rebuild_share * asserted:
            return self._from_scratch(Closure(self._terms), started)
        came, gone = facts - old, old - facts
        change = closure.assert_graph(name, facts)
        added, removed = set(change.added), set(change.removed)
        # What changed: triples that came or went, and triples whose being asserted changed while they
        # stayed (asserted where they were only entailed, or the reverse). A triple that is new and
        # asserted, or gone and was asserted here, never was and is not in urn:semreg:inferred.
        touched = (added ^ removed) | ((came - added) | (came & removed)) | ((gone - removed) | (gone & added))
        timings = {"closure": _ms(started)}

        t = time.perf_counter()
        rows = _ClosureRows(closure)
        index = None
        limit = self.reindex_share * len(self._hierarchy.kinds)
        if len(touched) <= 4 * limit:  # most changed facts are not hierarchy triples (labels, domains, ...)
            changed, relabelled = rows.changes(touched)
            if len(changed) <= limit:
                index = reindex.update(self._hierarchy, rows, changed, relabelled)
        if index is None:
            index = _hierarchy.index(hierarchy_rows(closure), labels(closure))
        similarity.follow(self._hierarchy, index)
        self._hierarchy = index
        timings["index"] = _ms(t)

        t = time.perf_counter()
        gained, lost = self._inferred_changes(added, removed, came, gone)
        timings["inferred"] = _ms(t)
        return Outcome(index, _Triples(closure, gained), _Triples(closure, lost), len(self._inferred), False, timings,
                       len(gained))

    def _from_scratch(self, closure: Closure, started: float) -> Outcome:
        for name, facts in self._facts.items():
            closure.assert_graph(name, facts)
        self._closure = closure
        timings = {"closure": _ms(started)}
        t = time.perf_counter()
        index = _hierarchy.index(hierarchy_rows(closure), labels(closure))
        similarity.follow(self._hierarchy, index)
        self._hierarchy = index
        timings["index"] = _ms(t)
        t = time.perf_counter()
        user, kinds = closure.user_asserted(), self._terms.kinds
        before = self._inferred
        self._inferred = {f for f in closure.facts() if f not in user and kinds[f[0]] != LITERAL and kinds[f[1]] == NAMED}
        timings["inferred"] = _ms(t)
        return Outcome(self._hierarchy, [], [], len(self._inferred), True, timings, len(self._inferred - before))

    def _inferred_changes(self, added: set[Fact], removed: set[Fact], came: set[Fact], gone: set[Fact]
                          ) -> tuple[list[Fact], list[Fact]]:
        """The triples that enter `urn:semreg:inferred` with a change and those that leave it (applied to
        the set): new entailed ones, gone ones, and those whose being asserted changed."""
        closure, inferred = self._closure, self._inferred
        kinds = self._terms.kinds
        new, gone_now = added - removed, removed - added

        def rdf(f: Fact) -> bool:
            s, p, o = f
            return kinds[s] != LITERAL and kinds[p] == NAMED

        gained = [f for f in new - came if rdf(f)]  # new and not asserted here (nor anywhere: it was not there)
        lost = [f for f in gone_now if f in inferred]
        asserted, system = closure.asserted, closure.graphs[SYSTEM]
        for f in ((came | gone | (added & removed)) - new) - gone_now:  # still there; asserted or not now?
            n = asserted.get(f, 0)
            now = not (n > 1 or (n == 1 and f not in system)) and rdf(f)
            if now != (f in inferred):
                (gained if now else lost).append(f)
        inferred.difference_update(lost)
        inferred.update(gained)
        return gained, lost

    # -- what is what ------------------------------------------------------------------------------------
    def _is_inferred(self, f: Fact) -> bool:
        """In `urn:semreg:inferred`: in the closure, asserted by no ontology, and RDF (`Closure.is_rdf`)."""
        c = self._closure
        n = c.asserted.get(f, 0)
        return c.holds(*f) and not (n > 1 or (n == 1 and f not in c.graphs[SYSTEM])) and c.is_rdf(f)

    def _triples(self, facts: Iterable[Fact]) -> list[ox.Triple]:
        return list(_Triples(self._closure, facts))


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The closure's indexes are hundreds of thousands of sets and dicts that hold no cycles; while a
    change builds them, the cyclic collector walks them again and again for nothing (a quarter of
    DBpedia's insertion). It is paused for the change, and what it made is frozen at its end; the node collects
    and freezes the rest of the heap once the change is installed (`semreg.heap.settle`)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        # what the change made is frozen before the collector comes back: else its first collection is of the
        # youngest generation, every object the change made (millions for a 20,000-class ontology), ~300 ms
        # with Python's lock held on the worker thread, every other thread of the node standing still
        gc.freeze()
        if was:
            gc.enable()


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000


class _Triples:
    """Facts read as RDF triples when iterated (the term table only grows, so any thread may read them)."""

    def __init__(self, closure: Closure, facts: Iterable[Fact]) -> None:
        self._triple = closure.triple
        self._facts = list(facts)

    def __len__(self) -> int:
        return len(self._facts)

    def __iter__(self) -> Iterator[ox.Triple]:
        for f in self._facts:
            t = self._triple(f)
            if t is not None:
                yield t


class _ClosureRows:
    """The hierarchy triples of a closure by term, as `semreg.reasoning.reindex` reads them."""

    def __init__(self, closure: Closure) -> None:
        self.closure = closure
        self.iris = closure.terms.iris
        self.preds = [(p, self.iris[p]) for p in _HIERARCHY_IDS]
        self._pid = {iri: p for p, iri in self.preds}
        self._ids = closure.terms.iri_ids
        self._out: dict[tuple[str, str], list[str]] = {}
        self._in: dict[tuple[str, str], list[str]] = {}


    def changes(self, facts: Iterable[Fact]) -> tuple[list[tuple[str, str, str]], set[str]]:
        """The hierarchy triples and the labelled terms among changed facts."""
        iris = self.iris
        rows, relabelled = [], set()
        for s, p, o in facts:
            si = iris[s]
            if si is None:
                continue
            if p in _HIERARCHY_IDS:
                oi = iris[o]
                if oi is not None and s != o:
                    rows.append((si, iris[p], oi))
            elif p == LABEL:
                relabelled.add(si)
        return rows, relabelled  # type: ignore[return-value]

    def _id(self, term: str) -> int | None:
        return self._ids.get(term)

    def objects(self, term: str, predicate: str) -> list[str]:
        key = (term, predicate)
        hit = self._out.get(key)
        if hit is None:
            i, p = self._id(term), self._pid[predicate]
            iris = self.iris
            hit = self._out[key] = [] if i is None else [
                iris[o] for o in self.closure.ps[p].get(i, ()) if o != i and iris[o] is not None]  # type: ignore[misc]
        return hit

    def subjects(self, term: str, predicate: str) -> list[str]:
        key = (term, predicate)
        hit = self._in.get(key)
        if hit is None:
            i, p = self._id(term), self._pid[predicate]
            iris = self.iris
            hit = self._in[key] = [] if i is None else [
                iris[s] for s in self.closure.po[p].get(i, ()) if s != i and iris[s] is not None]  # type: ignore[misc]
        return hit

    def has_objects(self, term: str, predicates: Iterable[str]) -> bool:
        return self._has(term, predicates, self.closure.ps)

    def has_subjects(self, term: str, predicates: Iterable[str]) -> bool:
        return self._has(term, predicates, self.closure.po)

    def _has(self, term: str, predicates: Iterable[str], index: dict[int, dict[int, set[int]]]) -> bool:
        i = self._id(term)
        if i is None:
            return False
        iris = self.iris
        for predicate in predicates:
            if any(x != i and iris[x] is not None for x in index[self._pid[predicate]].get(i, ())):
                return True
        return False

    def is_asserted(self, s: str, p: str, o: str) -> bool:
        ids = self._ids
        return (ids.get(s), ids.get(p), ids.get(o)) in self.closure.asserted

    def label(self, term: str) -> str | None:
        i = self._id(term)
        return None if i is None else _best_label(self.closure, i, self.closure.ps[LABEL].get(i, ()))


def hierarchy_rows(closure: Closure) -> dict[str, list[tuple[str, str, bool]]]:
    """The closure's hierarchy triples between IRIs by predicate, each with whether it is asserted."""
    iris = closure.terms.iris
    rows: dict[str, list[tuple[str, str, bool]]] = {}
    for p in _HIERARCHY_IDS:
        pi = iris[p]
        assert pi is not None
        group = rows[pi] = []
        asserted = closure.asserted_ps.get(p, {})
        for s, objs in closure.ps[p].items():
            si = iris[s]
            if si is None:
                continue
            mine = asserted.get(s, ())
            for o in objs:
                oi = iris[o]
                if oi is not None and o != s:
                    group.append((si, oi, o in mine))
    return rows


def labels(closure: Closure) -> dict[str, str]:
    """The label of each IRI that has an asserted rdfs:label (see `_best_label`)."""
    iris = closure.terms.iris
    out = {}
    for s, objs in closure.ps[LABEL].items():
        iri = iris[s]
        if iri is not None:
            name = _best_label(closure, s, objs)
            if name is not None:
                out[iri] = name
    return out


def _best_label(closure: Closure, s: int, objs: Iterable[int]) -> str | None:
    """An asserted rdfs:label: English or untagged when there is one, then the least by text."""
    terms, asserted = closure.terms.terms, closure.asserted
    best: tuple[int, str] | None = None
    for o in objs:
        lit = terms[o]
        if isinstance(lit, ox.Literal) and (s, LABEL, o) in asserted:
            rank = (0 if lit.language in (None, "", "en") else 1, lit.value)
            if best is None or rank < best:
                best = rank
    return None if best is None else best[1]


# -- the closure of one set of triples, for tests and tools -------------------------------------------------
@dataclass(frozen=True)
class ClosureOf:
    """The entailed triples (not asserted ones) of one set of triples, and how long that took."""

    inferred: list[ox.Triple]
    seconds: float


def compute_closure(triples: Iterable[ox.Quad | ox.Triple]) -> ClosureOf:
    """OWL 2 RL closure of the given triples; returns only what is entailed and not asserted."""
    started = time.perf_counter()
    reasoner = Reasoner()
    reasoner.put("graph", triples)
    return ClosureOf(reasoner.inferred(), time.perf_counter() - started)


def build_hierarchy(asserted: Iterable[ox.Quad | ox.Triple], inferred: Iterable[ox.Triple]) -> Hierarchy:
    """The index of a closure given as its asserted and its entailed triples."""
    rows: dict[str, list[tuple[str, str, bool]]] = {p: [] for p in HIERARCHY_PREDICATES}
    names: dict[str, tuple[int, str]] = {}
    for is_asserted, triples in ((True, asserted), (False, inferred)):
        for t in triples:
            s, p, o = t.subject, t.predicate.value, t.object
            if not isinstance(s, ox.NamedNode):
                continue
            if p in HIERARCHY_PREDICATES and isinstance(o, ox.NamedNode) and s != o:
                rows[p].append((s.value, o.value, is_asserted))
            elif p == RDFS + "label" and is_asserted and isinstance(o, ox.Literal):
                rank = (0 if o.language in (None, "", "en") else 1, o.value)
                if s.value not in names or rank < names[s.value]:
                    names[s.value] = rank
    return _hierarchy.index(rows, {s: v for s, (_, v) in names.items()})
