"""After a ring change a shard runs the leases and checks of the instances it is now the first live owner
of: at once on a small shard, in a worker thread past `primaries.AT_ONCE` records, the event loop going
on meanwhile, a newer ring change superseding an older one still being decided. Real shard on an
in-memory pyoxigraph store, fake clock."""
from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from support.shards import put

from semreg.clock import FakeClock
from semreg.registry import primaries
from semreg.registry.instances import Registration
from semreg.registry.local_shard import LocalShard
from semreg.storage.store import Store


async def shard_of(n: int) -> LocalShard:
    async def write(fn: Any, *args: Any) -> Any:
        return fn(*args)

    shard = LocalShard(FakeClock(), Store(None), write, lambda fn, *args: fn(*args), node_id="n1")
    await put(shard, [Registration(id=f"i{k}", service="svc", address="10.0.0.1", port=80, ttl_s=30.0)
                      for k in range(n)])
    return shard


def leased(shard: LocalShard) -> set[str]:
    return {iid for iid, inst in shard.registry.instances.items() if inst.leased}


def even(iid: str) -> bool:
    return int(iid[1:]) % 2 == 0


def test_a_small_shard_moves_its_leases_at_once() -> None:
    async def scenario() -> None:
        shard = await shard_of(10)
        shard.set_primary(even)
        assert leased(shard) == {f"i{k}" for k in range(0, 10, 2)}

    asyncio.run(scenario())


def test_a_large_shard_decides_beside_the_event_loop_and_the_newest_ring_change_wins(monkeypatch:
                                                                                      pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(primaries, "AT_ONCE", 10)

    async def scenario() -> None:
        shard = await shard_of(40)
        assert len(leased(shard)) == 40
        deciding, loop_turned = threading.Event(), threading.Event()

        def slow_even(iid: str) -> bool:
            deciding.set()
            assert loop_turned.wait(10), "the event loop did not turn while the leases were decided"
            return even(iid)

        shard.set_primary(slow_even)
        assert await asyncio.to_thread(deciding.wait, 10)
        loop_turned.set()  # this line runs on the loop while the decision is being made
        await shard.primaries_settled()
        assert leased(shard) == {f"i{k}" for k in range(0, 40, 2)}

        shard.set_primary(lambda iid: True)
        shard.set_primary(lambda iid: iid == "i3")  # before the one above was applied: it alone counts
        await shard.primaries_settled()
        assert leased(shard) == {"i3"}
        await shard.close()

    asyncio.run(scenario())
