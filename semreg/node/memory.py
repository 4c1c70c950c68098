"""The node's memory kept out of the way of requests, as a service (`semreg.heap`, `semreg.malloc`).

Started once the registry is restored, it freezes what the start-up made (the collector never walks it again)
and gives what was freed back to the system, then again every `RELEASE_EVERY_S`, on a worker thread: under churn
the arenas of the node's threads kept it, and the process grew with no plateau. Meanwhile the heap is settled
after every change of the hierarchy (`settle`), and what registrations make is noted (`note_made`, `note`), so
that the collector freezes it as it piles up.
"""
from __future__ import annotations

import asyncio
from collections.abc import Iterable

from semreg import heap, malloc
from semreg.clock import Clock
from semreg.node.services import Every
from semreg.registry.registry import Change

RELEASE_EVERY_S = 60.0  # how often freed memory goes back to the system


class Memory:
    name = "memory"

    def __init__(self, clock: Clock, *, needs: Iterable[str] = ()) -> None:
        self.needs = tuple(needs)
        self.heap = heap.HeapSettler()
        self._releases = Every("memory release", RELEASE_EVERY_S, self.release_soon, clock)

    async def start(self) -> None:
        heap.freeze()
        self.heap.settled()
        self.release_soon()
        await self._releases.start()

    async def stop(self) -> None:
        await self._releases.stop()

    def waiting(self) -> str:
        return ""

    def settle(self) -> None:
        """A full collection, the survivors frozen, and what it freed given back (after an upload)."""
        heap.settle()
        self.heap.settled()
        self.release_soon()

    def release_soon(self) -> None:
        """Freed memory back to the system on a worker thread (`malloc_trim` walks the whole heap)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on the node's loop (it has not started, or has ended)
            return
        loop.run_in_executor(None, malloc.release)

    def note(self, made: int) -> None:
        """`made` more objects that live on were made (an instance published, its tags)."""
        self.heap.note(made)

    def note_made(self, changes: list[Change]) -> None:
        """Registrations made or replaced here, copies taken from other members: their objects live on, and the
        collector is told, as the SPARQL replica's publishing tells it (`semreg.node.replica`). Without it, a node
        serving no SPARQL froze nothing after its start-up, and each full collection walked every instance
        registered since with Python's lock held: seconds at a few hundred thousand, every thread of the node
        standing still, a ring member's lease lapsing."""
        made = sum(len(c.tags) + 1 for c in changes if c.membership and not c.removed)
        if made:
            self.heap.note(made)
