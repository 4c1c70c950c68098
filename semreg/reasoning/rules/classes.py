"""OWL 2 RL rules of classes and class axioms (W3C OWL 2 Profiles §4.3, tables 6-7; table 8 is in
`datatypes`): who is a member of an intersection, a union, a restriction, an enumeration, a sub-class or
an equivalent class. Each is registered in `triggers` once per premise it can be triggered by."""
from __future__ import annotations

from collections.abc import Iterable

from semreg.reasoning.rules.triggers import (
    AVF,
    EQC,
    FIRST,
    HV,
    INT,
    MAXC,
    MAXQC,
    ON_ASSERTION,
    ON_EXPRESSION_TYPE,
    ON_TYPE,
    ONCLASS,
    ONEOF,
    ONP,
    SAME,
    SCO,
    SVF,
    THING,
    UNI,
    E,
    Fact,
    Store,
    T,
    objects,
    pairs,
    rule,
    same_pairs,
    subjects,
)


# -- Table 6: classes -----------------------------------------------------------------------------------
def _list_users(st: Store, member: int, predicate: int) -> list[tuple[int, tuple[int, ...]]]:
    """(c, items) for every (c predicate list) whose well-formed list holds `member`."""
    cells = st.po[FIRST].get(member)
    if not cells:
        return []
    found: list[tuple[int, tuple[int, ...]]] = []
    for cell in cells:
        for head in st.heads(cell):
            users = st.po[predicate].get(head)
            if users:
                items = st.members(head)
                if items is not None:
                    found.extend((c, items) for c in users)
    return found


