"""What the noisy-neighbour scenarios watch while the adversary runs, each on connections of its own:
`/healthz` every few milliseconds, blocking reads re-armed after each answer, writes at known times that
should wake some of them, `/v1/cluster` of a ring's members, and the bench's own event loop (how late its
timers fire, so a late heartbeat is told apart from a slow server).

Every probe runs until cancelled and appends (perf_counter, ...) rows to a list it is given; what the rows
mean is summarised by `semreg.bench.scenarios.noisy_figures`.
"""
from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import orjson

from semreg.bench.aio.connection import TRANSPORT_ERRORS, Connection

Write = tuple[str, str, bytes | None]  # method, target, body


async def _paced(every_s: float, turn: Callable[[int], Awaitable[None]]) -> None:
    """`await turn(k)` at start + k·every_s; turns missed while one ran long are skipped, not burst."""
    start = time.perf_counter()
    k = 0
    while True:
        late = time.perf_counter() - (start + k * every_s)
        if late < 0:
            await asyncio.sleep(-late)
        else:
            k += int(late // every_s)
        await turn(k)
        k += 1


async def probe_health(url: str, every_s: float, into: list[tuple[float, float, int]],
                       headers: Mapping[str, str] | None = None, path: str = "/healthz") -> None:
    """GET `path` every `every_s` on one connection: (sent, answered, status) rows, status 0 on a transport error."""
    conn = Connection(url, headers)

    async def turn(_k: int) -> None:
        sent = time.perf_counter()
        try:
            response = await conn.request("GET", path)
            status = response.status
        except TRANSPORT_ERRORS:
            status = 0
        into.append((sent, time.perf_counter(), status))

    try:
        await _paced(every_s, turn)
    finally:
        conn.close()


async def loop_lag(every_s: float, into: list[tuple[float, float]]) -> None:
    """How late this event loop wakes a timer of `every_s`: (when, seconds late) rows."""
    while True:
        asked = time.perf_counter()
        await asyncio.sleep(every_s)
        now = time.perf_counter()
        into.append((now, max(0.0, now - asked - every_s)))


@dataclass
class WatchLog:
    """What one blocking read saw: answers that came before its wait ended (wakes), the rest, and errors."""

    group: int
    armed_at: float | None = None  # when its first answer (the index to wait on) came
    wakes: list[float] = field(default_factory=list)
    timeouts: int = 0
    errors: Counter[str] = field(default_factory=Counter)


async def rearmed_watch(url: str, target: str, wait_s: int, log: WatchLog,
                        headers: Mapping[str, str] | None = None) -> None:
    """GET `target` for its index, then block on it (`&index=N&wait=`) again after every answer, until
    cancelled. An answer before the wait's end is a wake; a failed request, or an answer without an index,
    is retried a second later at the same index."""
    conn = Connection(url, headers)
    sep = "&" if "?" in target else "?"
    index: str | None = None
    try:
        while True:
            asked = f"{target}{sep}index={index}&wait={wait_s}s" if index else target
            sent = time.perf_counter()
            try:
                response = await conn.request("GET", asked)
            except TRANSPORT_ERRORS as exc:
                log.errors[type(exc).__name__] += 1
                await asyncio.sleep(1.0)
                continue
            now = time.perf_counter()
            answered = response.headers.get("x-semreg-index")
            if response.status != 200 or not answered:
                log.errors[f"HTTP {response.status}" if response.status != 200 else "no X-Semreg-Index"] += 1
                await asyncio.sleep(1.0)
                continue
            if index is None:
                log.armed_at = now
            elif now - sent < wait_s - 1.0:
                log.wakes.append(now)
            else:
                log.timeouts += 1
            index = answered
    finally:
        conn.close()


@dataclass
class WriteLog:
    """The writes made at known times, per group: (sent, answered, acknowledged) of each, `acknowledged` False
    for one refused or cut (it may still have changed the answer: a ring member may hold a write it refused)."""

    writes: dict[int, list[tuple[float, float, bool]]] = field(default_factory=dict)
    latencies_s: list[tuple[float, float]] = field(default_factory=list)  # (sent, seconds to the answer)
    errors: Counter[str] = field(default_factory=Counter)


async def write_at_known_times(url: str, groups: list[int], every_s: float, flip: Callable[[int, bool], Write],
                               log: WriteLog, headers: Mapping[str, str] | None = None) -> None:
    """Every `every_s` one write to the next group in turn: `flip(group, present)` says what to send to make
    the group's answer change (present: whether the group's changing instance is registered now). A refused
    write is sent again at the group's next turn; a removal answered 404 found it absent."""
    conn = Connection(url, {"Content-Type": "application/json", **(headers or {})})
    present: dict[int, bool] = {}

    async def turn(k: int) -> None:
        group = groups[k % len(groups)]
        method, target, body = flip(group, present.get(group, False))
        sent = time.perf_counter()
        try:
            response = await conn.request(method, target, body)
        except TRANSPORT_ERRORS as exc:
            log.errors[type(exc).__name__] += 1
            log.writes.setdefault(group, []).append((sent, time.perf_counter(), False))
            return
        acked = time.perf_counter()
        log.latencies_s.append((sent, acked - sent))
        ok = response.status // 100 == 2
        log.writes.setdefault(group, []).append((sent, acked, ok))
        if not ok:
            log.errors[f"HTTP {response.status}: {response.body[:100].decode(errors='replace')}"] += 1
        if ok or (method == "DELETE" and response.status == 404):
            present[group] = not present.get(group, False)

    try:
        await _paced(every_s, turn)
    finally:
        conn.close()


async def sample_cluster(url: str, name: str, every_s: float, into: list[tuple[float, str, dict[str, str], str]],
                         headers: Mapping[str, str] | None = None) -> None:
    """GET /v1/cluster of one member every `every_s`: (when, member, {member id: status}, ring checksum) rows."""
    conn = Connection(url, headers)

    async def turn(_k: int) -> None:
        try:
            response = await conn.request("GET", "/v1/cluster")
            view = orjson.loads(response.body) if response.status == 200 else None
        except (*TRANSPORT_ERRORS, orjson.JSONDecodeError):
            view = None
        if isinstance(view, dict):
            statuses = {str(m.get("id")): str(m.get("status")) for m in view.get("members", []) if isinstance(m, dict)}
            into.append((time.perf_counter(), name, statuses, str(view.get("checksum"))))

    try:
        await _paced(every_s, turn)
    finally:
        conn.close()
