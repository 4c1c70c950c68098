"""Heartbeats on a schedule: the load of the heartbeat-load scenario.

`heartbeat_due` is the schedule (pure): every instance once a period, the period's heartbeats spread
evenly. A `Heartbeater` keeps to it over a few keep-alive connections and counts what came back
(`HeartbeatStats`), including how late each heartbeat left and, when asked, when each was answered and
whether it came after the lease its instance's previous answer gave had run out.
"""
from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import orjson

from semreg.bench.aio.connection import TRANSPORT_ERRORS, Connection


def heartbeat_due(k: int, instances: int, period_s: float) -> tuple[float, int]:
    """The k-th heartbeat of the run: (seconds after the start it is due, instance index).

    Every instance beats once a period, instance i at offset i·period/n in it, so the n heartbeats
    of a period are spread evenly (n/period a second) and each instance's are exactly a period apart.
    """
    rounds, index = divmod(k, instances)
    return rounds * period_s + index * period_s / instances, index


@dataclass
class HeartbeatStats:
    ok: int = 0
    failed: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    lateness_s: list[float] = field(default_factory=list)  # send time minus due time, per heartbeat
    critical_answers: int = 0  # heartbeats sent after the lease their instance's previous answer gave had lapsed
    lapsed: set[int] = field(default_factory=set)  # the indexes of the instances those heartbeats were for
    # with `answers`: (due, sent, answered, status) of every heartbeat sent, perf_counter times, status 0 when
    # the connection failed
    beats: list[tuple[float, float, float, int]] = field(default_factory=list)


def lease_end(body: bytes) -> float | None:
    """The `expires_at` of a heartbeat's answer as epoch seconds, or None when it has none."""
    try:
        at = orjson.loads(body).get("expires_at")
        return dt.datetime.fromisoformat(at).timestamp() if isinstance(at, str) else None
    except (ValueError, AttributeError):
        return None


class Heartbeater:
    """`PUT /v1/instances/{id}/heartbeat` for every id once a period, spread evenly (`heartbeat_due`),
    over `connections` keep-alive connections. A heartbeat is sent at its due time or, when every
    connection is busy, as soon as one is free; its lateness is recorded. With `answers`, so are its
    times and the leases that lapsed between two heartbeats of an instance (`critical_answers`)."""

    def __init__(self, url: str, ids: Sequence[str], period_s: float, connections: int = 16,
                 headers: Mapping[str, str] | None = None, answers: bool = False) -> None:
        self.url = url
        self.ids = list(ids)
        self.period_s = period_s
        self.connections = connections
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        self.stats = HeartbeatStats()
        self.answers = answers
        self._lease_ends: dict[int, float] = {}  # instance index → epoch seconds its last answer's lease ends
        self.scheduled = 0
        self._stopping = False
        self.started = 0.0

    def stop(self) -> None:
        """From any thread: no more heartbeats are scheduled; the ones queued are still sent."""
        self._stopping = True

    async def run(self) -> HeartbeatStats:
        self._stopping = False
        queue: asyncio.Queue[tuple[int, float] | None] = asyncio.Queue()
        workers = [asyncio.get_running_loop().create_task(self._worker(queue)) for _ in range(self.connections)]
        self.started = start = time.perf_counter()
        k = 0
        try:
            while not self._stopping:
                now = time.perf_counter()
                while True:
                    due, index = heartbeat_due(k, len(self.ids), self.period_s)
                    if start + due > now:
                        break
                    queue.put_nowait((index, start + due))
                    k += 1
                    self.scheduled = k
                await asyncio.sleep(min(0.05, max(0.002, start + due - now)))  # ≥ 2 ms: a few due at once
        finally:
            for _ in workers:
                queue.put_nowait(None)
            await asyncio.gather(*workers, return_exceptions=True)
        return self.stats

    async def _worker(self, queue: asyncio.Queue) -> None:
        conn = Connection(self.url, self.headers)
        n = 0
        try:
            while (item := await queue.get()) is not None:
                index, due = item
                sent = time.perf_counter()
                self.stats.lateness_s.append(sent - due)
                if self.answers and time.time() > self._lease_ends.get(index, float("inf")):
                    self.stats.critical_answers += 1
                    self.stats.lapsed.add(index)
                n += 1
                body = b'{"load": %d}' % (n % 10)
                try:
                    response = await conn.request("PUT", f"/v1/instances/{self.ids[index]}/heartbeat", body)
                except TRANSPORT_ERRORS as exc:
                    if self.answers:
                        self.stats.beats.append((due, sent, time.perf_counter(), 0))
                    self.stats.failed += 1
                    self.stats.errors[f"{type(exc).__name__}: {exc}"[:200]] += 1
                    continue
                self.stats.statuses[str(response.status)] += 1
                if self.answers:
                    self.stats.beats.append((due, sent, time.perf_counter(), response.status))
                if response.status == 200:
                    self.stats.ok += 1
                    if self.answers and (ends := lease_end(response.body)) is not None:
                        self._lease_ends[index] = ends
                else:
                    self.stats.failed += 1
                    self.stats.errors[f"HTTP {response.status}: {response.body[:200].decode(errors='replace')}"] += 1
        finally:
            conn.close()
