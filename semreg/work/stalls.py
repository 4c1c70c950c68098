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
"""
from __future__ import annotations

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
                 now: Callable[[], float] = time.monotonic) -> None:
        """`last_beat()`: when the loop last turned (on `now`'s clock)."""
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

    def start(self) -> None:
        """From the loop's thread."""
        self._loop_thread = threading.get_ident()
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, name="semreg-stall-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.look(self.now())

    def look(self, now: float) -> None:
        """One look at the loop (the thread's step; tests call it with their own times)."""
        beat = self.last_beat()
        if self._since is None:
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
        log.warning("the event loop stalled", extra={"ms": round(seconds * 1000), "where": self._where,
                                                     "threads": self._threads, "stalls_not_logged": self._unlogged})
        self._logged_at = now
        self._unlogged = 0

    def _stacks(self) -> tuple[list[str], dict[str, list[str]]]:
        """The loop thread's stack; and when it was not in semreg's code, the other threads' that were."""
        frames = sys._current_frames()
        names = {t.ident: t.name for t in threading.enumerate()}
        loop = _stack(frames.get(self._loop_thread)) if self._loop_thread is not None else []
        if _in_semreg(loop):
            return loop, {}
        mine = threading.get_ident()
        others = {names.get(ident, str(ident)): _stack(frame) for ident, frame in frames.items()
                  if ident not in (mine, self._loop_thread)}
        return loop, {name: stack for name, stack in others.items() if any(x.startswith("semreg/") for x in stack)}


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


def _stack(frame: object) -> list[str]:
    if frame is None:
        return []
    stack = traceback.extract_stack(frame)  # type: ignore[arg-type]
    return [f"{_short(f.filename)}:{f.lineno} {f.name}" for f in reversed(stack[-FRAMES:])]


def _short(path: str) -> str:
    """`semreg/registry/catalogue.py` for semreg's own files, the file's name for the others'."""
    at = path.rfind(os.sep + "semreg" + os.sep)
    return path[at + 1:] if at >= 0 else os.path.basename(path)
