"""A hand-off pass lets go of the copies this node no longer owns once their owners hold them, and only those
still at the revision the owners were found to hold: a copy written here while the pass was under way (an
admin status this node decided, back from a pause and off the ring in its own view) is kept, and the next pass
hands it on. Real shards on in-memory pyoxigraph stores, fake clock; the owners are reached in process."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from semreg.clock import FakeClock
from semreg.cluster.antientropy import AntiEntropy
from semreg.cluster.ring import Ring
from semreg.registry.instances import Registration
from semreg.registry.local_shard import LocalShard
from semreg.storage.store import Store


def shard(clock: FakeClock, name: str) -> LocalShard:
    async def write(fn: Any, *args: Any) -> Any:
        return fn(*args)

    return LocalShard(clock, Store(None), write, lambda fn, *args: fn(*args), node_id=name)


class Meanwhile:
    """An owner, as this node's pass reaches it: before it answers the pass's first question (the digests of
    the arcs compared), `then` runs (on this node: something written while the pass is under way)."""

    def __init__(self, owner: LocalShard, then: Any) -> None:
        self.owner = owner
        self.then = then

    def __getattr__(self, name: str) -> Any:
        return getattr(self.owner, name)

    async def digests(self, ring: Any, arcs: list[int]) -> Any:
        if self.then is not None:
            then, self.then = self.then, None
            await then()
        return await self.owner.digests(ring, arcs)


def test_a_copy_written_during_a_pass_is_handed_on_not_let_go() -> None:
    async def scenario() -> None:
        clock = FakeClock()
        here, n2, n3 = shard(clock, "n1"), shard(clock, "n2"), shard(clock, "n3")
        reg = Registration(id="a", service="svc", address="10.0.0.1", port=80, ttl_s=0.0)
        revision = here.revisions.next()
        for owner in (here, n2, n3):  # held alike everywhere; this node is no owner on the ring now
            await owner.put_records([(reg, revision)])

        async def drained() -> None:
            assert (await here.heartbeat("a", None, "draining", here.revisions.next())).admin_status == "draining"
        ring = Ring(["n2", "n3"])
        placement = SimpleNamespace(node_id="n1", replicas=2, ring=ring, failed=lambda member: None,
                                    peers={"n2": Meanwhile(n2, drained), "n3": n3})
        anti_entropy = AntiEntropy(placement=placement, local=here, removals=here.removals,  # type: ignore[arg-type]
                                   clock=clock, degraded=lambda: False, stopping=lambda: False)
        await anti_entropy.sync(ring)
        assert here.held("a") is not None and here.held("a").admin_status == "draining"  # kept: written since
        assert anti_entropy.dropped == 0
        await anti_entropy.sync(ring)  # the next pass hands it on, then lets it go
        assert [owner.held("a").admin_status for owner in (n2, n3)] == ["draining", "draining"]
        assert here.held("a") is None and anti_entropy.dropped == 1

    asyncio.run(scenario())
