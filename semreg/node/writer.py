"""The store as a service: one writer thread on which every store operation runs, in submission order.

Started, it reads the store's tables into memory in the background (`semreg.storage.warm`: the records then come
from memory when the registry reads them) and drops the derived graphs an earlier version kept. Stopped (last:
everything else writes through it), it flushes the store and ends the thread.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from semreg.storage.store import Store
from semreg.storage.warm import warm

log = logging.getLogger("semreg.node")


class StoreWriter:
    name = "store"
    needs: tuple[str, ...] = ()

    def __init__(self, store: Store) -> None:
        self.store = store
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="semreg-store")
        self._submitted = self._completed = 0
        self._warming: asyncio.Future[int] | None = None
        store.foreground = self.writing

    async def start(self) -> None:
        if self.store.path is not None:
            self._warming = asyncio.ensure_future(asyncio.to_thread(warm, self.store.path))
        dropped = await self.write(self.store.drop_derived_graphs)
        if dropped:
            log.info("dropped derived graphs an earlier version kept on disk", extra={"graphs": dropped})

    async def warmed(self) -> None:
        """Once the store's tables were read (at once for a store in memory)."""
        if self._warming is not None:
            await self._warming

    async def stop(self) -> None:
        await self.write(self.store.flush)
        self._thread.shutdown(wait=True)

    def waiting(self) -> str:
        return ""

    async def write(self, fn: Callable, *args: Any) -> Any:
        """Run a store operation on the writer thread, in submission order."""
        self._submitted += 1
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._counted, fn, args)

    def submit(self, fn: Callable, *args: Any) -> None:
        """The same, for a write nobody waits for (still in order with the others)."""
        self._submitted += 1
        self._thread.submit(self._counted, fn, args).add_done_callback(_log_failure)

    def _counted(self, fn: Callable, args: tuple) -> Any:
        try:
            return fn(*args)
        finally:
            self._completed += 1  # on the writer thread only; `_submitted` on the event loop only

    def writing(self) -> bool:
        """Whether a store operation is queued or running (the data directory's RDF waits for none)."""
        return self._submitted > self._completed


def _log_failure(future: Future) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("a store write nobody waited for failed", exc_info=future.exception())
