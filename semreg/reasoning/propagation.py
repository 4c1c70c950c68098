"""scm-dom1, scm-dom2, scm-rng1 and scm-rng2 (W3C OWL 2 Profiles §4.3, table 9), kept as a view of the
closure rather than as rules of it.

    scm-dom1  (p domain c1), (c1 ⊑ c2) → (p domain c2)      scm-dom2  (p2 domain c), (p1 ⊑ p2) → (p1 domain c)
    scm-rng1  (p range c1), (c1 ⊑ c2)  → (p range c2)       scm-rng2  (p2 range c), (p1 ⊑ p2)  → (p1 range c)

So the domains of p are every class above a domain of p or of a property above p. The rules would
conclude the same triples, but each propagated triple would wake the rules again (DBpedia's 3,000
domains and ranges over a deep class tree: 30,000 propagated triples, 210,000 rule instances, and the
closure's time doubled) for nothing: no rule reads them but `prp-dom`, `prp-rng` and these four, and
every type they lead to is reached without them (`scm-dom1` then `prp-dom` is `prp-dom` then `cax-sco`;
`scm-dom2` then `prp-dom` is `prp-spo1` then `prp-dom`; the same for ranges; and `eq-rep` copies the
domains and the sub-class triples they come from). That holds unless an ontology makes statements
about `rdfs:domain` or `rdfs:range` themselves, which semreg does not support.

`Propagated` holds, for each property, the domains and ranges the closure's own facts lack, and is
brought up to date after each change of the closure from the facts that changed: a changed domain or
range of q, or a changed q ⊑ q', touches q and every property below it; a changed c1 ⊑ c2 touches the
properties with domain or range c1 and those below them. A touched property's view is computed again
from the closure (sub-class and sub-property triples there are transitive), so the view is always what
a computation from scratch gives.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator

from semreg.reasoning.rules.triggers import DOM, RNG, SCO, SPO, E, Fact, Store

AXES = (DOM, RNG)


class Propagated:
    """The domains and ranges the four rules add to a closure: axis → property → classes."""

    def __init__(self) -> None:
        self.by_axis: dict[int, dict[int, set[int]]] = {DOM: {}, RNG: {}}
        self.size = 0

    def has(self, s: int, p: int, o: int) -> bool:
        d = self.by_axis.get(p)
        return d is not None and o in d.get(s, E)

    def facts(self, predicate: int | None = None) -> Iterator[Fact]:
        for axis, d in self.by_axis.items():
            if predicate is None or predicate == axis:
                for s, classes in d.items():
                    for o in classes:
                        yield s, axis, o

    def update(self, st: Store, *changes: Iterable[Fact]) -> tuple[list[Fact], list[Fact]]:
        """Bring the view up to date with `st` after the facts of `changes` came or went: (added, removed)."""
        touched: dict[int, set[int]] = {DOM: set(), RNG: set()}
        below: set[int] = set()  # subjects of changed sub-class triples
        for changed in changes:
            for s, p, _ in changed:
                if p == SCO:
                    below.add(s)
                elif p in AXES:
                    touched[p].add(s)
                elif p == SPO:
                    touched[DOM].add(s)
                    touched[RNG].add(s)
        for axis in AXES:
            of = st.po[axis]
            for c in below & of.keys() if len(below) < len(of) else (c for c in of if c in below):
                touched[axis].update(of[c])
        added: list[Fact] = []
        removed: list[Fact] = []
        sub = st.po[SPO]
        for axis, props in touched.items():
            for q in list(props):
                props.update(sub.get(q, E))
            for p in props:
                self._recompute(st, axis, p, added, removed)
        return added, removed

    def _recompute(self, st: Store, axis: int, p: int, added: list[Fact], removed: list[Fact]) -> None:
        own, sco, view = st.ps[axis], st.ps[SCO], self.by_axis[axis]
        want: set[int] = set()
        for q in (p, *st.ps[SPO].get(p, E)):
            for c in own.get(q, E):
                want.add(c)
                want.update(sco.get(c, E))
        want.difference_update(own.get(p, E))
        old = view.get(p, set())
        if want == old:
            return
        added.extend((p, axis, c) for c in want - old)
        removed.extend((p, axis, c) for c in old - want)
        self.size += len(want) - len(old)
        if want:
            view[p] = want
        else:
            view.pop(p, None)
