"""Delete and re-derive (DRed; Gupta, Mumick & Subrahmanian 1993): how a closure withdraws facts.

First every fact with a derivation through a withdrawn one is taken out (over-deletion, by the same
forward rules over the store as it was); then every such fact that still has a derivation from what is
left comes back. To find those, the rules run once more from every remaining fact that shares a subject
or object with a withdrawn fact: every RL rule instance has a premise holding its conclusion's subject
(or, for scm-cls's `owl:Nothing ⊑ c`, its object) in subject or object position, so these seeds reach
every instance that concludes a withdrawn fact from facts still there; what comes back is then inserted.
`x sameAs x` is the exception (eq-ref concludes it of a predicate too): but for a literal x, whose
reflexive triple only the equality rules conclude, it comes back when some fact still holds x, which is
checked rather than re-derived, or every fact about rdf:type or owl:Thing would
run the rules again. Reflexive equivalences are inert (`semreg.reasoning.closure`) here as there.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from semreg.reasoning.rules import triggers
from semreg.reasoning.rules.triggers import EQC, EQP, NOTHING, SAME, SCO, Fact
from semreg.reasoning.terms import LITERAL, Terms

INERT = frozenset({SAME, EQC, EQP})  # x sameAs x, c ≡ c, p ≡ p, when reflexive: premises of no rule


class Closure(triggers.Store, Protocol):
    """What delete and re-derive needs of the closure (`semreg.reasoning.closure.Closure`, which imports
    this module): what the rules read, what is asserted, and taking facts out and back in."""

    terms: Terms
    asserted: dict[Fact, int]

    def has(self, s: int, p: int, o: int) -> bool: ...

    def insert_facts(self, facts: Iterable[Fact], change: Change) -> None: ...

    def remove_fact(self, f: Fact) -> None: ...


@dataclass
class Change:
    """What one change did to the closure: facts that are new, facts that are gone (ids)."""

    added: list[Fact] = field(default_factory=list)
    removed: list[Fact] = field(default_factory=list)
    full: bool = False  # computed from scratch rather than incrementally


def withdraw(st: Closure, lost: list[Fact], change: Change) -> None:
    """Withdraw `lost` (asserted facts no graph asserts any more) and all that only they supported."""
    # 1. over-delete: everything with a derivation through a lost fact, over the store as it was
    doomed = set(lost)
    todo = list(lost)
    asserted = st.asserted
    kinds = st.terms.kinds
    out: list[Fact] = []
    while todo:
        s, p, o = todo.pop()
        out.extend((x, SAME, x) for x in (s, p, o) if kinds[x] != LITERAL)  # eq-ref
        if s != o or p not in INERT:
            triggers.consequences(st, s, p, o, out)
        else:
            triggers.consequences_of_reflexive(st, s, p, o, out)
        for c in out:
            if c not in doomed and c not in asserted and st.has(*c):
                doomed.add(c)
                todo.append(c)
        out.clear()
    for f in doomed:
        st.remove_fact(f)
    # 2. re-derive: rule instances over what is left that conclude a withdrawn fact
    # (x sameAs x) holds while x is in some fact (eq-ref): those are checked, not re-derived, or every
    # fact about rdf:type or owl:Thing would run the rules again
    reflexive = {s for s, p, o in doomed if p == SAME and s == o and kinds[s] != LITERAL}  # a literal's: by rules
    keys = {o if s == NOTHING and p == SCO else s for s, p, o in doomed if p != SAME or s != o or s not in reflexive}
    back: list[Fact] = [(x, SAME, x) for x in mentioned(st, reflexive)]
    for s, p, o in facts_about(st, keys):
        if s != o or p not in INERT:
            triggers.consequences(st, s, p, o, out)
        else:
            triggers.consequences_of_reflexive(st, s, p, o, out)
        for c in out:
            if c in doomed:
                back.append(c)
        out.clear()
    returned = Change()
    st.insert_facts(back, returned)
    kept = set(returned.added)
    change.removed.extend(f for f in doomed if f not in kept)


def mentioned(st: Closure, terms: set[int]) -> set[int]:
    """Those of `terms` that some fact holds, as its subject, predicate or object."""
    found = {t for t in terms if st.ps.get(t)}
    left = terms - found
    for index in (st.ps, st.po):
        for d in index.values():
            if not left:
                return found
            hit = left & d.keys()
            found |= hit
            left -= hit
    return found


def facts_about(st: Closure, terms: set[int]) -> Iterator[Fact]:
    """Every fact with one of `terms` as subject or object."""
    for p, d in st.ps.items():
        for s in terms & d.keys() if len(terms) < len(d) else (s for s in d if s in terms):
            for o in d[s]:
                yield s, p, o
    for p, d in st.po.items():
        for o in terms & d.keys() if len(terms) < len(d) else (o for o in d if o in terms):
            for s in d[o]:
                if s not in terms:  # yielded above
                    yield s, p, o
