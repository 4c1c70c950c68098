"""How far behind the event loop runs, and whether to shed request work because of it (Envoy's overload
manager: past a threshold of pressure, stop taking new work before liveness suffers).

A beat on the loop every `BEAT_S` notes how late it ran: the loop ran it `lateness` seconds after it was due,
because something held the loop or Python's lock that long. Over the last `WINDOW_S`, `lag_s` is the largest
lateness and `late_share` the share of the window the loop spent in stalls of more than `STALL_S` (a beat a few
milliseconds late is a busy machine's scheduling, not the node falling behind). The loop is *behind* when that
share passes `shed_share` (default a half): a single stall does not shed, a loop that keeps stalling does. One
stall counts for at most `shed_share` of the window, however long: by the time a beat sees it, it is over, and a
process paused whole (SIGSTOP, a frozen container or VM) comes back to a loop that keeps up; shedding its
clients for the length of the pause would punish them for nothing. A loop that stalls again within the window is
behind. While it is, `shed()` says how long a shed client should wait (the largest stall, at most the window),
and the lane (`semreg.work.lane`) refuses new
request work with 503 and that `Retry-After`. Liveness work (heartbeats, expiries, checks, `/healthz`) is never
shed: only what a client can ask again later.

`observe(lateness, at)` is the whole decision, pure; `start(loop)` beats on a real loop.
"""
from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable

BEAT_S = 0.025
WINDOW_S = 2.0
SHED_SHARE = 0.5
STALL_S = 0.05  # a beat later than this counts towards the share


class LoopLag:
    def __init__(self, shed_share: float = SHED_SHARE, window_s: float = WINDOW_S, beat_s: float = BEAT_S,
                 now: Callable[[], float] = time.monotonic) -> None:
        self.shed_share = shed_share  # 0: never shed
        self.window_s = window_s
        self.beat_s = beat_s
        self.now = now
        self._recent: deque[tuple[float, float, float]] = deque()  # (when, lateness, counted) of the window's beats
        self._cap = window_s * (shed_share or 1.0)  # the most one stall counts for
        self._late_sum = 0.0
        self.last_beat = now()  # read by the stall watch's thread (`semreg.work.stalls`)
        self.beats = 0
        self.max_lag_s = 0.0
        self.behind_beats = 0  # beats that found the loop behind
        self._handle: asyncio.TimerHandle | None = None

    def observe(self, lateness_s: float, at: float) -> None:
        """A beat ran `lateness_s` late at `at`."""
        self.beats += 1
        self.last_beat = at
        self.max_lag_s = max(self.max_lag_s, lateness_s)
        stall = lateness_s if lateness_s > STALL_S else 0.0
        counted = min(stall, self._cap)
        self._recent.append((at, stall, counted))
        self._late_sum += counted
        if self._behind(at):
            self.behind_beats += 1

    def _forget(self, at: float) -> None:
        recent = self._recent
        while recent and recent[0][0] < at - self.window_s:
            self._late_sum -= recent.popleft()[2]
        if not recent:
            self._late_sum = 0.0  # no drift from the sums

    def lag_s(self, at: float | None = None) -> float:
        """The largest stall of the last window (0 when no beat was later than `STALL_S`)."""
        at = self.now() if at is None else at
        self._forget(at)
        return max((late for _, late, _ in self._recent), default=0.0)

    def late_share(self, at: float | None = None) -> float:
        """The share of the last window the loop spent in stalls (at most 1)."""
        at = self.now() if at is None else at
        self._forget(at)
        return min(1.0, self._late_sum / self.window_s)

    def _behind(self, at: float) -> bool:
        return bool(self.shed_share) and self.late_share(at) > self.shed_share

    def shed(self) -> float | None:
        """None while the loop keeps up; else the seconds to tell a shed client to wait."""
        at = self.now()
        if not self._behind(at):
            return None
        return float(max(1, math.ceil(min(self.lag_s(at), self.window_s))))

    # -- on a loop ------------------------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        loop = loop or asyncio.get_running_loop()

        def beat(due: float) -> None:
            at = self.now()
            self.observe(max(0.0, at - due), at)
            self._handle = loop.call_later(self.beat_s, beat, at + self.beat_s)

        self._handle = loop.call_later(self.beat_s, beat, self.now() + self.beat_s)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
