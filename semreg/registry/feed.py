"""The changes of instances as a numbered feed, for a view that shows a few of many instances (the console).

A watch of a whole list answers with the whole list when one instance in it changes: 3.5 MB at 10,050
instances. A follower of this feed gets the changes themselves instead (which instance, why, its status
now), and reads again only what it shows and a change touched. The feed holds the changes this node's
coordinator hears of (its own shard's and, in a cluster, every member's through the followers), numbered
from the clock's wall time in microseconds so that a number from before a restart is older than any it
gives. A heartbeat that only renews a lease or reports a load is not in it.

A reader asks for the changes after the number it holds; it gets `reset` instead when the feed no longer
holds what came right after it (the log is bounded, the node restarted, or the coordinator may have
missed changes), and when more changes came than one answer carries: it then reads again all it shows.
What a reader may see is its scope (the environments it reads, `semreg.registry.indexes`), and so are its
numbers: a reader of some environments is numbered by their changes alone, so that another environment's
changes neither answer it, nor wake it, nor move its number.
"""
from __future__ import annotations

import asyncio
import collections
import functools
from collections.abc import Iterable

from semreg.clock import Clock
from semreg.registry.indexes import Indexes, Scope
from semreg.registry.registry import Change

KEEP = 4096  # changes kept; a reader further behind reads everything again
MOST = 50  # changes one answer carries (about 6 KB); more is a reset


class ChangeFeed:
    def __init__(self, clock: Clock, keep: int = KEEP) -> None:
        self.clock = clock
        self.indexes = Indexes(max(1, int(clock.wall() * 1_000_000)))
        self._log: collections.deque[Change | None] = collections.deque(maxlen=keep)  # None: a reset
        self._waiters: set[asyncio.Future[None]] = set()
        self.released = False  # the server is stopping: waits end at once

    def index(self, scope: Scope = None) -> int:
        """The number of the last change a reader of `scope` may see (None: every environment)."""
        return self.indexes.of(scope)

    def append(self, changes: Iterable[Change]) -> None:
        added = False
        for c in changes:
            if c.membership:
                forgotten = self.indexes.forgotten
                self.indexes.changed(c.environments)
                if self.indexes.forgotten != forgotten:  # a forgotten environment's number moved: read it all again
                    self._log.append(None)
                self._log.append(c)
                added = True
        if added:
            self._wake()

    def reset(self) -> None:
        """Every reader reads everything again: the coordinator may have missed changes."""
        self.indexes.changed_everything()
        self._log.append(None)
        self._wake()

    def _wake(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    def since(self, index: int, scope: Scope = None, most: int = MOST) -> tuple[bool, list[Change]]:
        """(reset, the changes after `index` a reader of `scope` may see, oldest first). The log is read from
        the newest back, each change taking the reader's number down by as many of its environments as the
        reader reads, until it is at `index`; a reset on the way, or a log that ends first, is a reset."""
        number = self.indexes.of(scope)
        if index > number:
            return True, []
        out: list[Change] = []
        for change in reversed(self._log):
            if number <= index:
                break
            if change is None:
                return True, []
            seen = 1 if scope is None else len(scope & change.environments)
            if seen:
                out.append(change)
                if len(out) > most:
                    return True, []
                number -= seen
        if number > index:
            return True, []
        out.reverse()
        return False, out

    async def wait(self, index: int, scope: Scope, timeout_s: float, most: int = MOST) -> tuple[bool, list[Change]]:
        """`since`, after waiting up to `timeout_s` (on the clock) for a change the reader may see."""
        deadline = self.clock.monotonic() + timeout_s
        while True:
            reset, found = self.since(index, scope, most)
            if reset or found or self.released or self.clock.monotonic() >= deadline:
                return reset, found
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.add(waiter)
            timer = self.clock.call_at(deadline, functools.partial(_answer, waiter))
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiters.discard(waiter)

    def release(self) -> None:
        """Answer every waiting reader now, and every later one at once (the server is stopping)."""
        self.released = True
        self._wake()


def _answer(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
