"""Status changes on their way to the other owners (`semreg.cluster.statuses`): a member takes a state only at
the revision its copy holds, so every state must reach it after the record it was made at, even when the
status changes again while an earlier hand-over is still on its way. The ring and the shard here are the
smallest stand-ins that answer what `Statuses` asks; the peer records what it was sent, in order."""
from __future__ import annotations

import asyncio
from typing import Any

from semreg.cluster.ring import Ring
from semreg.cluster.statuses import Statuses
from semreg.registry.registry import STATUS, Change


class Placement:
    """Two members, `here` running every lease, `there` holding the other copy."""

    def __init__(self, peer: Peer) -> None:
        self.node_id, self.replicas = "here", 2
        self.ring = Ring(["here", "there"])
        self.peers = {"there": peer}
        self.failures: list[str] = []

    def is_primary(self, instance_id: str) -> bool:
        return True

    def failed(self, member: str) -> None:
        self.failures.append(member)


class Local:
    """This node's shard: each instance's admin status, at the revision it was written down at."""

    def __init__(self) -> None:
        self.held: dict[str, tuple[int, str]] = {}

    def state(self, instance_id: str) -> tuple[str, int, int, str, bool, bool]:
        revision, status = self.held[instance_id]
        return (instance_id, revision, revision, status, False, True)

    async def export(self, ids: dict[str, None]) -> list[tuple[dict[str, Any], int]]:
        return [({"id": iid, "admin_status": self.held[iid][1]}, self.held[iid][0]) for iid in ids]


class Peer:
    """The other owner: what it was sent, in order; its first hand-over waits until the test lets it go."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, int]] = []  # (what, id, revision)
        self.first_hand_over = asyncio.Event()
        self.holding = asyncio.Event()

    async def restore_records(self, items: list[tuple[dict[str, Any], int]]) -> int:
        if not self.holding.is_set():
            self.holding.set()
            await self.first_hand_over.wait()
        self.sent += [("record", rec["id"], revision) for rec, revision in items]
        return len(items)

    async def apply_states(self, states: list[tuple[str, int, int, str, bool, bool]]) -> int:
        self.sent += [("state", iid, revision) for iid, revision, *_ in states]
        return len(states)


def change(iid: str, revision: int) -> Change:
    return Change(iid, STATUS, revision, "draining", True, frozenset(), frozenset({"svc"}), frozenset({""}))


def test_a_state_never_reaches_a_member_before_the_record_it_was_made_at() -> None:
    asyncio.run(asyncio.wait_for(a_state_after_its_record(), 10))


async def a_state_after_its_record() -> None:
    peer, local = Peer(), Local()
    statuses = Statuses(placement=Placement(peer), local=local)  # type: ignore[arg-type]
    local.held["a"] = (10, "draining")
    statuses.local_changes([change("a", 10)])
    await peer.holding.wait()  # the first hand-over is on its way...
    local.held["a"] = (11, "up")  # ...when maintenance ends, and another instance drains
    local.held["b"] = (12, "draining")
    statuses.local_changes([change("a", 11), change("b", 12)])
    peer.first_hand_over.set()
    await asyncio.gather(*statuses.tasks())
    assert peer.sent == [("record", "a", 10), ("state", "a", 10),
                         ("record", "a", 11), ("record", "b", 12), ("state", "a", 11), ("state", "b", 12)]
    assert all(t.done() for t in statuses.tasks()) and placement_failures(statuses) == []


def placement_failures(statuses: Statuses) -> list[str]:
    return statuses.placement.failures  # type: ignore[attr-defined]
