"""Load the bench process generates itself, on asyncio: long polls, heartbeats, a health-check target.

wrk repeats one request; these scenarios need many connections that each wait (10,000 long polls),
a schedule (heartbeats spread evenly over their period) or a server (the target of active health
checks). Everything runs on one event loop in a daemon thread (`LoopThread`), so a scenario stays a
plain function that can run wrk meanwhile. HTTP goes over raw asyncio streams with a minimal
HTTP/1.1 client (`Connection`, framed by `semreg.http1.client`): httpx, and h11 too, cost more per request
and per connection than the bench process can spare at 10,000 connections or 1,000 requests a second
on a shared machine (the figures are in `semreg.http1.client`).

The pure parts: `heartbeat_due` (the schedule), `latency_stats` (nearest-rank percentiles),
`parse_metrics` (Prometheus text), `vmrss_bytes` (/proc/<pid>/status).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import re
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

from semreg.http1.client import encode_request, read_body, read_head

T = TypeVar("T")


# -- pure helpers ------------------------------------------------------------------------------------------
def raise_open_files_limit() -> tuple[int, int]:
    """Raise this process's soft limit on open files to the hard one; (soft, hard) after."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    return soft, hard


def open_files_limit() -> int:
    import resource

    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def vmrss_bytes(status_text: str) -> int | None:
    """The resident set size in bytes from the text of /proc/<pid>/status (`VmRSS:  370220 kB`)."""
    found = re.search(r"^VmRSS:\s+(\d+)\s*kB\s*$", status_text, re.MULTILINE)
    return int(found.group(1)) * 1024 if found else None


def process_rss_bytes(pid: int | None) -> int | None:
    """A process's resident set size, or None (no pid, not Linux, gone)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as status:
            return vmrss_bytes(status.read())
    except OSError:
        return None


def max_open_files(limits_text: str) -> int | None:
    """The soft `Max open files` from the text of /proc/<pid>/limits (None when unlimited or absent)."""
    found = re.search(r"^Max open files\s+(\d+)\s+", limits_text, re.MULTILINE)
    return int(found.group(1)) if found else None


def process_open_files_limit(pid: int | None) -> int | None:
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/limits") as limits:
            return max_open_files(limits.read())
    except OSError:
        return None


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text → {series as printed (`name{label="v"}`): value}; comments skipped."""
    series = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        try:
            series[name.strip()] = float(value)
        except ValueError:
            continue
    return series


def log_details(log_text: str, message: str, limit: int = 5) -> dict[str, int]:
    """In a semreg JSON log, the `detail` of the lines whose `msg` is `message`, most frequent first."""
    import json

    details: Counter[str] = Counter()
    for line in log_text.splitlines():
        if message not in line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("msg") == message:
            details[str(record.get("detail"))[:200]] += 1
    return dict(details.most_common(limit))


