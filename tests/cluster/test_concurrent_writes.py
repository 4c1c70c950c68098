"""Two writes of one instance through two members at the same moment: every owner ends with the same copy.

Each write takes a revision on the member it reached, and each owner keeps the newer. Revisions end in the
maker's slot, and no two live members hold one slot (`semreg.cluster.slots`): the two writes never get one
revision, so one is newer everywhere. The two members here hash to the same slot, which before slots were
claimed gave both writes one revision: each owner kept the copy it got first, and with equal revisions
every digest agreed, so anti-entropy never repaired the difference.

A ring of two apps in this process (`support.inprocess_ring`), k=2, its clock standing still (one microsecond).
"""
from __future__ import annotations

import concurrent.futures
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.inprocess_ring import InProcessRing, RingNode
from support.server import wait_for

from semreg.registry.revisions import hashed_slot


def body(iid: str, port: int) -> dict[str, Any]:
    return {"id": iid, "service": "svc", "address": "127.0.0.1", "port": port, "tags": [], "ttl": 0}


def alike() -> str:
    """An id whose hashed slot is `a`'s."""
    return next(f"n{i}" for i in range(1_000_000) if hashed_slot(f"n{i}") == hashed_slot("a"))


@pytest.fixture
def two(tmp_path: Path) -> Iterator[InProcessRing]:
    ring = InProcessRing(tmp_path / "ring", replicas=2)
    try:
        ring.add("a")
        ring.add(alike())
        assert ring.converged()
        yield ring
    finally:
        ring.close()


def copies(ring: InProcessRing, iid: str) -> dict[str, tuple[int, int]]:
    """Each member's copy of `iid`: (revision, port)."""
    def read(node: RingNode) -> tuple[int, int]:
        inst = node.node.shard.registry.instances[iid]
        return inst.revision, inst.reg.port
    return {name: ring.call(lambda node=node: read(node)) for name, node in ring.nodes.items()}


def test_two_members_hold_different_slots_and_the_same_moment_gives_two_revisions(two: InProcessRing) -> None:
    slots = {name: node.cluster.membership.slot for name, node in two.nodes.items()}
    assert len(set(slots.values())) == 2 and slots["a"] == hashed_slot("a")
    minted = {two.call(lambda node=node: node.node.shard.revisions.next()) for node in two.nodes.values()}
    assert len(minted) == 2


@pytest.mark.parametrize("rounds", [1, 5])
def test_concurrent_writes_of_one_instance_through_two_members_leave_one_copy_everywhere(
        two: InProcessRing, rounds: int) -> None:
    a, b = two.nodes.values()
    for n in range(rounds):
        iid = f"contended-{n}"
        pending = [two.start(a.http.put(f"/v1/instances/{iid}", json=body(iid, 1000 + n))),
                   two.start(b.http.put(f"/v1/instances/{iid}", json=body(iid, 2000 + n)))]
        concurrent.futures.wait(pending, timeout=30)
        assert all(p.result().status_code in (200, 201) for p in pending)  # both acknowledged
        two.settle()
        for node in two.nodes.values():
            two.call(node.cluster.anti_entropy.wanted)
        wait_for(lambda iid=iid: len(set(copies(two, iid).values())) == 1, 20,
                 f"every owner holding one copy of {iid}")
        held = copies(two, iid)
        assert len({revision for revision, _ in held.values()}) == 1
        answered = {name: node.get(f"/v1/instances/{iid}").json()["port"] for name, node in two.nodes.items()}
        assert len(set(answered.values())) == 1 and set(answered.values()) <= {1000 + n, 2000 + n}
