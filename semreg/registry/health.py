"""Active health checks: when each check is due (on the node's injected clock), and a thread that
probes, so a thousand probes a second do not stall the loop that serves discovery. The probes
themselves are in `semreg.registry.probes`.

Each instance with a `check` is probed every `interval` seconds with `timeout` (the first probe within
the first second, at a random point, so checks registered together do not fall due together). The
schedule is kept on the node's loop and its clock: one timer at the earliest due time, and what falls
due within `BATCH_S` of it goes to the prober together. The prober runs the probes on its own thread
and event loop, at most `max_in_flight` at once, and hands each result back to the node's loop, where
`report` marks the instance `critical` on a failure and `up` again when a check passes.
"""
from __future__ import annotations

import asyncio
import heapq
import logging
import random
import threading
from collections.abc import Callable
from typing import Any

from semreg.clock import Cancellable, Clock
from semreg.registry.probes import HttpTcpProbe, Probe

log = logging.getLogger("semreg.health")

Report = Callable[[str, int, bool, str], None]  # (instance id, check generation, passing, detail)
BATCH_S = 0.01


class CheckSchedule:
    """Which checks exist and when each is next due. Pure: times are given."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.checks: dict[str, tuple[int, dict[str, Any]]] = {}  # id → (generation, check)
        self._due: list[tuple[float, str, int]] = []
        self._generation = 0
        self.rng = rng or random.Random()

    def set(self, instance_id: str, check: dict[str, Any] | None, now: float) -> int:
        """Start, replace or (with None) stop checking an instance; returns the check's generation."""
        self._generation += 1
        gen = self._generation
        if check is None:
            self.checks.pop(instance_id, None)
            return gen
        self.checks[instance_id] = (gen, check)
        first = now + self.rng.uniform(0, min(float(check.get("interval", 10.0)), 1.0))
        heapq.heappush(self._due, (first, instance_id, gen))
        return gen

    def next_due(self) -> float | None:
        while self._due:
            when, iid, gen = self._due[0]
            current = self.checks.get(iid)
            if current is not None and current[0] == gen:
                return when
            heapq.heappop(self._due)
        return None

    def take_due(self, now: float) -> list[tuple[str, int, dict[str, Any]]]:
        """The checks due by `now`, each scheduled again one interval later."""
        out = []
        while self._due and self._due[0][0] <= now:
            _, iid, gen = heapq.heappop(self._due)
            current = self.checks.get(iid)
            if current is None or current[0] != gen:
                continue
            check = current[1]
            heapq.heappush(self._due, (now + float(check.get("interval", 10.0)), iid, gen))
            out.append((iid, gen, check))
        return out


class HealthChecker:
    """Schedules checks on the node's clock; probes on a thread of its own; results go to `report`."""

    def __init__(self, report: Report, clock: Clock, post: Callable[[Callable[[], None]], None] | None = None,
                 probe: Probe | None = None, max_in_flight: int = 200, rng: random.Random | None = None) -> None:
        self.report = report
        self.clock = clock
        self.post = post  # runs a callable on the node's loop from another thread (set by the node)
        self.probe = probe or HttpTcpProbe()
        self.max_in_flight = max_in_flight
        self.schedule = CheckSchedule(rng)
        self._timer: Cancellable | None = None
        self._timer_at: float | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._sem: asyncio.Semaphore | None = None
        self.runs = 0
        self.failures = 0

    @property
    def checks(self) -> dict[str, tuple[int, dict[str, Any]]]:
        return self.schedule.checks

    # -- on the node's loop ------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="semreg-health", daemon=True)
        self._thread.start()
        self._ready.wait(10)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def set(self, instance_id: str, check: dict[str, Any] | None) -> int:
        """Start, replace or (with None) stop probing an instance; returns the check generation."""
        gen = self.schedule.set(instance_id, check, self.clock.monotonic())
        self._arm()
        return gen

    def _arm(self) -> None:
        due = self.schedule.next_due()
        if due is None or (self._timer is not None and self._timer_at is not None and self._timer_at <= due):
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = due
        self._timer = self.clock.call_at(due, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = None
        due = self.schedule.take_due(self.clock.monotonic() + BATCH_S)
        if due and self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._probe_all, due)
        self._arm()

    def _result(self, iid: str, gen: int, passing: bool, detail: str) -> None:
        self.runs += 1
        if not passing:
            self.failures += 1
        current = self.schedule.checks.get(iid)
        if current is not None and current[0] == gen:
            self.report(iid, gen, passing, detail)

    # -- the prober's own thread and loop ----------------------------------------------------------
    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        self._sem = asyncio.Semaphore(self.max_in_flight)
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            pending = list(asyncio.all_tasks(loop))
            for t in pending:
                t.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            close = getattr(self.probe, "aclose", None)
            if close is not None:
                loop.run_until_complete(close())
            loop.close()

    def _probe_all(self, due: list[tuple[str, int, dict[str, Any]]]) -> None:
        loop = asyncio.get_running_loop()
        for iid, gen, check in due:
            loop.create_task(self._run(iid, gen, check))

    async def _run(self, iid: str, gen: int, check: dict[str, Any]) -> None:
        assert self._sem is not None
        async with self._sem:
            try:
                passing, detail = await self.probe(check)
            except Exception as exc:
                passing, detail = False, f"probe error: {exc}"[:200]
        if self.post is not None:
            self.post(lambda: self._result(iid, gen, passing, detail))
