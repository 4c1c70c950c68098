"""Active health checks: HTTP (any 2xx or 3xx passes) and TCP (a connection opens), on their own
thread and event loop, so a thousand probes a second do not stall the loop that serves discovery.

Each instance with a `check` is probed every `interval` seconds with `timeout`; the result is handed
to the node's loop, which marks the instance `critical` on a failure (it leaves discovery at once)
and `up` again when a check passes. The number of probes in flight is bounded.
"""
from __future__ import annotations

import asyncio
import heapq
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

log = logging.getLogger("semreg.health")

Probe = Callable[[dict[str, Any]], Awaitable[tuple[bool, str]]]
Report = Callable[[str, int, bool, str], None]  # (instance id, check generation, passing, detail)


class HttpTcpProbe:
    """The real probes; one pooled HTTP client for all HTTP checks."""

    def __init__(self) -> None:
        self._client: httpx.AsyncClient | None = None

    async def __call__(self, check: dict[str, Any]) -> tuple[bool, str]:
        timeout = float(check.get("timeout", 2.0))
        try:
            if check.get("http"):
                if self._client is None:
                    self._client = httpx.AsyncClient(follow_redirects=False, verify=False,
                                                     limits=httpx.Limits(max_connections=256,
                                                                         max_keepalive_connections=64))
                r = await self._client.get(check["http"], timeout=timeout, headers={"User-Agent": "semreg-health"})
                return 200 <= r.status_code < 400, f"HTTP {r.status_code}"
            host, _, port = check["tcp"].rpartition(":")
            host = host.strip("[]")
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), timeout)
            writer.close()
            try:
                await asyncio.wait_for(writer.wait_closed(), timeout)
            except (TimeoutError, OSError):
                pass
            return True, "TCP connect ok"
        except (TimeoutError, httpx.HTTPError, OSError, ValueError) as exc:
            return False, f"{type(exc).__name__}: {exc}"[:200]

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


class HealthChecker:
    """Schedules checks on a private loop in a daemon thread; results go to `report`."""

    def __init__(self, report: Report, probe: Probe | None = None, max_in_flight: int = 200,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.report = report
        self.probe = probe or HttpTcpProbe()
        self.max_in_flight = max_in_flight
        self.clock = clock
        self.checks: dict[str, tuple[int, dict[str, Any]]] = {}  # id → (generation, check)
        self._due: list[tuple[float, str, int]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._generation = 0
        self.runs = 0
        self.failures = 0

    # -- called from the node's loop ------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="semreg-health", daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def set(self, instance_id: str, check: dict[str, Any] | None) -> int:
        """Start, replace or (with None) stop probing an instance; returns the check generation."""
        self._generation += 1
        gen = self._generation
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._set, instance_id, gen, check)
        return gen

    # -- the checker's own loop -----------------------------------------------------------------
    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        self._wake = asyncio.Event()
        self._sem = asyncio.Semaphore(self.max_in_flight)
        task = loop.create_task(self._schedule())
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            pending = [task, *(t for t in asyncio.all_tasks(loop) if t is not task)]
            for t in pending:
                t.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            close = getattr(self.probe, "aclose", None)
            if close is not None:
                loop.run_until_complete(close())
            loop.close()

    def _set(self, instance_id: str, gen: int, check: dict[str, Any] | None) -> None:
        if check is None:
            self.checks.pop(instance_id, None)
            return
        self.checks[instance_id] = (gen, check)
        heapq.heappush(self._due, (self.clock(), instance_id, gen))
        assert self._wake is not None
        self._wake.set()

    async def _schedule(self) -> None:
        assert self._wake is not None
        while True:
            now = self.clock()
            while self._due and self._due[0][0] <= now:
                _, iid, gen = heapq.heappop(self._due)
                current = self.checks.get(iid)
                if current is None or current[0] != gen:
                    continue
                check = current[1]
                heapq.heappush(self._due, (now + float(check.get("interval", 10.0)), iid, gen))
                await self._sem.acquire()
                asyncio.get_running_loop().create_task(self._run(iid, gen, check))
            delay = (self._due[0][0] - self.clock()) if self._due else 3600.0
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), max(0.0, delay))
            except TimeoutError:
                pass

    async def _run(self, iid: str, gen: int, check: dict[str, Any]) -> None:
        try:
            passing, detail = await self.probe(check)
        except Exception as exc:
            passing, detail = False, f"probe error: {exc}"[:200]
        finally:
            self._sem.release()
        self.runs += 1
        if not passing:
            self.failures += 1
        current = self.checks.get(iid)
        if current is not None and current[0] == gen:
            self.report(iid, gen, passing, detail)
