"""OWL 2 RL rules of equality and properties (W3C OWL 2 Profiles §4.3, tables 4 and 5): `owl:sameAs`
and what it copies, domains and ranges, characteristics, sub-properties, equivalence, inverses, chains
and keys. Each is registered in `triggers` once per premise it can be triggered by."""
from __future__ import annotations

from itertools import product

from semreg.reasoning.rules.triggers import (
    CHAIN,
    DOM,
    EQP,
    FIRST,
    FUNCTIONAL,
    INV,
    INVERSE_FUNCTIONAL,
    KEY,
    ON_ASSERTION,
    ON_EXPRESSION_TYPE,
    ON_SAME,
    RNG,
    SAME,
    SPO,
    SYMMETRIC,
    TRANSITIVE,
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


# -- Table 4: equality ----------------------------------------------------------------------------------
@rule("eq-sym", predicate=SAME)
def eq_sym(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    out.append((o, SAME, s))


@rule("eq-trans", predicate=SAME)
def eq_trans(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for z in st.ps[SAME].get(o, E):  # (s = o), (o = z)
        if z != s:
            out.append((s, SAME, z))
    for x in st.po[SAME].get(s, E):  # (x = s), (s = o)
        if x != o:
            out.append((x, SAME, o))


@rule("eq-rep-s", predicate=SAME)
def eq_rep_s_by_same(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for q, d in st.ps.items():
        for y in d.get(s, E):
            out.append((o, q, y))


@rule("eq-rep-p", predicate=SAME)
def eq_rep_p_by_same(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for x, y in pairs(st, s):
        out.append((x, o, y))


@rule("eq-rep-o", predicate=SAME)
def eq_rep_o_by_same(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for q, d in st.po.items():
        for x in d.get(s, E):
            out.append((x, q, o))


@rule("eq-rep-s", table=ON_SAME)
def eq_rep_s(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for s2 in st.ps[SAME].get(s, E):
        if s2 != s:  # x sameAs x is inert (triggers)
            out.append((s2, p, o))


@rule("eq-rep-p", table=ON_SAME)
def eq_rep_p(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for p2 in st.ps[SAME].get(p, E):
        if p2 != p:
            out.append((s, p2, o))


@rule("eq-rep-o", table=ON_SAME)
def eq_rep_o(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for o2 in st.ps[SAME].get(o, E):
        if o2 != o:
            out.append((s, p, o2))


# -- Table 5: properties --------------------------------------------------------------------------------
@rule("prp-dom", table=ON_ASSERTION)
def prp_dom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for c in st.ps[DOM].get(p, E):
        out.append((s, T, c))


@rule("prp-dom", predicate=DOM)
def prp_dom_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    d = st.ps.get(s)
    if d:
        out.extend((x, T, o) for x in d)


@rule("prp-rng", table=ON_ASSERTION)
def prp_rng(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for c in st.ps[RNG].get(p, E):
        out.append((o, T, c))


@rule("prp-rng", predicate=RNG)
def prp_rng_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    d = st.po.get(s)
    if d:
        out.extend((y, T, o) for y in d)


@rule("prp-fp", table=ON_ASSERTION)
def prp_fp(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if FUNCTIONAL in st.ps[T].get(p, E):
        for y2 in objects(st, s, p):
            if y2 != o:
                out.append((o, SAME, y2))
                out.append((y2, SAME, o))


@rule("prp-fp", cls=FUNCTIONAL)
def prp_fp_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for ys in (st.ps.get(s) or {}).values():
        same_pairs(ys, out)


@rule("prp-ifp", table=ON_ASSERTION)
def prp_ifp(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if INVERSE_FUNCTIONAL in st.ps[T].get(p, E):
        for x2 in subjects(st, p, o):
            if x2 != s:
                out.append((s, SAME, x2))
                out.append((x2, SAME, s))


@rule("prp-ifp", cls=INVERSE_FUNCTIONAL)
def prp_ifp_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for xs in (st.po.get(s) or {}).values():
        same_pairs(xs, out)


@rule("prp-symp", table=ON_ASSERTION)
def prp_symp(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if SYMMETRIC in st.ps[T].get(p, E):
        out.append((o, p, s))


@rule("prp-symp", cls=SYMMETRIC)
def prp_symp_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for x, y in pairs(st, s):
        out.append((y, s, x))


@rule("prp-trp", table=ON_ASSERTION)
def prp_trp(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if TRANSITIVE in st.ps[T].get(p, E):
        for z in objects(st, o, p):  # (s p o), (o p z)
            out.append((s, p, z))
        for x in subjects(st, p, s):  # (x p s), (s p o)
            out.append((x, p, o))


@rule("prp-trp", cls=TRANSITIVE)
def prp_trp_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for x, y in list(pairs(st, s)):
        for z in objects(st, y, s):
            out.append((x, s, z))


@rule("prp-spo1", table=ON_ASSERTION)
def prp_spo1(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for p2 in st.ps[SPO].get(p, E):
        if p2 != p:
            out.append((s, p2, o))


@rule("prp-spo1", predicate=SPO)
def prp_spo1_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    if s != o:
        for x, y in pairs(st, s):
            out.append((x, o, y))


@rule("prp-eqp1", table=ON_ASSERTION)
def prp_eqp1(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for p2 in st.ps[EQP].get(p, E):
        if p2 != p:  # p ≡ p is inert (triggers)
            out.append((s, p2, o))


@rule("prp-eqp2", table=ON_ASSERTION)
def prp_eqp2(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for p1 in st.po[EQP].get(p, E):
        if p1 != p:
            out.append((s, p1, o))


@rule("prp-eqp1", predicate=EQP)
def prp_eqp1_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for x, y in pairs(st, s):
        out.append((x, o, y))


@rule("prp-eqp2", predicate=EQP)
def prp_eqp2_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for x, y in pairs(st, o):
        out.append((x, s, y))


@rule("prp-inv1", table=ON_ASSERTION)
def prp_inv1(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for p2 in st.ps[INV].get(p, E):
        out.append((o, p2, s))


@rule("prp-inv2", table=ON_ASSERTION)
def prp_inv2(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for p1 in st.po[INV].get(p, E):
        out.append((o, p1, s))


@rule("prp-inv1", predicate=INV)
def prp_inv1_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for x, y in pairs(st, s):
        out.append((y, o, x))


@rule("prp-inv2", predicate=INV)
def prp_inv2_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for x, y in pairs(st, o):
        out.append((y, s, x))


def _chain_paths(st: Store, chain: tuple[int, ...], start: int, stop: int, node: int, forward: bool) -> set[int]:
    """The nodes reached from `node` along chain[start:stop] (forwards), or that reach it (backwards)."""
    frontier = {node}
    steps = chain[start:stop] if forward else reversed(chain[start:stop])
    for q in steps:
        nxt: set[int] = set()
        for u in frontier:
            nxt.update(objects(st, u, q) if forward else subjects(st, q, u))
        frontier = nxt
        if not frontier:
            break
    return frontier


@rule("prp-spo2", table=ON_ASSERTION)
def prp_spo2(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for cell in st.po[FIRST].get(p, E):
        for head in st.heads(cell):
            props = st.po[CHAIN].get(head)
            chain = st.members(head) if props else None
            if props is None or chain is None:
                continue
            for i, q in enumerate(chain):
                if q == p:
                    lefts = _chain_paths(st, chain, 0, i, s, forward=False)
                    rights = _chain_paths(st, chain, i + 1, len(chain), o, forward=True)
                    out.extend((u, prop, v) for prop in props for u in lefts for v in rights)


@rule("prp-spo2", predicate=CHAIN)
def prp_spo2_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    chain = st.members(o)
    if chain:
        for u, v in list(pairs(st, chain[0])):
            out.extend((u, s, w) for w in _chain_paths(st, chain, 1, len(chain), v, forward=True))


def _key_matches(st: Store, cls: int, keys: tuple[int, ...], x: int, out: list[Fact]) -> None:
    """prp-key for one individual x of cls: every other instance of cls with the same key values."""
    values = [list(objects(st, x, k)) for k in keys]
    instances = st.po[T].get(cls, E)
    for combo in product(*values):
        same = set(instances)
        for k, z in zip(keys, combo):
            same &= set(subjects(st, k, z))
            if not same:
                break
        for y in same:
            if y != x:
                out.append((x, SAME, y))
                out.append((y, SAME, x))


@rule("prp-key", predicate=KEY)
def prp_key_by_axiom(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    keys = st.members(o)
    if keys:
        for x in list(st.po[T].get(s, E)):
            _key_matches(st, s, keys, x, out)


@rule("prp-key", table=ON_EXPRESSION_TYPE)
def prp_key_by_type(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for head in st.ps[KEY].get(o, E):
        keys = st.members(head)
        if keys:
            _key_matches(st, o, keys, s, out)


@rule("prp-key", table=ON_ASSERTION)
def prp_key(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    for cell in st.po[FIRST].get(p, E):
        for head in st.heads(cell):
            keys = st.members(head)
            if keys:
                for cls in st.po[KEY].get(head, E):
                    if cls in st.ps[T].get(s, E):
                        _key_matches(st, cls, keys, s, out)
