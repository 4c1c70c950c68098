"""The hierarchy index after a change of the closure, recomputed only where the change reaches.

`semreg.reasoning.hierarchy.index` reads the whole closure (0.2-0.5 s with schema.org and DBpedia loaded); a
small upload changes a few hundred hierarchy triples. Everything in the index is local to a term:
- a term's kind depends only on the hierarchy triples it is in;
- its equivalence class is its owl:equivalentClass / equivalentProperty / sameAs neighbours (the
  closure has those symmetric and transitive), so a class is found by a walk from any member;
- the classes above a class are the targets of its members' edges, named by their classes.
So the terms to revisit are those in a changed triple (added, removed, or asserted where it was only
entailed, or the reverse), their old and new equivalence classes, and the classes with an edge into a
term whose class changed. The result is exactly what `index()` builds from the same closure
(`tests/reasoning/test_hierarchy.py` compares the two after every change). A change that makes a term
equivalent to an RDF/RDFS/OWL term, or stops it being so, changes what is left out everywhere: then
there is no shortcut and `update` returns None.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from semreg.reasoning.hierarchy import (
    EQUIVALENCES,
    EQUIVALENT_CLASS,
    EQUIVALENT_PROPERTY,
    HIERARCHY_PREDICATES,
    PROPERTY_TYPES,
    SUB_CLASS,
    SUB_PROPERTY,
    TYPE,
    Hierarchy,
    class_types_of,
    excluded,
    is_meta,
)

INDIVIDUAL, CLASS, PROPERTY = "individual", "class", "property"
LINKS = tuple(sorted(HIERARCHY_PREDICATES - {TYPE}))  # the hierarchy predicates that link any two terms
EDGES = (SUB_CLASS, SUB_PROPERTY, TYPE)


class Rows(Protocol):
    """The closure's hierarchy triples between IRIs (reflexive ones left out), by term."""

    def objects(self, term: str, predicate: str) -> list[str]:
        """Every o of (term predicate o)."""

    def subjects(self, term: str, predicate: str) -> list[str]:
        """Every s of (s predicate term)."""

    def has_objects(self, term: str, predicates: Iterable[str]) -> bool: ...

    def has_subjects(self, term: str, predicates: Iterable[str]) -> bool: ...

    def is_asserted(self, s: str, p: str, o: str) -> bool: ...

    def label(self, term: str) -> str | None: ...


_PROPERTY_LINKS = (SUB_PROPERTY, EQUIVALENT_PROPERTY)
_CLASS_LINKS = (SUB_CLASS, EQUIVALENT_CLASS)


def kind_of(term: str, rows: Rows, meta_like: frozenset[str], class_types: set[str]) -> str | None:
    """The kind `index()` gives `term`, from the triples it is in (cheapest evidence first: hubs such as
    owl:Thing are in thousands of triples)."""
    types = rows.objects(term, TYPE)
    if rows.has_objects(term, _PROPERTY_LINKS) or rows.has_subjects(term, _PROPERTY_LINKS) \
            or any(o in PROPERTY_TYPES for o in types):
        return PROPERTY
    if rows.has_objects(term, _CLASS_LINKS) or rows.has_subjects(term, _CLASS_LINKS) \
            or any(o in class_types for o in types):
        return CLASS
    if any(not is_meta(o) and o not in meta_like for o in types):
        return INDIVIDUAL
    if not is_meta(term) and term not in meta_like and rows.has_subjects(term, (TYPE,)):
        return CLASS
    return None


def _edges_out(rows: Rows, term: str) -> list[tuple[str, str]]:
    return [(p, o) for p in EDGES for o in rows.objects(term, p)]


def update(h: Hierarchy, rows: Rows, changed: Iterable[tuple[str, str, str]], relabelled: Iterable[str]) -> Hierarchy | None:
    """`h` after the closure changed by the triples `changed`; None when only a full index will do."""
    changed = list(changed)
    relabelled = set(relabelled)
    if not changed and not relabelled:
        return h
    if any(p in EQUIVALENCES and (is_meta(s) or is_meta(o)) for s, p, o in changed):
        return None
    meta_like = h.meta_like
    kinds, touched = _kinds_after(h, rows, changed, class_types_of(meta_like))
    out = _left_out(meta_like)
    passing = _passing(out, kinds)
    revisit, classes = _revisit(h, rows, touched, out, _in_index(rows, out, kinds))
    new_rep = {m: min(comp) for m, comp in classes.items()}
    old_reps = {r for t in revisit if (r := _old_rep(h, t)) is not None}
    new_reps = set(new_rep.values())
    rep_now = _rep_now(h, new_rep)
    recompute = _to_recompute(h, rows, revisit, new_rep, new_reps, rep_now, passing)
    gone = old_reps - new_reps
    above = _above(h, rows, classes, rep_now, passing)
    up, down = _patched(h.up, h.down, recompute, gone, lambda r: above(r, False), keep_empty=True)
    asserted_up, asserted_down = _patched(h.asserted_up, h.asserted_down, recompute, gone,
                                          lambda r: above(r, True), keep_empty=False)
    return Hierarchy(rep=_rep_after(h, revisit, new_rep), members=_members_after(h, old_reps, new_reps, classes),
                     up=up, down=down, asserted_up=asserted_up, asserted_down=asserted_down, kinds=kinds,
                     labels=_labels_after(h, rows, relabelled),
                     asserted_parents=_asserted_parents_after(h, rows, revisit, out, passing), meta_like=meta_like)


