"""Many blocking reads held at once, one connection each: the load of the watches scenario.

A `WatchCrowd` opens its reads a few hundred at a time and records when each answers (a `Wake`), so
the scenario can tell who woke on a write, and how fast.
"""
from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from semreg.bench.aio.connection import TRANSPORT_ERRORS, Connection, read_response
from semreg.http1.client import encode_request


@dataclass(frozen=True)
class Wake:
    group: int
    at: float  # time.perf_counter() when the whole response had arrived
    status: int
    index: int | None


class WatchCrowd:
    """Blocking reads, one connection each: `(group, request target)` pairs, opened `concurrency` at a time.

    Each read's answer is a `Wake` in `wakes`, in arrival order, with the index its `index_header` gave
    (semreg's own, or a Consul listener's `X-Consul-Index` when `url` is one); a connection that fails is
    an entry of `errors` (counted, first messages kept).
    """

    def __init__(self, url: str, watches: Sequence[tuple[int, str]], headers: Mapping[str, str] | None = None,
                 concurrency: int = 200, index_header: str = "x-semreg-index") -> None:
        self.url = url
        self.index_header = index_header.lower()
        self.watches = list(watches)
        self.headers = dict(headers or {})
        self.concurrency = concurrency
        self.sent = 0
        self.wakes: list[Wake] = []
        self.errors: Counter[str] = Counter()
        self._tasks: list[asyncio.Task] = []
        self.all_sent = 0.0  # perf_counter() when the last request was written

    @property
    def failed(self) -> int:
        return sum(self.errors.values())

    async def start(self) -> None:
        """Start every watch; returns at once (the connections open in the background)."""
        gate = asyncio.Semaphore(self.concurrency)
        self._tasks = [asyncio.get_running_loop().create_task(self._one(gate, group, target))
                       for group, target in self.watches]

    async def _one(self, gate: asyncio.Semaphore, group: int, target: str) -> None:
        conn = Connection(self.url, self.headers)
        try:
            async with gate:
                conn.reader, conn.writer = await asyncio.open_connection(conn.host, conn.port, limit=1 << 22)
                conn.writer.write(encode_request("GET", target, conn.authority, None, conn.headers))
                await conn.writer.drain()
                self.sent += 1
                if self.sent == len(self.watches):
                    self.all_sent = time.perf_counter()
            response = await read_response(conn.reader)
            index = response.headers.get(self.index_header)
            self.wakes.append(Wake(group, time.perf_counter(), response.status,
                                   int(index) if index and index.isdigit() else None))
        except TRANSPORT_ERRORS as exc:
            self.errors[f"{type(exc).__name__}: {exc}"[:200]] += 1
        finally:
            conn.close()

    async def aclose(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
