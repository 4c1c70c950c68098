"""Per-arc digests for anti-entropy: equal exactly when two members hold the same records at the same
revisions in an arc, whatever the order they were added in."""
from __future__ import annotations

import random

from semreg.cluster.ring import Ring
from semreg.registry.digests import by_arc, digests

RING = Ring(["a", "b", "c"], points=16)


def test_the_same_records_give_the_same_digests_in_any_order():
    held = {f"i{n}": n + 1 for n in range(500)}
    shuffled = dict(random.Random(3).sample(sorted(held.items()), len(held)))
    assert digests(RING, held) == digests(RING, shuffled)
    assert sum(d[0] for d in digests(RING, held).values()) == 500


def test_a_newer_revision_a_tombstone_or_a_missing_record_changes_only_its_arc():
    held = {f"i{n}": n + 1 for n in range(500)}
    before = digests(RING, held)
    arc = RING.arc_of("i7")
    for changed in ({**held, "i7": 1000}, {**held, "i7": -1000}, {k: v for k, v in held.items() if k != "i7"}):
        after = digests(RING, changed)
        assert {a for a in before.keys() | after.keys() if before.get(a) != after.get(a)} == {arc}


def test_arcs_asked_for_and_holding_nothing_are_empty_digests():
    held = {"i1": 1}
    arcs = by_arc(RING, ["i1", "zz"])
    found = digests(RING, held, arcs)
    assert set(found) == set(arcs)
    assert found[RING.arc_of("i1")][0] == 1
    empty = [a for a in arcs if a != RING.arc_of("i1")]
    assert all(found[a] == (0, 0, 0) for a in empty)


def test_every_key_of_an_arc_has_the_arcs_owners():
    for n in range(2000):
        key = f"k{n}"
        arc = RING.ranges()[RING.arc_of(key)]
        assert RING.in_arc(RING.hash(key), arc) and RING.arc_owners(arc, 2) == RING.owners(key, 2)