# -- the steps of `update` ------------------------------------------------------------------------------
def _kinds_after(h: Hierarchy, rows: Rows, changed: list[tuple[str, str, str]], class_types: set[str]
                 ) -> tuple[dict[str, str], set[str]]:
    """The kinds after the change, and the touched terms: those in a changed triple, and the types of those
    whose kind changed."""
    meta_like = h.meta_like
    kinds = dict(h.kinds)
    touched = {s for s, _, _ in changed} | {o for _, _, o in changed}
    for t in list(touched):
        k = kind_of(t, rows, meta_like, class_types)
        if k != h.kinds.get(t):
            # its rdf:type triples now count as edges, or stop counting: their objects are touched too
            touched.update(rows.objects(t, TYPE))
    for t in touched:
        k = kind_of(t, rows, meta_like, class_types)
        if k is None:
            kinds.pop(t, None)
        else:
            kinds[t] = k
    return kinds, touched


def _left_out(meta_like: frozenset[str]) -> Callable[[str], bool]:
    """`excluded`, remembered for each term asked about (one update asks about the same hubs again and again)."""
    left_out: dict[str, bool] = {}

    def out(t: str) -> bool:
        hit = left_out.get(t)
        if hit is None:
            hit = left_out[t] = excluded(t, meta_like)
        return hit

    return out


def _passing(out: Callable[[str], bool], kinds: dict[str, str]) -> Callable[[str, str, str], bool]:
    """Whether a triple is an edge of the index: between terms it keeps, and of rdf:type only from an individual."""
    def passing(s: str, p: str, o: str) -> bool:
        return not out(s) and not out(o) and (p != TYPE or kinds.get(s) == INDIVIDUAL)

    return passing


def _in_index(rows: Rows, out: Callable[[str], bool], kinds: dict[str, str]) -> Callable[[str], bool]:
    """Whether a term is in the index after the change: kept, and in an edge or equivalence with a kept term."""
    def in_index(t: str) -> bool:
        if out(t):
            return False
        if any(not out(o) for p in LINKS for o in rows.objects(t, p)):
            return True
        if kinds.get(t) == INDIVIDUAL and any(not out(o) for o in rows.objects(t, TYPE)):
            return True
        if any(not out(s) for p in LINKS for s in rows.subjects(t, p)):
            return True
        return any(kinds.get(s) == INDIVIDUAL and not out(s) for s in rows.subjects(t, TYPE))

    return in_index


def _old_rep(h: Hierarchy, t: str) -> str | None:
    """The representative of `t`'s class before the change; None when `t` was not in the index."""
    return h.rep.get(t, t) if t in h.rep or t in h.members else None


def _component(rows: Rows, t: str, out: Callable[[str], bool]) -> frozenset[str]:
    """The equivalence class of `t` now: a walk along equivalences, through kept terms."""
    found, todo = {t}, [t]
    while todo:
        x = todo.pop()
        for p in EQUIVALENCES:
            for y in (*rows.objects(x, p), *rows.subjects(x, p)):
                if y not in found and not out(y):
                    found.add(y)
                    todo.append(y)
    return frozenset(found)


def _revisit(h: Hierarchy, rows: Rows, touched: set[str], out: Callable[[str], bool], in_index: Callable[[str], bool]
             ) -> tuple[set[str], dict[str, frozenset[str]]]:
    """The terms whose equivalence class may change: the touched ones and every class they were or are in;
    and of each of them in the index now, its class now."""
    revisit: set[str] = set()
    classes: dict[str, frozenset[str]] = {}
    todo = list(touched)
    while todo:
        t = todo.pop()
        if t in revisit:
            continue
        revisit.add(t)
        r = _old_rep(h, t)
        if r is not None:
            todo.extend(h.members.get(r, ()))
        if t not in classes and in_index(t):
            comp = _component(rows, t, out)
            for m in comp:
                classes[m] = comp
            todo.extend(comp)
    return revisit, classes


