"""What a shard holds, as revisions, for anti-entropy: asked for some ids it answers for those alone, and a
pass over the whole of it (seconds at a million records) runs beside the event loop, never on it, so the
membership lease's keep-alive and the requests go on. Real shard on an in-memory pyoxigraph store."""
from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from support.shards import put, remove

from semreg.clock import FakeClock
from semreg.cluster.antientropy import AntiEntropy
from semreg.cluster.ring import Ring
from semreg.registry import inventory
from semreg.registry.instances import Registration
from semreg.registry.local_shard import LocalShard
from semreg.storage.store import Store

IDS = st.text("abcdef", min_size=1, max_size=3)


@given(live=st.dictionaries(IDS, st.integers(1, 10**6)), removed=st.dictionaries(IDS, st.integers(1, 10**6)),
       asked=st.lists(IDS))
def test_the_revisions_of_some_ids_are_the_whole_inventorys_for_them(live: dict[str, int], removed: dict[str, int],
                                                                      asked: list[str]) -> None:
    instances = {iid: SimpleNamespace(revision=rev) for iid, rev in live.items()}
    tombstones = {iid: (rev, 0.0) for iid, rev in removed.items() if iid not in live}
    whole = inventory.of(instances, tombstones)
    assert whole == {**{iid: rev for iid, rev in live.items()}, **{iid: -t[0] for iid, t in tombstones.items()}}
    assert inventory.of(instances, tombstones, asked) == {iid: whole[iid] for iid in asked if iid in whole}
    assert asyncio.run(inventory.whole(instances, tombstones)) == whole


class PlanningRing(Ring):
    """A ring whose first lookup of owners waits for the event loop to say it still turns."""

    def __init__(self) -> None:
        super().__init__(["n1", "n2", "n3"])
        self.planning, self.loop_turned = threading.Event(), threading.Event()

    def owners(self, key: str, k: int) -> list[str]:
        self.planning.set()
        assert self.loop_turned.wait(10), "the event loop did not turn while a pass planned"
        return super().owners(key, k)


def test_a_pass_plans_over_what_is_held_while_the_event_loop_goes_on() -> None:
    async def scenario() -> None:
        async def write(fn: Any, *args: Any) -> Any:
            return fn(*args)

        shard = LocalShard(FakeClock(), Store(None), write, lambda fn, *args: fn(*args), node_id="n1")
        await put(shard, [Registration(id=f"i{n}", service="svc", address="10.0.0.1", port=80, ttl_s=0.0)
                          for n in range(50)])
        await remove(shard, "i7")
        ring = PlanningRing()
        placement = SimpleNamespace(node_id="n1", replicas=2, ring=ring, peers={})
        anti_entropy = AntiEntropy(placement=placement, local=shard, removals=shard.removals,  # type: ignore[arg-type]
                                   clock=shard.clock, degraded=lambda: False, stopping=lambda: False)
        passing = asyncio.create_task(anti_entropy.sync(ring))
        assert await asyncio.to_thread(ring.planning.wait, 10)
        ring.loop_turned.set()  # this line runs on the loop while the pass plans
        assert await passing is False  # no peer answered: the pass is incomplete, and nothing was dropped
        held = await shard.inventory()
        assert len(held) == 50 and held["i7"] < 0

    asyncio.run(scenario())
