"""OWL 2 RL rules of datatypes (W3C OWL 2 Profiles §4.3, table 8): of what datatypes a literal is, and
which literals are the same. Each is registered in `triggers` once per premise it can be triggered by.

dt-type1 is an axiom (`triggers.axioms`); dt-not-type and dt-diff only detect inconsistency or
difference and are left out (`triggers`). A literal takes part once a fact holds it: its typing by its
own datatype (dt-type2) is the premise dt-eq reads, so two literals stop being the same when the last
fact holding one of them goes.
"""
from __future__ import annotations

from semreg.reasoning.rules.triggers import BY_CLASS, DATATYPE_IDS, LITERALS, NAMES, SAME, E, Fact, Store, T, rule


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
