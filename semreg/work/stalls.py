"""Where the event loop got stuck: a thread of its own watches the loop's beat (`semreg.work.lag`) and, when the
loop has not turned for `threshold_s`, takes the stack of the loop's thread, then logs one line when the stall
ends: how long, and the frames it was in. The next stall is found by its log line, not by a run at a million.

Python's lock is the limit of what it sees: a call into a library that keeps the lock (a collection, a parse
in C) stops this thread too, and the stall is measured and logged once the lock comes back, with the stack
as it then is. When the loop's thread was not in semreg's code (it waited for the lock another thread held),
the line also gives the stacks of the threads that were (`threads`): one of them held the lock. "In semreg's
code" is read from the innermost frames, down to the loop's own: under uvloop, a loop waiting for the lock is
in C below `asyncio.Runner.run`, and its stack is then only the frames that started it (`semreg/node/process.py`
among them), which are not where it is.

What the loop's thread did meanwhile, from the first look after its last turn (within `poll_s` of the stall's
start) to its end, is logged beside it: `cpu_ms` it ran, `runqueue_ms` it was ready to run and waited for a core
(Linux's schedstat: a machine with more work than cores), and `gc_ms` the collector ran in any thread (every
thread waits for it); the rest it waited for Python's lock, another lock, or the system. Each is None where it
cannot be known.
"""
from __future__ import annotations

import gc
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable

log = logging.getLogger("semreg.stalls")

THRESHOLD_S = 0.1
POLL_S = 0.02
FRAMES = 8  # frames of the stack logged, innermost first
LOG_EVERY_S = 1.0  # at most one line a second; the stalls in between are counted in the next one


class StallWatch:
    def __init__(self, last_beat: Callable[[], float], threshold_s: float = THRESHOLD_S, poll_s: float = POLL_S,
                 now: Callable[[], float] = time.monotonic,
                 sched: Callable[[], tuple[float, float] | None] | None = None,
                 collector: Callable[[], float] | None = None) -> None:
        """`last_beat()`: when the loop last turned (on `now`'s clock). `sched()`: the loop thread's seconds run
        and waited on a run queue so far (default: its schedstat, read from `start()`); `collector()`: the
        collector's seconds so far (default: timed through `gc.callbacks` from `start()`)."""
        self.last_beat = last_beat
        self.threshold_s = threshold_s
        self.poll_s = poll_s
        self.now = now
        self.stalls = 0
        self.longest_s = 0.0
        self._loop_thread: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._since: float | None = None  # the beat the current stall started after
        self._where: list[str] = []
        self._threads: dict[str, list[str]] = {}
        self._unlogged = 0
        self._logged_at = -LOG_EVERY_S
        self._sched = sched
        self._collector = collector
        self._gc_s = 0.0
        self._gc_started: float | None = None
        self._seen_beat: float | None = None
        self._before: tuple[tuple[float, float] | None, float | None] = (None, None)

    def start(self) -> None:
        """From the loop's thread."""
        self._loop_thread = threading.get_ident()
        if self._sched is None:
            self._sched = _schedstat(threading.get_native_id())
        if self._collector is None:
            gc.callbacks.append(self._timed)
            self._collector = lambda: self._gc_s
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, name="semreg-stall-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._timed in gc.callbacks:
            gc.callbacks.remove(self._timed)

    def _timed(self, phase: str, info: dict) -> None:
        """A `gc.callbacks` entry: the collector's time, added up."""
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif self._gc_started is not None:
            self._gc_s += time.perf_counter() - self._gc_started
            self._gc_started = None

    def _readings(self) -> tuple[tuple[float, float] | None, float | None]:
        return (self._sched() if self._sched is not None else None,
                self._collector() if self._collector is not None else None)

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.look(self.now())

    def look(self, now: float) -> None:
        """One look at the loop (the thread's step; tests call it with their own times)."""
        beat = self.last_beat()
        if self._since is None:
            if beat != self._seen_beat:  # it turned since the last look: what it did from here on
                self._seen_beat = beat
                self._before = self._readings()
            if now - beat > self.threshold_s:
                self._since = beat
                self._where, self._threads = self._stacks()
            return
        if beat != self._since:  # it turned again
            self._ended(beat - self._since, now)
            self._since = None

    def _ended(self, seconds: float, now: float) -> None:
        self.stalls += 1
        self.longest_s = max(self.longest_s, seconds)
        if now - self._logged_at < LOG_EVERY_S:
            self._unlogged += 1
            return
        (sched0, gc0), (sched1, gc1) = self._before, self._readings()
        ran = waited = gc_ms = None
        if sched0 is not None and sched1 is not None:
            ran, waited = round((sched1[0] - sched0[0]) * 1000), round((sched1[1] - sched0[1]) * 1000)
        if gc0 is not None and gc1 is not None:
            gc_ms = round((gc1 - gc0) * 1000)
        log.warning("the event loop stalled", extra={"ms": round(seconds * 1000), "where": self._where,
                                                     "threads": self._threads, "stalls_not_logged": self._unlogged,
                                                     "cpu_ms": ran, "runqueue_ms": waited, "gc_ms": gc_ms})
        self._logged_at = now
        self._unlogged = 0

    def _stacks(self) -> tuple[list[str], dict[str, list[str]]]:
        """The loop thread's stack; and when it was not in semreg's code, the other threads' that were."""
        frames = sys._current_frames()  # this frame among them: a cycle, which `del` breaks below
        try:
            names = {t.ident: t.name for t in threading.enumerate()}
            loop = _stack(frames.get(self._loop_thread)) if self._loop_thread is not None else []
            if _in_semreg(loop):
                return loop, {}
            mine = threading.get_ident()
            others = {names.get(ident, str(ident)): _stack(frame) for ident, frame in frames.items()
                      if ident not in (mine, self._loop_thread)}
            return loop, {name: stack for name, stack in others.items() if any(x.startswith("semreg/") for x in stack)}
        finally:
            # left to the collector, every thread's frames and their locals live on; and what a batch makes is
            # frozen without a collection (`semreg.heap`), so a stall during one kept them for good
            del frames


LOOP_FILES = ("runners.py", "base_events.py", "selectors.py", "events.py")  # the loop's own, and what it is run from


def _in_semreg(stack: list[str]) -> bool:
    """Whether a stack (innermost first, as `_stack` gives it) is in semreg's code: a frame of semreg's found
    before the first frame of the event loop's own (where callbacks are called from, or the loop is run)."""
    for line in stack:
        if line.startswith("semreg/"):
            return True
        if line.split(":", 1)[0] in LOOP_FILES:
            return False
    return False


def _schedstat(native_id: int) -> Callable[[], tuple[float, float] | None]:
    """A reader of a thread's seconds on a core and waiting on a run queue (Linux's schedstat); None elsewhere."""
    path = f"/proc/self/task/{native_id}/schedstat"

    def read() -> tuple[float, float] | None:
        try:
            with open(path, "rb") as f:
                ran, waited, _ = f.read().split()
        except (OSError, ValueError):
            return None
        return int(ran) / 1e9, int(waited) / 1e9
    return read


def _stack(frame: object) -> list[str]:
    if frame is None:
        return []
    stack = traceback.extract_stack(frame)  # type: ignore[arg-type]
    return [f"{_short(f.filename)}:{f.lineno} {f.name}" for f in reversed(stack[-FRAMES:])]


def _short(path: str) -> str:
    """`semreg/registry/catalogue.py` for semreg's own files, the file's name for the others'."""
    at = path.rfind(os.sep + "semreg" + os.sep)
    return path[at + 1:] if at >= 0 else os.path.basename(path)
