"""Active health checks, on their own thread and event loop, so a thousand probes a second do not
stall the loop that serves discovery. The probes themselves are in `semreg.probes`.

Each instance with a `check` is probed every `interval` seconds with `timeout` (the first probe within
the first second, at a random point); the result is handed to the node's loop, which marks the
instance `critical` on a failure (it leaves discovery at once) and `up` again when a check passes.
The number of probes in flight is bounded.
"""
from __future__ import annotations

import asyncio
import heapq
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from semreg.probes import HttpTcpProbe, Probe

log = logging.getLogger("semreg.health")

Report = Callable[[str, int, bool, str], None]  # (instance id, check generation, passing, detail)


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
        # The first probe at a random point of the first interval, so checks registered together
        # (a batch, a restart) do not all fall due in the same instant, every interval after.
        first = self.clock() + random.uniform(0, min(float(check.get("interval", 10.0)), 1.0))
        heapq.heappush(self._due, (first, instance_id, gen))
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
