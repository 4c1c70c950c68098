"""Time, injected: one clock a node hands to everything that reads the time or waits for it.

- `monotonic()`: seconds that never jump; leases, deadlines and timers run on it.
- `wall()`: seconds since the epoch; only what people read (`registered_at`, `expires_at`) and the seed
  of watch indexes use it. `to_wall(t)` shows a monotonic instant as wall time.
- `call_at(when, fn)`: run `fn` once the monotonic time reaches `when`; returns a handle to `cancel()`.

`LoopClock` is the real one (the event loop's timers). `FakeClock` is for tests: nothing happens until
the test calls `advance(seconds)`, which runs every timer that falls due, in order, so a lease expiry
or a watch timeout is tested without sleeping.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def wall(self) -> float: ...

    def call_at(self, when: float, fn: Callable[[], None]) -> Cancellable: ...


def to_wall(clock: Clock, instant: float) -> float:
    """The wall time at which the monotonic `instant` happens (or happened)."""
    return instant - clock.monotonic() + clock.wall()


class LoopClock:
    """The system's clocks, with timers on the running event loop (found at the first `call_at`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop

    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def call_at(self, when: float, fn: Callable[[], None]) -> Cancellable:
        loop = self._loop or asyncio.get_running_loop()
        self._loop = loop
        # the loop's own time is time.monotonic() as well, so `when` needs no translation
        return loop.call_at(when - time.monotonic() + loop.time(), fn)


class _Timer:
    __slots__ = ("cancelled", "fn", "when")

    def __init__(self, when: float, fn: Callable[[], None]) -> None:
        self.when = when
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that moves only when told to; `advance` runs the timers that fall due, in time order."""

    def __init__(self, monotonic: float = 1000.0, wall: float = 1_800_000_000.0) -> None:
        self._mono = monotonic
        self._offset = wall - monotonic
        self._timers: list[tuple[float, int, _Timer]] = []
        self._order = itertools.count()

    def monotonic(self) -> float:
        return self._mono

    def wall(self) -> float:
        return self._mono + self._offset

    def call_at(self, when: float, fn: Callable[[], None]) -> Cancellable:
        timer = _Timer(when, fn)
        heapq.heappush(self._timers, (when, next(self._order), timer))
        return timer

    def advance(self, seconds: float) -> None:
        """Move time forward, running each timer at its own time (one may schedule another)."""
        target = self._mono + seconds
        while self._timers and self._timers[0][0] <= target:
            when, _, timer = heapq.heappop(self._timers)
            self._mono = max(self._mono, when)
            if not timer.cancelled:
                timer.fn()
        self._mono = target

    @property
    def pending(self) -> int:
        return sum(1 for _, _, t in self._timers if not t.cancelled)


async def sleep(clock: Clock, seconds: float) -> None:
    """Wait `seconds` on `clock` (a fake clock's test moves it; the loop's runs by itself)."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    timer = clock.call_at(clock.monotonic() + max(0.0, seconds), lambda: None if done.done() else done.set_result(None))
    try:
        await done
    finally:
        timer.cancel()
