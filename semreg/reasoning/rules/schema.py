"""OWL 2 RL rules of the schema vocabulary (W3C OWL 2 Profiles §4.3, table 9): the class and property
hierarchies, equivalence, and subsumption between restrictions and boolean class expressions. Each is
registered in `triggers` once per premise it can be triggered by."""
from __future__ import annotations

from collections.abc import Iterable

from semreg.reasoning.rules.triggers import (
    AVF,
    BY_CLASS,
    CLASS,
    DATATYPE_PROPERTY,
    EQC,
    EQP,
    HV,
    INT,
    NOTHING,
    OBJECT_PROPERTY,
    ONP,
    RDF_PROPERTY,
    SCO,
    SPO,
    SVF,
    THING,
    UNI,
    E,
    Fact,
    Store,
    rule,
)


# -- Table 9: schema vocabulary -------------------------------------------------------------------------
@rule("scm-cls", cls=CLASS)
def scm_cls(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    out.append((s, SCO, s))  # and so c ≡ c, by scm-eqc2
    out.append((s, SCO, THING))
    out.append((NOTHING, SCO, s))


@rule("scm-op/scm-dp", cls=OBJECT_PROPERTY)
def scm_op(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    out.append((s, SPO, s))  # and so p ≡ p, by scm-eqp2


BY_CLASS[DATATYPE_PROPERTY] = [scm_op]
BY_CLASS[RDF_PROPERTY] = [scm_op]


@rule("scm-sco", predicate=SCO)
def scm_sco(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if s != o:
        for c3 in st.ps[SCO].get(o, E):  # (s ⊑ o), (o ⊑ c3)
            if c3 != s:
                out.append((s, SCO, c3))
    for c1 in st.po[SCO].get(s, E):  # (c1 ⊑ s), (s ⊑ o)
        if c1 != s and c1 != o:
            out.append((c1, SCO, o))


@rule("scm-eqc1", predicate=EQC)
def scm_eqc1(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if s != o:  # an asserted x ≡ x concludes nothing (owlrl), not even x ⊑ x
        out.append((s, SCO, o))
        out.append((o, SCO, s))


@rule("scm-eqc2", predicate=SCO)
def scm_eqc2(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if s == o:
        out.append((s, EQC, s))
    elif s in st.ps[SCO].get(o, E):
        out.append((s, EQC, o))
        out.append((o, EQC, s))


@rule("scm-spo", predicate=SPO)
def scm_spo(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if s != o:
        for p3 in st.ps[SPO].get(o, E):
            if p3 != s:
                out.append((s, SPO, p3))
    for p1 in st.po[SPO].get(s, E):
        if p1 != s and p1 != o:
            out.append((p1, SPO, o))


@rule("scm-eqp1", predicate=EQP)
def scm_eqp1(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if s != o:  # an asserted x ≡ x concludes nothing (owlrl), not even x ⊑ x
        out.append((s, SPO, o))
        out.append((o, SPO, s))


@rule("scm-eqp2", predicate=SPO)
def scm_eqp2(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if s == o:
        out.append((s, EQP, s))
    elif s in st.ps[SPO].get(o, E):
        out.append((s, EQP, o))
        out.append((o, EQP, s))


# scm-dom1, scm-dom2, scm-rng1 and scm-rng2 are kept as a view of the closure, not as rules of it:
# `semreg.reasoning.propagation` says why and how.


def _restriction_pairs(st: Store, on: int, c: int) -> Iterable[tuple[int, int]]:
    """(c', filler) of every restriction c' with the same property as c, by `on` (someValuesFrom, ...)."""
    for q in st.ps[ONP].get(c, E):
        for c2 in st.po[ONP].get(q, E):
            for y2 in st.ps[on].get(c2, E):
                yield c2, y2


def _scm_filler(name: str, on: int) -> None:
    """scm-svf1 / scm-avf1: restrictions on one property, fillers y1 ⊑ y2 (avf: c1 ⊑ c2 the same way)."""

    # s a restriction with filler o; the other restriction c2 / y2
    def by_restriction(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
        sco = st.ps[SCO]
        for c2, y2 in _restriction_pairs(st, on, s):
            if y2 in sco.get(o, E):
                out.append((s, SCO, c2))
            if o in sco.get(y2, E):
                out.append((c2, SCO, s))

    def by_property(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:  # (s ONP o)
        sco = st.ps[SCO]
        for y1 in st.ps[on].get(s, E):
            for c2 in st.po[ONP].get(o, E):
                for y2 in st.ps[on].get(c2, E):
                    if y2 in sco.get(y1, E):
                        out.append((s, SCO, c2))
                    if y1 in sco.get(y2, E):
                        out.append((c2, SCO, s))

    def by_subclass(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:  # (y1 ⊑ y2) = (s SCO o)
        for c1 in st.po[on].get(s, E):
            for q in st.ps[ONP].get(c1, E):
                for c2 in st.po[ONP].get(q, E):
                    if o in st.ps[on].get(c2, E):
                        out.append((c1, SCO, c2))

    rule(name, predicate=on)(by_restriction)
    rule(name, predicate=ONP)(by_property)
    rule(name, predicate=SCO)(by_subclass)


def _scm_property(name: str, on: int, reverse: bool) -> None:
    """scm-svf2 / scm-avf2 / scm-hv: restrictions with one filler (value), properties p1 ⊑ p2.

    The conclusion is c1 ⊑ c2 (c2 ⊑ c1 for allValuesFrom) where c1 is on p1 and c2 on p2.
    """

    def emit(c1: int, c2: int, out: list[Fact]) -> None:
        out.append((c2, SCO, c1) if reverse else (c1, SCO, c2))

    def by_restriction(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:  # (s on o): s as c1 and as c2
        spo = st.ps[SPO]
        for c in st.po[on].get(o, E):
            for p_s in st.ps[ONP].get(s, E):
                for p_c in st.ps[ONP].get(c, E):
                    if p_c in spo.get(p_s, E):
                        emit(s, c, out)
                    if p_s in spo.get(p_c, E):
                        emit(c, s, out)

    def by_property(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:  # (s ONP o)
        spo = st.ps[SPO]
        for y in st.ps[on].get(s, E):
            for c in st.po[on].get(y, E):
                for p_c in st.ps[ONP].get(c, E):
                    if p_c in spo.get(o, E):
                        emit(s, c, out)
                    if o in spo.get(p_c, E):
                        emit(c, s, out)

    def by_subproperty(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:  # (p1 ⊑ p2) = (s SPO o)
        for c1 in st.po[ONP].get(s, E):
            for y in st.ps[on].get(c1, E):
                for c2 in st.po[on].get(y, E):
                    if o in st.ps[ONP].get(c2, E):
                        emit(c1, c2, out)

    rule(name, predicate=on)(by_restriction)
    rule(name, predicate=ONP)(by_property)
    rule(name, predicate=SPO)(by_subproperty)


_scm_filler("scm-svf1", SVF)
_scm_filler("scm-avf1", AVF)
_scm_property("scm-svf2", SVF, reverse=False)
_scm_property("scm-avf2", AVF, reverse=True)
_scm_property("scm-hv", HV, reverse=False)


@rule("scm-int", predicate=INT)
def scm_int(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for m in st.members(o) or E:
        out.append((s, SCO, m))


@rule("scm-uni", predicate=UNI)
def scm_uni(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for m in st.members(o) or E:
        out.append((m, SCO, s))
