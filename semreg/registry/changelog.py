"""The recent changes of this node's shard, numbered, for other nodes to follow (long polls).

Another node asks for the changes after the cursor it holds and waits for some when there are none.
An `epoch` (when this log began) tells a follower that the node restarted; a cursor older than what
the log keeps gets `reset`: the follower then recomputes everything it derived, since it may have
missed changes. Bounded: the last `keep` changes, given `PAGE` at a time.
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from semreg.registry.registry import Change

# changes in one answer to a follower: one of 10,000 (the whole log) held a loaded follower's event loop for
# 9 s while it read them, past its membership lease; the follower asks again at once while more are left
PAGE = 1_000


@dataclass(slots=True)
class _Entry:
    number: int
    change: Change
    encoded: bytes | None = None  # the change as a follower reads it, made when one first asks


class ChangeLog:
    def __init__(self, epoch: int, keep: int = 10_000) -> None:
        self.epoch = epoch
        self.cursor = 0
        self._log: collections.deque[_Entry] = collections.deque(maxlen=keep)
        self._waiters: set[asyncio.Future[None]] = set()

    def append(self, changes: list[Change]) -> None:
        for c in changes:
            self.cursor += 1
            self._log.append(_Entry(self.cursor, c))
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()

    def since(self, cursor: int) -> tuple[bool, list[Change]]:
        """(reset, changes after `cursor`): reset when the log no longer holds what came right after it."""
        if self._lost(cursor):
            return True, []
        return False, [entry.change for entry in self._after(cursor)]

    def _lost(self, cursor: int) -> bool:
        if cursor > self.cursor:
            return True
        oldest = self._log[0].number if self._log else self.cursor + 1
        return cursor + 1 < oldest and cursor < self.cursor

    def _after(self, cursor: int) -> list[_Entry]:
        """The entries after `cursor`, read from the newest back (a follower is usually a few behind)."""
        out = []
        for entry in reversed(self._log):
            if entry.number <= cursor:
                break
            out.append(entry)
        out.reverse()
        return out

    def since_encoded(self, cursor: int, encode: Callable[[Change], bytes], limit: int = PAGE
                      ) -> tuple[bool, list[bytes], int]:
        """`since`, the oldest `limit` of them, each encoded once however many followers ask for it; and the
        cursor of the last one given, from which the follower asks again."""
        if self._lost(cursor):
            return True, [], self.cursor
        entries = self._after(cursor)[:limit]
        out = []
        for entry in entries:
            if entry.encoded is None:
                entry.encoded = encode(entry.change)
            out.append(entry.encoded)
        return False, out, entries[-1].number if entries else self.cursor

    async def wait(self, cursor: int, timeout_s: float) -> None:
        """Return once there is something after `cursor`, or after `timeout_s`."""
        if cursor < self.cursor or timeout_s <= 0:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(waiter)
        try:
            with contextlib.suppress(TimeoutError):  # the wait ended with nothing new: answer empty
                await asyncio.wait_for(waiter, timeout_s)
        finally:
            self._waiters.discard(waiter)

    def release(self) -> None:
        """Answer every waiting follower now (this node is stopping)."""
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
        self._waiters.clear()
