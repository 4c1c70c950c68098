"""This node's registry as a service: its shard (`semreg.registry.local_shard`) and the coordinator over the
shards (`semreg.registry.coordinator`).

Started, the shard restores the instances from the records (or the snapshot a clean stop kept), with the
collector paused and what it made frozen, then runs the lease timer and the checks. A stop asked meanwhile gives
the restore up at the next look (`StopAsked`): the records stay as they were. Stopped, the sends of acknowledged
writes still on their way are called off (their members get hints), the timer and the checks end, and a node
alone with a data directory keeps its registry for the next start-up (`restore.keep`), once its restore was whole.

`TRIM_EVERY_S`: how often a node alone forgets tombstones past their keep (`tombstones`; in a ring, hand-off
passes do): under steady churn they piled up in memory and in the records until a restart.
"""
from __future__ import annotations

import threading
from collections.abc import Callable

from semreg import heap
from semreg.clock import Clock
from semreg.errors import StopAsked
from semreg.node.services import Every
from semreg.node.writer import StoreWriter
from semreg.registry.coordinator import Coordinator
from semreg.registry.local_shard import LocalShard

TRIM_EVERY_S = 600.0


class RegistryService:
    name = "registry"

    def __init__(self, shard: LocalShard, coordinator: Coordinator, writer: StoreWriter, *,
                 stop_asked: threading.Event, post: Callable[[Callable[[], None]], None], keep_at_stop: bool,
                 needs: tuple[str, ...]) -> None:
        """`post(fn)`: `fn` run on the node's loop from another thread (the checks' reports). `keep_at_stop`: the
        registry kept for the next start-up at a clean stop (a node alone with a data directory)."""
        self.shard = shard
        self.coordinator = coordinator
        self.needs = needs
        self._writer = writer
        self._stop_asked = stop_asked
        self._post = post
        self._keep_at_stop = keep_at_stop
        self.instances = 0  # restored at the start
        self.restored = False

    async def start(self) -> None:
        await self._writer.warmed()
        if self._stop_asked.is_set():
            raise StopAsked("before the instance records were read")
        with heap.paused():  # a million restored objects, all kept and acyclic: frozen, never walked
            self.instances = await self.shard.open(self._post, self._stop_asked.is_set)
            # before the collector is back on: its first collection after a pause this long was a full one,
            # which walked every restored object for nothing (~3.5 s of the start-up at a million)
            heap.freeze()
        self.restored = True

    async def stop(self) -> None:
        await self.coordinator.close()
        await self.shard.close()
        if self.restored and self._keep_at_stop:
            await self.shard.keep()  # the last write: the next start-up reads it instead of the records

    def waiting(self) -> str:
        return ""


def tombstone_trim(shard: LocalShard, clock: Clock) -> Every:
    """A node alone forgets the tombstones past their keep every `TRIM_EVERY_S`."""
    return Every("tombstones", TRIM_EVERY_S, shard.forget_tombstones, clock, needs=("registry",))
