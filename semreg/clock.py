"""Time, injected: one clock a node hands to everything that reads the time or waits for it.

- `monotonic()`: seconds that never jump; leases, deadlines and timers run on it.
- `wall()`: seconds since the epoch; only what people read (`registered_at`, `expires_at`) and the seed
  of watch indexes use it. `to_wall(t)` shows a monotonic instant as wall time.
- `call_at(when, fn)`: run `fn` once the monotonic time reaches `when`; returns a handle to `cancel()`.

`LoopClock` is the real one (the event loop's timers). `FakeClock` is for tests: nothing happens until
the test calls `advance(seconds)`, which runs every timer that falls due, in order, so a lease expiry
or a watch timeout is tested without sleeping.

`within(clock, aw, seconds)` waits for `aw` no longer than `seconds` on `clock`. Unlike `asyncio.wait_for`, it
does not then wait for the cancelled `aw` to finish: a call that ignores its cancellation (a connection's
`close()` stuck on a lock) cannot hold its caller past the deadline.
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


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


class Interrupted(Exception):
    """What `within` waited for was cancelled by something other than its caller (a library cancels the
    calls of a connection another task closed, and they end in `CancelledError`)."""


async def within(clock: Clock, aw: Awaitable[T], seconds: float) -> T:
    """`aw`'s result, or `TimeoutError` once `seconds` passed on `clock` (`aw` is then cancelled and left to
    end by itself). A cancellation of `aw` that did not come from the caller is `Interrupted`, so that it is
    never mistaken for the caller's own."""
    task = asyncio.ensure_future(aw)
    timer = asyncio.ensure_future(sleep(clock, seconds))
    try:
        await asyncio.wait((task, timer), return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        if not task.done():
            task.cancel()
            task.add_done_callback(_quiet)
    if not task.done():
        raise TimeoutError(f"no answer within {seconds:g} s")
    if task.cancelled():
        raise Interrupted("cancelled from elsewhere")
    return task.result()


def _quiet(task: asyncio.Future[Any]) -> None:
    """Retrieve a left-behind task's outcome, so that asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()
