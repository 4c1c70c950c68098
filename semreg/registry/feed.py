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
What a reader may see is its `visible` test (its environments): changes it may not see neither answer
nor wake it.
"""
from __future__ import annotations

import asyncio
import collections
import functools
from collections.abc import Callable, Iterable

from semreg.clock import Clock
from semreg.registry.registry import Change

Visible = Callable[[Change], bool]
KEEP = 4096  # changes kept; a reader further behind reads everything again
MOST = 50  # changes one answer carries (about 6 KB); more is a reset


class ChangeFeed:
    def __init__(self, clock: Clock, keep: int = KEEP) -> None:
        self.clock = clock
        self.first = self.index = max(1, int(clock.wall() * 1_000_000))
        self._log: collections.deque[tuple[int, Change | None]] = collections.deque(maxlen=keep)  # None: a reset
        self._waiters: set[asyncio.Future[None]] = set()
        self.released = False  # the server is stopping: waits end at once

    def append(self, changes: Iterable[Change]) -> None:
        added = False
        for c in changes:
            if c.membership:
                self.index += 1
                self._log.append((self.index, c))
                added = True
        if added:
            self._wake()

    def reset(self) -> None:
        """Every reader reads everything again: the coordinator may have missed changes."""
        self.index += 1
        self._log.append((self.index, None))
        self._wake()

    def _wake(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    def since(self, index: int, visible: Visible, most: int = MOST) -> tuple[bool, list[Change]]:
        """(reset, the changes after `index` the reader may see, oldest first)."""
        if index > self.index or index < self.first:
            return True, []
        oldest = self._log[0][0] if self._log else self.index + 1
        if index + 1 < oldest and index < self.index:
            return True, []
        out: list[Change] = []
        for number, change in reversed(self._log):
            if number <= index:
                break
            if change is None:
                return True, []
            if visible(change):
                out.append(change)
                if len(out) > most:
                    return True, []
        out.reverse()
        return False, out

    async def wait(self, index: int, visible: Visible, timeout_s: float, most: int = MOST) -> tuple[bool, list[Change]]:
        """`since`, after waiting up to `timeout_s` (on the clock) for a change the reader may see."""
        deadline = self.clock.monotonic() + timeout_s
        while True:
            reset, found = self.since(index, visible, most)
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
