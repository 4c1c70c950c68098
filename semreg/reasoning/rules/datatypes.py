"""OWL 2 RL rules of datatypes (W3C OWL 2 Profiles §4.3, table 8): of what datatypes a literal is, and
which literals are the same. Each is registered in `triggers` once per premise it can be triggered by.

dt-type1 is an axiom (`triggers.axioms`); dt-not-type only detects inconsistency and is left out
(`triggers`). A literal takes part once a fact holds it: its typing by its own datatype (dt-type2) is
the premise dt-eq reads, so two literals stop being the same when the last fact holding one of them goes.

dt-diff holds of every two literals of different data values, which is quadratic in the literals; but a
triple with a literal subject is not RDF (`semreg.reasoning.closure`), so such a difference is seen only
through what eq-rep makes of it, when a literal is `owl:sameAs` some other term: `:w owl:sameAs 42`,
`:v owl:sameAs -15` give `:w owl:differentFrom :v`. So semreg derives dt-diff between literals that are
each in some `owl:sameAs` fact (its premises; `same_literals` is a superset of them), and literals
held elsewhere (the labels and comments of an ontology) cost nothing. What it leaves out is `:w
owl:differentFrom "x"` for a literal `"x"` that is the same as nothing but itself.
"""
from __future__ import annotations

from semreg.reasoning.rules.triggers import (
    BY_CLASS,
    DATATYPE_IDS,
    DIFFERENT,
    LITERALS,
    NAMES,
    SAME,
    E,
    Fact,
    Store,
    T,
    rule,
)


@rule("dt-type2", table=LITERALS)
def dt_type2(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    out.extend((o, T, dt) for dt in st.literal_types[o])


def dt_eq(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    """(lt1 type dt1), (lt2 type dt2), each by its own datatype, the same data value → lt1 = lt2."""
    key = st.literal_values.get(s)
    if key is None or st.literal_types[s][0] != o:
        return
    typed = st.ps[T]
    for other in st.same_value[key]:
        if other != s and st.literal_types[other][0] in typed.get(other, E):
            out.append((s, SAME, other))
            out.append((other, SAME, s))


NAMES[dt_eq] = "dt-eq"
for _dt in DATATYPE_IDS:  # triggered by (lt type dt) for each RL datatype dt
    BY_CLASS.setdefault(_dt, []).append(dt_eq)


@rule("dt-diff", predicate=SAME)
def dt_diff(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    """(lt1 sameAs x), (lt2 sameAs y), lt1 and lt2 of different data values → lt1 ≠ lt2 (both ways).

    Only a literal with a data value (`semreg.reasoning.literals`) is compared: one without (ill-typed,
    or of a datatype whose values are not compared) may be equal to another literal for all semreg knows.
    """
    key = st.literal_values.get(s)
    if key is None:
        return
    values, same = st.literal_values, st.ps[SAME]
    for other in st.same_literals:
        if values[other] != key and other in same:
            out.append((s, DIFFERENT, other))
            out.append((other, DIFFERENT, s))
