"""A node made of services, and the manager that runs them (as dskit's `services.Service` and `modules.Manager`).

- **`Service`**: a name, the names of the services it needs, `start()` (returns once it is started; work it
  keeps doing afterwards runs in tasks or threads of its own), `stop()` (also called after a start that failed
  half way, so it undoes what is there and no more), and `waiting()`: once started, why it is not ready yet
  ('' once it is; a ring member is started as soon as its join is under way, ready once it has joined).
- **`Basic`**: a service made of two functions, plain or coroutine.
- **`Every`**: a service that runs a function every so many seconds on the node's clock, until it stops.
- **`Manager`**: starts the services in order (each after the ones it needs, otherwise in the order given),
  gives the start-up up between two of them once a stop is asked (`StopAsked`; `stop()` then stops what started),
  and stops them in reverse, each
  within `stop_within_s` on the node's clock: a stop that fails or hangs is logged and the next one goes on.
  A service that fails to start is stopped, then the ones before it, in reverse; those after it never start.
  Each step is a log line with the service's name and its milliseconds (`service started`, `service stopped`).
"""
from __future__ import annotations

import enum
import inspect
import logging
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from semreg.clock import Cancellable, Clock, within
from semreg.errors import StopAsked

log = logging.getLogger("semreg.services")


class CannotStart(Exception):
    """A service could not start, for a reason its message says in full (an address taken): logged without a
    traceback, which any other exception of a start is logged with."""


class State(enum.Enum):
    NEW = "new"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"  # its start or its stop failed, or its stop ran past its bound


class Service(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def needs(self) -> tuple[str, ...]: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def waiting(self) -> str: ...


class Basic:
    """A service of two functions (each plain or a coroutine function; either may be left out)."""

    def __init__(self, name: str, start: Callable[[], object] | None = None, stop: Callable[[], object] | None = None,
                 *, needs: Iterable[str] = (), waiting: Callable[[], str] = lambda: "") -> None:
        self.name = name
        self.needs = tuple(needs)
        self._start, self._stop, self._waiting = start, stop, waiting

    async def start(self) -> None:
        await _run(self._start)

    async def stop(self) -> None:
        await _run(self._stop)

    def waiting(self) -> str:
        return self._waiting()


class Every:
    """`fn` every `interval_s` seconds on `clock`, the first time one interval after the start, until the stop."""

    def __init__(self, name: str, interval_s: float, fn: Callable[[], object], clock: Clock, *,
                 needs: Iterable[str] = ()) -> None:
        self.name = name
        self.needs = tuple(needs)
        self.interval_s = interval_s
        self._fn = fn
        self._clock = clock
        self._timer: Cancellable | None = None

    async def start(self) -> None:
        self._arm()

    def _arm(self) -> None:
        self._timer = self._clock.call_at(self._clock.monotonic() + self.interval_s, self._due)

    def _due(self) -> None:
        self._fn()
        self._arm()

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def waiting(self) -> str:
        return ""


async def _run(fn: Callable[[], object] | None) -> None:
    result = fn() if fn is not None else None
    if inspect.isawaitable(result):
        await result


def present(services: Iterable[Service], *wanted: str) -> tuple[str, ...]:
    """Those of `wanted` that are among `services` (what a service needs of the optional ones)."""
    names = {s.name for s in services}
    return tuple(name for name in wanted if name in names)


def in_order(services: Iterable[Service]) -> list[Service]:
    """`services` ordered so that each comes after the ones it needs, otherwise as given; ValueError when two
    share a name, one needs a service that is not there, or some need each other."""
    given = list(services)
    by_name: dict[str, Service] = {}
    for service in given:
        if service.name in by_name:
            raise ValueError(f"two services are named {service.name}")
        by_name[service.name] = service
    for service in given:
        for need in service.needs:
            if need not in by_name:
                raise ValueError(f"{service.name} needs {need}, which is not among the services")
    ordered: list[Service] = []
    placed: set[str] = set()
    path: list[str] = []

    def place(service: Service) -> None:
        if service.name in placed:
            return
        if service.name in path:
            circle = path[path.index(service.name):]
            raise ValueError(f"{' and '.join(sorted(circle))} need each other")
        path.append(service.name)
        for need in service.needs:
            place(by_name[need])
        path.pop()
        placed.add(service.name)
        ordered.append(service)

    for service in given:
        place(service)
    return ordered


class Manager:
    def __init__(self, services: Iterable[Service], clock: Clock, *, stop_within_s: float,
                 stop_asked: Callable[[], bool] = lambda: False) -> None:
        """`stop_asked`: whether the process was asked to stop (the start-up then gives up before the next
        service)."""
        self.services = in_order(services)
        self.clock = clock
        self.stop_within_s = stop_within_s
        self.stop_asked = stop_asked
        self.states = {s.name: State.NEW for s in self.services}
        self._begun: list[Service] = []  # started, or began to, and not stopped since: in start order

    async def start(self) -> None:
        """Start every service in order. `StopAsked` when a stop is asked before one starts or while one starts
        (it gave up): what started is stopped by `stop()`, as at any stop. Any other exception a start raises, once
        what started is stopped again."""
        for service in self.services:
            if self.stop_asked():
                raise StopAsked(f"before {service.name} started")
            self.states[service.name] = State.STARTING
            self._begun.append(service)
            started = time.perf_counter()
            try:
                await service.start()
            except StopAsked:
                self.states[service.name] = State.RUNNING  # half started: stopped with the others
                raise
            except Exception as exc:
                self.states[service.name] = State.FAILED
                log.error("service failed to start", exc_info=None if isinstance(exc, CannotStart) else exc,
                          extra={"service": service.name, "error": str(exc)[:300], "ms": _ms(started)})
                await self.stop()
                raise
            self.states[service.name] = State.RUNNING
            log.info("service started", extra={"service": service.name, "ms": _ms(started)})

    async def stop(self) -> None:
        """Stop every service that started (or failed to), in reverse order, each within `stop_within_s`; one
        that fails or hangs is logged and left, and the others stop all the same. Stopping twice stops nothing
        twice."""
        while self._begun:
            service = self._begun.pop()
            state = self.states[service.name]
            self.states[service.name] = State.STOPPING
            started = time.perf_counter()
            try:
                await within(self.clock, service.stop(), self.stop_within_s)
            except TimeoutError:
                self.states[service.name] = State.FAILED
                log.error("service did not stop in time", extra={"service": service.name, "ms": _ms(started),
                                                                  "limit_s": self.stop_within_s})
                continue
            except Exception as exc:
                self.states[service.name] = State.FAILED
                log.error("service failed to stop", exc_info=exc,
                          extra={"service": service.name, "error": str(exc)[:300], "ms": _ms(started)})
                continue
            self.states[service.name] = State.FAILED if state is State.FAILED else State.STOPPED
            log.info("service stopped", extra={"service": service.name, "ms": _ms(started)})

    def waiting(self, starting: str) -> str:
        """Why the node is not ready: `starting` while a service has not started yet, else what the first one
        that is not ready says ('' once every one is)."""
        for service in self.services:
            if self.states[service.name] is not State.RUNNING:
                return starting
            why = service.waiting()
            if why:
                return why
        return ""

    def ready(self) -> bool:
        return not self.waiting("starting")


def _ms(since: float) -> int:
    return round((time.perf_counter() - since) * 1000)
