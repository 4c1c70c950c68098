"""Revisions that order the writes of an instance wherever they are made.

A revision is a hybrid logical clock: the wall time in microseconds, shifted left ten bits, with this
node's own ten bits below (so two nodes never hand out the same one), and never going back on a node,
even when its wall clock does (`observe` moves it past a revision seen from elsewhere). Writes of one
instance through two nodes are ordered by time, the later one wins; a stale copy (an older revision)
never replaces a newer one, and never comes back over a removal (its tombstone has a newer revision).
"""
from __future__ import annotations

import mmh3

from semreg.clock import Clock

NODE_BITS = 10


class Revisions:
    def __init__(self, clock: Clock, node_id: str = "") -> None:
        self.clock = clock
        self.node = mmh3.hash(node_id, signed=False) & ((1 << NODE_BITS) - 1)
        self.last = 0

    def next(self) -> int:
        now = (int(self.clock.wall() * 1_000_000) << NODE_BITS) | self.node
        if now <= self.last:
            now = (((self.last >> NODE_BITS) + 1) << NODE_BITS) | self.node
        self.last = now
        return now

    def observe(self, revision: int) -> None:
        """A revision from elsewhere (or restored): the next one from here comes after it."""
        self.last = max(self.last, revision)
