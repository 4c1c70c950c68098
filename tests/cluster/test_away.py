"""A node back after longer than removals are remembered forgets its copies before it is on the ring again:
some may be of instances removed meanwhile, whose tombstones the others no longer hold. A node back sooner
keeps them (the others' tombstones then decide). Real shard on an in-memory pyoxigraph store, fake clock."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from support.shards import put, remove

from semreg.clock import FakeClock
from semreg.cluster.antientropy import AntiEntropy
from semreg.registry.instances import Registration
from semreg.registry.local_shard import LocalShard
from semreg.registry.removals import TOMBSTONE_KEEP_S
from semreg.storage.store import Store


def node() -> tuple[FakeClock, LocalShard, AntiEntropy]:
    clock = FakeClock()

    async def write(fn: Any, *args: Any) -> Any:
        return fn(*args)

    shard = LocalShard(clock, Store(None), write, lambda fn, *args: fn(*args), node_id="n1")
    placement = SimpleNamespace(node_id="n1", replicas=2)
    return clock, shard, AntiEntropy(placement=placement, local=shard, removals=shard.removals,  # type: ignore[arg-type]
                                     clock=clock, degraded=lambda: False, stopping=lambda: False)


def reg(iid: str) -> Registration:
    return Registration(id=iid, service="svc", address="10.0.0.1", port=80, ttl_s=0.0)


def test_a_node_away_longer_than_the_tombstones_forgets_its_copies() -> None:
    async def scenario() -> None:
        clock, shard, anti_entropy = node()
        await put(shard, [reg("kept"), reg("gone")])
        await remove(shard, "gone")
        shard.on_ring()
        assert await anti_entropy.forget_if_away() == 0  # just seen on the ring
        clock.advance(TOMBSTONE_KEEP_S - 60)
        assert await anti_entropy.forget_if_away() == 0 and set(await shard.inventory()) == {"kept", "gone"}
        clock.advance(120)
        assert await anti_entropy.forget_if_away() == 2
        assert await shard.inventory() == {} and shard.store.load_records() == []

    asyncio.run(scenario())


def test_a_node_never_on_a_ring_keeps_what_it_holds() -> None:
    async def scenario() -> None:
        clock, shard, anti_entropy = node()
        await put(shard, [reg("a")])
        clock.advance(10 * TOMBSTONE_KEEP_S)
        assert await anti_entropy.forget_if_away() == 0 and set(await shard.inventory()) == {"a"}

    asyncio.run(scenario())