@rule("cls-int1", table=ON_EXPRESSION_TYPE)
def cls_int1(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    types = st.ps[T].get(s, E)
    for c, items in _list_users(st, o, INT):
        if all(m in types for m in items):
            out.append((s, T, c))


@rule("cls-int1", predicate=INT)
def cls_int1_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    items = st.members(o)
    if items:
        types = st.ps[T]
        for y in list(st.po[T].get(items[0], E)):
            if all(m in types.get(y, E) for m in items):
                out.append((y, T, s))


@rule("cls-int2", table=ON_EXPRESSION_TYPE)
def cls_int2(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for head in st.ps[INT].get(o, E):
        for m in st.members(head) or E:
            out.append((s, T, m))


@rule("cls-int2", predicate=INT)
def cls_int2_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    items = st.members(o) or E
    for y in st.po[T].get(s, E):
        out.extend((y, T, m) for m in items)


@rule("cls-uni", table=ON_EXPRESSION_TYPE)
def cls_uni(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for c, _ in _list_users(st, o, UNI):
        out.append((s, T, c))


@rule("cls-uni", predicate=UNI)
def cls_uni_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for m in st.members(o) or E:
        for y in st.po[T].get(m, E):
            out.append((y, T, s))


def _restrictions_on(st: Store, p: int) -> Iterable[int]:
    return st.po[ONP].get(p, E)


@rule("cls-svf1", table=ON_ASSERTION)
def cls_svf(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    # cls-svf2 is the case y = owl:Thing, which needs no type of v (owlrl reads it so for every y = Thing).
    types = st.ps[T].get(o, E)
    for x in _restrictions_on(st, p):
        for y in st.ps[SVF].get(x, E):
            if y == THING or y in types:
                out.append((s, T, x))


@rule("cls-svf1", table=ON_EXPRESSION_TYPE)
def cls_svf1_by_type(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if o != THING:
        for x in st.po[SVF].get(o, E):
            for q in st.ps[ONP].get(x, E):
                for u in subjects(st, q, s):
                    out.append((u, T, x))


@rule("cls-svf1", predicate=SVF)
def cls_svf_by_filler(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    types = st.ps[T]
    for q in st.ps[ONP].get(s, E):
        for u, v in pairs(st, q):
            if o == THING or o in types.get(v, E):
                out.append((u, T, s))


@rule("cls-svf1", predicate=ONP)
def cls_svf_by_property(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    types = st.ps[T]
    for y in st.ps[SVF].get(s, E):
        for u, v in pairs(st, o):
            if y == THING or y in types.get(v, E):
                out.append((u, T, s))


@rule("cls-avf", table=ON_ASSERTION)
def cls_avf(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    types = st.ps[T].get(s, E)
    for x in _restrictions_on(st, p):
        if x in types:
            for y in st.ps[AVF].get(x, E):
                out.append((o, T, y))


@rule("cls-avf", table=ON_EXPRESSION_TYPE)
def cls_avf_by_type(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for y in st.ps[AVF].get(o, E):
        for q in st.ps[ONP].get(o, E):
            for v in objects(st, s, q):
                out.append((v, T, y))


@rule("cls-avf", predicate=AVF)
def cls_avf_by_filler(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for q in st.ps[ONP].get(s, E):
        for u in st.po[T].get(s, E):
            for v in objects(st, u, q):
                out.append((v, T, o))


@rule("cls-avf", predicate=ONP)
def cls_avf_by_property(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for y in st.ps[AVF].get(s, E):
        for u in st.po[T].get(s, E):
            for v in objects(st, u, o):
                out.append((v, T, y))


@rule("cls-hv1", table=ON_EXPRESSION_TYPE)
def cls_hv1(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for y in st.ps[HV].get(o, E):
        for q in st.ps[ONP].get(o, E):
            out.append((s, q, y))


@rule("cls-hv1", predicate=HV)
def cls_hv1_by_value(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for q in st.ps[ONP].get(s, E):
        for u in st.po[T].get(s, E):
            out.append((u, q, o))


@rule("cls-hv1", predicate=ONP)
def cls_hv1_by_property(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for y in st.ps[HV].get(s, E):
        for u in st.po[T].get(s, E):
            out.append((u, o, y))


@rule("cls-hv2", table=ON_ASSERTION)
def cls_hv2(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for x in _restrictions_on(st, p):
        if o in st.ps[HV].get(x, E):
            out.append((s, T, x))


@rule("cls-hv2", predicate=HV)
def cls_hv2_by_value(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for q in st.ps[ONP].get(s, E):
        for u in subjects(st, q, o):
            out.append((u, T, s))


@rule("cls-hv2", predicate=ONP)
def cls_hv2_by_property(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for y in st.ps[HV].get(s, E):
        for u in subjects(st, o, y):
            out.append((u, T, s))


def _max_one(st: Store, x: int, predicate: int) -> bool:
    return any(st.cardinality_one(n) for n in st.ps[predicate].get(x, E))


def _qualified(st: Store, cls: int, ys: Iterable[int]) -> list[int]:
    if cls == THING:
        return list(ys)
    types = st.ps[T]
    return [y for y in ys if cls in types.get(y, E)]


def _maxc2(st: Store, x: int, u: int, out: list[Fact]) -> None:
    for q in st.ps[ONP].get(x, E):
        same_pairs(objects(st, u, q), out)


def _maxqc(st: Store, x: int, u: int, out: list[Fact]) -> None:
    for q in st.ps[ONP].get(x, E):
        for c in st.ps[ONCLASS].get(x, E):
            same_pairs(_qualified(st, c, objects(st, u, q)), out)


@rule("cls-maxc2", table=ON_EXPRESSION_TYPE)
def cls_maxc2_by_type(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if st.ps[MAXC].get(o) and _max_one(st, o, MAXC):
        _maxc2(st, o, s, out)


@rule("cls-maxc2", table=ON_ASSERTION)
def cls_maxc2(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    types = st.ps[T].get(s, E)
    for x in _restrictions_on(st, p):
        if x in types and _max_one(st, x, MAXC):
            for y2 in objects(st, s, p):
                if y2 != o:
                    out.append((o, SAME, y2))
                    out.append((y2, SAME, o))


@rule("cls-maxc2", predicate=MAXC)
def cls_maxc2_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if st.cardinality_one(o):
        for u in list(st.po[T].get(s, E)):
            _maxc2(st, s, u, out)


@rule("cls-maxc2", predicate=ONP)
def cls_maxc2_by_property(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if _max_one(st, s, MAXC):
        for u in list(st.po[T].get(s, E)):
            same_pairs(objects(st, u, o), out)


@rule("cls-maxqc3", table=ON_EXPRESSION_TYPE)
def cls_maxqc_by_type(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if st.ps[MAXQC].get(o) and _max_one(st, o, MAXQC):
        _maxqc(st, o, s, out)
    # (y T c) as the qualifying type of a value
    if o != THING:
        for x in st.po[ONCLASS].get(o, E):
            if _max_one(st, x, MAXQC):
                members = st.po[T].get(x, E)
                for q in st.ps[ONP].get(x, E):
                    for u in subjects(st, q, s):
                        if u in members:
                            same_pairs(_qualified(st, o, objects(st, u, q)), out)


@rule("cls-maxqc3", table=ON_ASSERTION)
def cls_maxqc(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    types = st.ps[T].get(s, E)
    for x in _restrictions_on(st, p):
        if x in types and _max_one(st, x, MAXQC):
            for c in st.ps[ONCLASS].get(x, E):
                same_pairs(_qualified(st, c, objects(st, s, p)), out)


@rule("cls-maxqc3", predicate=MAXQC)
def cls_maxqc_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if st.cardinality_one(o):
        for u in list(st.po[T].get(s, E)):
            _maxqc(st, s, u, out)


@rule("cls-maxqc3", predicate=ONCLASS)
def cls_maxqc_by_class(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if _max_one(st, s, MAXQC):
        for u in list(st.po[T].get(s, E)):
            for q in st.ps[ONP].get(s, E):
                same_pairs(_qualified(st, o, objects(st, u, q)), out)


@rule("cls-maxqc3", predicate=ONP)
def cls_maxqc_by_property(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if _max_one(st, s, MAXQC):
        for u in list(st.po[T].get(s, E)):
            for c in st.ps[ONCLASS].get(s, E):
                same_pairs(_qualified(st, c, objects(st, u, o)), out)


@rule("cls-oo", predicate=ONEOF)
def cls_oo(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for y in st.members(o) or E:
        out.append((y, T, s))


# -- Table 7: class axioms ------------------------------------------------------------------------------
@rule("cax-sco", table=ON_TYPE)
def cax_sco(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for c2 in st.ps[SCO].get(o, E):
        if c2 != o:
            out.append((s, T, c2))


@rule("cax-sco", predicate=SCO)
def cax_sco_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if s != o:
        for x in st.po[T].get(s, E):
            out.append((x, T, o))


@rule("cax-eqc1", table=ON_TYPE)
def cax_eqc1(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for c2 in st.ps[EQC].get(o, E):
        if c2 != o:  # c ≡ c is inert (triggers)
            out.append((s, T, c2))


@rule("cax-eqc2", table=ON_TYPE)
def cax_eqc2(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for c1 in st.po[EQC].get(o, E):
        if c1 != o:
            out.append((s, T, c1))


@rule("cax-eqc1", predicate=EQC)
def cax_eqc1_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for x in st.po[T].get(s, E):
        out.append((x, T, o))


@rule("cax-eqc2", predicate=EQC)
def cax_eqc2_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for x in st.po[T].get(o, E):
        out.append((x, T, s))
