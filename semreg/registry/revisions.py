"""Revisions that order the writes of an instance wherever they are made.

A revision is a hybrid logical clock: the wall time in microseconds, shifted left ten bits, with this
node's slot in the ten bits below, and never going back on a node, even when its wall clock does
(`observe` moves it past a revision seen from elsewhere). Writes of one instance through two nodes are
ordered by time, the later one wins; a stale copy (an older revision) never replaces a newer one, and
never comes back over a removal (its tombstone has a newer revision).

Two nodes never hand out the same revision because no two live members hold the same slot: a member of a
ring claims one in etcd when it joins (`semreg.cluster.slots`, a key created only if absent, on the
member's lease) and `assign`s it here before it takes a write. A node alone has the ring to itself and
keeps the slot its id hashes to. Equal revisions from two nodes would be "not newer" than each other, and
two copies of an instance could differ while every digest agreed; unique slots rule that out.
"""
from __future__ import annotations

import mmh3

from semreg.clock import Clock

NODE_BITS = 10
SLOTS = 1 << NODE_BITS


def revision_at(wall_s: float) -> int:
    """The least revision any node hands out at wall time `wall_s` (seconds): every revision below it is older."""
    return int(wall_s * 1_000_000) << NODE_BITS


def hashed_slot(node_id: str) -> int:
    """The slot a node id hashes to: a node alone keeps it, and a joining member asks for it first."""
    return mmh3.hash(node_id, signed=False) & (SLOTS - 1)


class Revisions:
    def __init__(self, clock: Clock, node_id: str = "") -> None:
        self.clock = clock
        self.node = hashed_slot(node_id)
        self.last = 0

    def assign(self, slot: int) -> None:
        """The slot this node holds in its ring, unique among the live members: revisions from now on end in
        it (the next one still comes after every revision handed out or seen before)."""
        if not 0 <= slot < SLOTS:
            raise ValueError(f"a slot is in [0, {SLOTS}): {slot}")
        self.node = slot

    def next(self) -> int:
        now = revision_at(self.clock.wall()) | self.node
        if now <= self.last:
            now = (((self.last >> NODE_BITS) + 1) << NODE_BITS) | self.node
        self.last = now
        return now

    def after(self, revision: int) -> int:
        """A revision of this node's one microsecond after `revision`: the least that orders a write of an
        instance after the one at `revision` without dating it now."""
        later = (((revision >> NODE_BITS) + 1) << NODE_BITS) | self.node
        self.last = max(self.last, later)
        return later

    def observe(self, revision: int) -> None:
        """A revision from elsewhere (or restored): the next one from here comes after it."""
        self.last = max(self.last, revision)
