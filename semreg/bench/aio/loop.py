"""The event loop the bench's own load runs on, in a daemon thread, and a bounded gather.

`LoopThread` lets a scenario stay a plain function: it hands coroutines to the loop (`run` waits for
the result, `spawn` does not) and can run wrk meanwhile. uvloop is used when it is installed.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Awaitable, Coroutine, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class LoopThread:
    """An event loop in a daemon thread: `run(coro)` waits for a result, `spawn(coro)` does not."""

    def __init__(self, name: str = "semreg-bench-aio") -> None:
        self.loop = _new_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def __enter__(self) -> LoopThread:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def spawn(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        return self.spawn(coro).result(timeout_s)

    def call(self, fn, *args) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def close(self) -> None:
        """Cancel what still runs, stop the loop, join the thread."""
        if not self._thread.is_alive():
            return

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            self.run(cancel_all(), 30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
        if not self._thread.is_alive():
            self.loop.close()


async def gather_limited(coros: Sequence[Awaitable[T]], limit: int) -> list[T]:
    """Await `coros` at most `limit` at a time; results in order."""
    gate = asyncio.Semaphore(limit)

    async def one(coro: Awaitable[T]) -> T:
        async with gate:
            return await coro

    return await asyncio.gather(*(one(c) for c in coros))