def _rep_now(h: Hierarchy, new_rep: dict[str, str]) -> Callable[[str], str]:
    """A term's representative after the change (revisited terms have theirs in `new_rep`)."""
    def rep_now(x: str) -> str:
        return new_rep[x] if x in new_rep else h.rep.get(x, x)

    return rep_now


def _to_recompute(h: Hierarchy, rows: Rows, revisit: set[str], new_rep: dict[str, str], new_reps: set[str],
                  rep_now: Callable[[str], str], passing: Callable[[str, str, str], bool]) -> set[str]:
    """The classes whose ancestors are computed again: every class revisited, and the classes with an edge
    into a term whose class changed."""
    moved = [y for y in revisit if _old_rep(h, y) != new_rep.get(y)]
    recompute = set(new_reps)
    for y in moved:
        recompute.update(rep_now(s) for p in EDGES for s in rows.subjects(y, p) if passing(s, p, y))
    return recompute


def _above(h: Hierarchy, rows: Rows, classes: dict[str, frozenset[str]], rep_now: Callable[[str], str],
           passing: Callable[[str, str, str], bool]) -> Callable[[str, bool], frozenset[str]]:
    """The classes above a class after the change (with `asserted`, one asserted step above)."""
    def above(r: str, asserted: bool) -> frozenset[str]:
        members = classes.get(r) or h.members.get(r, frozenset((r,)))
        ups = {rep_now(o) for m in members for p, o in _edges_out(rows, m)
               if passing(m, p, o) and (not asserted or rows.is_asserted(m, p, o))}
        ups.discard(r)
        return frozenset(ups)

    return above


def _members_after(h: Hierarchy, old_reps: set[str], new_reps: set[str], classes: dict[str, frozenset[str]]
                   ) -> dict[str, frozenset[str]]:
    """`h.members` with the revisited classes as they were dropped and as they are now put in."""
    members = dict(h.members)
    for r in old_reps:
        members.pop(r, None)
    for r in new_reps:
        members[r] = classes[r]
    return members


def _rep_after(h: Hierarchy, revisit: set[str], new_rep: dict[str, str]) -> dict[str, str]:
    """`h.rep` with each revisited term mapped to its class's representative now (none if it is one)."""
    rep = dict(h.rep)
    for y in revisit:
        if y in new_rep and new_rep[y] != y:
            rep[y] = new_rep[y]
        else:
            rep.pop(y, None)
    return rep


def _asserted_parents_after(h: Hierarchy, rows: Rows, revisit: set[str], out: Callable[[str], bool],
                            passing: Callable[[str, str, str], bool]) -> dict[str, frozenset[str]]:
    """`h.asserted_parents` with each revisited term's asserted edges now."""
    asserted_parents = dict(h.asserted_parents)
    for t in revisit:
        parents = frozenset() if out(t) else frozenset(
            o for p, o in _edges_out(rows, t) if passing(t, p, o) and rows.is_asserted(t, p, o))
        if parents:
            asserted_parents[t] = parents
        else:
            asserted_parents.pop(t, None)
    return asserted_parents


def _labels_after(h: Hierarchy, rows: Rows, relabelled: set[str]) -> dict[str, str]:
    """`h.labels` with each relabelled term's label now."""
    labels = dict(h.labels)
    for t in relabelled:
        name = rows.label(t)
        if name is None:
            labels.pop(t, None)
        else:
            labels[t] = name
    return labels


def _patched(up: dict[str, frozenset[str]], down: dict[str, frozenset[str]], recompute: set[str], gone: set[str],
             above: Callable[[str], frozenset[str]], keep_empty: bool
             ) -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]]]:
    """`up` with the entries of `recompute` computed again and those of `gone` dropped, and `down` to match."""
    new_up = dict(up)
    changes: dict[str, set[str]] = {}  # down entries to rebuild: target → its set, being edited
    new_down = dict(down)

    def edit(a: str) -> set[str]:
        if a not in changes:
            changes[a] = set(down.get(a, ()))
        return changes[a]

    for r in recompute | gone:
        before = up.get(r, frozenset())
        after = frozenset() if r in gone else above(r)
        for a in before - after:
            edit(a).discard(r)
        for a in after - before:
            edit(a).add(r)
        if r in gone or (not after and not keep_empty):
            new_up.pop(r, None)
        else:
            new_up[r] = after
    for a, s in changes.items():
        new_down[a] = frozenset(s)
    for r in recompute - gone:
        if keep_empty and r not in new_down:
            new_down[r] = frozenset()
    for a in [a for a, s in new_down.items() if not s and (a in gone or not keep_empty)]:
        del new_down[a]
    for r in gone:
        new_down.pop(r, None)
    return new_up, new_down