def heartbeat_due(k: int, instances: int, period_s: float) -> tuple[float, int]:
    """The k-th heartbeat of the run: (seconds after the start it is due, instance index).

    Every instance beats once a period, instance i at offset i·period/n in it, so the n heartbeats
    of a period are spread evenly (n/period a second) and each instance's are exactly a period apart.
    """
    rounds, index = divmod(k, instances)
    return rounds * period_s + index * period_s / instances, index


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ascending sequence (q in 0..100)."""
    if not ordered:
        raise ValueError("no samples")
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n·q/100), at least 1
    return ordered[min(len(ordered), int(rank)) - 1]


def latency_stats(samples_s: Sequence[float]) -> dict:
    """n, p50, p99, min and max of durations in seconds, as milliseconds; only n when there are none."""
    if not samples_s:
        return {"n": 0}
    ms = sorted(s * 1000.0 for s in samples_s)
    return {"n": len(ms), "p50_ms": round(percentile(ms, 50), 2), "p99_ms": round(percentile(ms, 99), 2),
            "min_ms": round(ms[0], 2), "max_ms": round(ms[-1], 2)}


# -- HTTP/1.1 (framed by semreg.http1.client) ------------------------------------------------------------------------
@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes
    keep_alive: bool


async def read_response(reader: asyncio.StreamReader) -> Response:
    head = await read_head(reader)
    body = await read_body(reader, head)
    assert body is not None  # None only past a limit, and there is none
    return Response(head.status, head.headers, body, head.keep_alive and not head.until_close)


class Connection:
    """One keep-alive connection; requests one after another."""

    def __init__(self, url: str, headers: Mapping[str, str] | None = None) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.authority = parts.netloc
        self.headers = dict(headers or {})
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, target: str, body: bytes | None = None,
                      headers: Mapping[str, str] | None = None) -> Response:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port, limit=1 << 22)
        assert self.reader is not None
        try:
            self.writer.write(encode_request(method, target, self.authority, body, {**self.headers, **(headers or {})}))
            response = await read_response(self.reader)
        except BaseException:
            self.close()
            raise
        if not response.keep_alive:
            self.close()
        return response

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


TRANSPORT_ERRORS = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError)


# -- the loop thread -----------------------------------------------------------------------------------------
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


# -- many long polls -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Wake:
    group: int
    at: float  # time.perf_counter() when the whole response had arrived
    status: int
    index: int | None


class WatchCrowd:
    """Blocking reads, one connection each: `(group, request target)` pairs, opened `concurrency` at a time.

    Each read's answer is a `Wake` in `wakes`, in arrival order; a connection that fails is an entry
    of `errors` (counted, first messages kept).
    """

    def __init__(self, url: str, watches: Sequence[tuple[int, str]], headers: Mapping[str, str] | None = None,
                 concurrency: int = 200) -> None:
        self.url = url
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
            index = response.headers.get("x-semreg-index")
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


# -- heartbeats on a schedule --------------------------------------------------------------------------------------
@dataclass
class HeartbeatStats:
    ok: int = 0
    failed: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    lateness_s: list[float] = field(default_factory=list)  # send time minus due time, per heartbeat
    critical_answers: int = 0  # heartbeats whose answer said the instance had been critical


class Heartbeater:
    """`PUT /v1/instances/{id}/heartbeat` for every id once a period, spread evenly (`heartbeat_due`),
    over `connections` keep-alive connections. A heartbeat is sent at its due time or, when every
    connection is busy, as soon as one is free; its lateness is recorded."""

    def __init__(self, url: str, ids: Sequence[str], period_s: float, connections: int = 16,
                 headers: Mapping[str, str] | None = None) -> None:
        self.url = url
        self.ids = list(ids)
        self.period_s = period_s
        self.connections = connections
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        self.stats = HeartbeatStats()
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
                self.stats.lateness_s.append(time.perf_counter() - due)
                n += 1
                body = b'{"load": %d}' % (n % 10)
                try:
                    response = await conn.request("PUT", f"/v1/instances/{self.ids[index]}/heartbeat", body)
                except TRANSPORT_ERRORS as exc:
                    self.stats.failed += 1
                    self.stats.errors[f"{type(exc).__name__}: {exc}"[:200]] += 1
                    continue
                self.stats.statuses[str(response.status)] += 1
                if response.status == 200:
                    self.stats.ok += 1
                else:
                    self.stats.failed += 1
                    self.stats.errors[f"HTTP {response.status}: {response.body[:200].decode(errors='replace')}"] += 1
        finally:
            conn.close()


async def sample_metrics(url: str, every_s: float, into: list[tuple[float, dict[str, float]]],
                         headers: Mapping[str, str] | None = None) -> None:
    """GET /metrics every `every_s` until cancelled; (perf_counter, series) appended to `into`."""
    conn = Connection(url, headers)
    try:
        while True:
            with contextlib.suppress(*TRANSPORT_ERRORS):
                response = await conn.request("GET", "/metrics")
                if response.status == 200:
                    into.append((time.perf_counter(), parse_metrics(response.body.decode())))
            await asyncio.sleep(every_s)
    finally:
        conn.close()


# -- a health-check target ----------------------------------------------------------------------------------------
OK_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


class _TargetProtocol(asyncio.Protocol):
    """200 `ok` to every request (its body, if any, skipped); keep-alive unless the client asks to close.

    Framed by hand, not by h11: the target runs in the bench process on the same two cores as the
    server it loads. Driven by the health probe at 1,000 requests a second (3 s runs, median of 5),
    this costs 63 µs of CPU a request and an h11 server 253 µs; with the h11 target,
    `semreg bench --only health-checks --duration-s 5` (median of 5 interleaved runs) gave a discovery
    p99 ratio of 2.14 against 1.20 with this one, and one run failed 62 healthy checks on timeouts.
    """

    def __init__(self, target: HealthTarget) -> None:
        self.target = target
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.target.connections += 1
        self.target.transports.add(transport)

    def connection_lost(self, exc) -> None:
        self.target.transports.discard(self.transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = self.buffer[:end].lower()
            length = re.search(rb"\r\ncontent-length:\s*(\d+)", head)
            size = end + 4 + (int(length.group(1)) if length else 0)
            if len(self.buffer) < size:
                return  # the body is still coming
            self.buffer = self.buffer[size:]
            self.target.hits += 1
            assert self.transport is not None
            self.transport.write(OK_RESPONSE)
            if b"\r\nconnection: close" in head:
                self.transport.close()
                return


class HealthTarget:
    """A tiny HTTP server on loopback answering 200 to any request; `hits` counts them."""

    def __init__(self, loop_thread: LoopThread) -> None:
        self.loop_thread = loop_thread
        self.hits = 0
        self.connections = 0
        self.port = 0
        self.transports: set[asyncio.BaseTransport] = set()
        self._server: asyncio.AbstractServer | None = None

    def __enter__(self) -> HealthTarget:
        async def start() -> int:
            loop = asyncio.get_running_loop()
            self._server = await loop.create_server(lambda: _TargetProtocol(self), "127.0.0.1", 0, backlog=1024)
            return self._server.sockets[0].getsockname()[1]

        self.port = self.loop_thread.run(start(), 10)
        return self

    def __exit__(self, *exc) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
                for transport in list(self.transports):  # the checker's keep-alive connections
                    transport.close()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._server.wait_closed(), 2)

        with contextlib.suppress(Exception):
            self.loop_thread.run(stop(), 10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


async def gather_limited(coros: Sequence[Awaitable[T]], limit: int) -> list[T]:
    """Await `coros` at most `limit` at a time; results in order."""
    gate = asyncio.Semaphore(limit)

    async def one(coro: Awaitable[T]) -> T:
        async with gate:
            return await coro

    return await asyncio.gather(*(one(c) for c in coros))
