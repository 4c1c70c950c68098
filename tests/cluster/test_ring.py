"""The consistent-hash ring, pure: balance, movement on join and leave, owners, arcs, checksum."""
from __future__ import annotations

import collections
import statistics

import pytest

from semreg.cluster.ring import Ring, checksum

KEYS = [f"instance-{n}" for n in range(100_000)]
SOME = KEYS[:30_000]


@pytest.mark.parametrize("members", [3, 5, 10])
def test_keys_spread_within_ten_per_cent_of_even(members):
    ring = Ring([f"node-{m}" for m in range(members)])
    counts = collections.Counter(ring.owners(k, 1)[0] for k in KEYS)
    even = len(KEYS) / members
    assert set(counts) == set(ring.members)
    assert max(abs(c - even) / even for c in counts.values()) < 0.10, counts


def test_replicas_are_distinct_members_and_k_is_capped():
    ring = Ring(["a", "b", "c"])
    for key in KEYS[:1000]:
        owners = ring.owners(key, 2)
        assert len(owners) == len(set(owners)) == 2
        assert ring.owners(key, 5) == ring.owners(key, 3) and len(ring.owners(key, 3)) == 3
        assert ring.owners(key, 1) == owners[:1]
    assert Ring([]).owners("x", 2) == [] and Ring(["solo"]).owners("x", 3) == ["solo"]


def test_a_join_moves_about_a_quarter_of_the_keys_and_only_to_the_newcomer():
    before, after = Ring(["a", "b", "c"]), Ring(["a", "b", "c", "d"])
    moved = [k for k in SOME if before.owners(k, 1) != after.owners(k, 1)]
    assert all(after.owners(k, 1) == ["d"] for k in moved)
    assert 0.20 < len(moved) / len(SOME) < 0.30


def test_a_leave_moves_only_the_leavers_keys():
    before, after = Ring(["a", "b", "c", "d"]), Ring(["a", "b", "c"])
    moved = [k for k in SOME if before.owners(k, 1) != after.owners(k, 1)]
    assert all(before.owners(k, 1) == ["d"] for k in moved)
    assert len(moved) == sum(1 for k in SOME if before.owners(k, 1) == ["d"])


def test_replica_sets_change_little_on_a_join():
    before, after = Ring(["a", "b", "c", "d"]), Ring(["a", "b", "c", "d", "e"])
    changed = [k for k in KEYS[:20_000] if set(before.owners(k, 2)) != set(after.owners(k, 2))]
    # a key's pair changes only where e now sits among its first two owners: about 2/5 of them
    assert 0.30 < len(changed) / 20_000 < 0.50
    assert all("e" in after.owners(k, 2) for k in changed)


def test_the_primary_is_the_first_live_owner():
    ring = Ring(["a", "b", "c"])
    key = KEYS[7]
    first, second, third = ring.owners(key, 3)
    assert ring.primary(key) == first
    assert ring.primary(key, alive=lambda m: m != first) == second
    assert ring.primary(key, alive=lambda m: m == third) == third
    assert ring.primary(key, alive=lambda m: False) is None


def test_every_key_falls_in_one_arc_whose_owners_are_its_owners():
    ring = Ring(["a", "b", "c"], points=16)
    arcs = ring.ranges()
    assert len(arcs) == 48  # 16 points for each of three members
    for key in KEYS[:2000]:
        point = ring.hash(key)
        containing = [arc for arc in arcs if Ring.in_arc(point, arc)]
        assert len(containing) == 1
        assert ring.arc_owners(containing[0], 2) == ring.owners(key, 2)


def test_the_checksum_depends_on_the_members_only():
    assert Ring(["a", "b", "c"]).checksum == Ring(["c", "a", "b", "a"]).checksum == checksum(["b", "c", "a"])
    assert Ring(["a", "b"]).checksum != Ring(["a", "b", "c"]).checksum


def test_the_hash_is_a_parameter():
    ring = Ring(["a", "b"], points=1, hash=lambda text: {"a#0": 100, "b#0": 200}[text] if "#" in text else int(text))
    assert ring.owners("150", 1) == ["b"] and ring.owners("250", 2) == ["a", "b"] and ring.owners("50", 1) == ["a"]


def test_points_per_member_trade_balance_for_size():
    spread = {}
    for points in (8, 128):
        ring = Ring(["a", "b", "c", "d"], points=points)
        counts = collections.Counter(ring.owners(k, 1)[0] for k in SOME)
        spread[points] = statistics.pstdev(counts.values()) / statistics.mean(counts.values())
    assert spread[128] < spread[8]
