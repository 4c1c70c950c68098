"""A shard's recent removals: the tombstones some other node may not hold yet.

In a ring a removal reaches W owners before it is acknowledged; another owner that was slow or away, or a
node that held a copy before the ring moved, may still hold the live copy it removes. Until every member
of the ring is known to hold nothing older (`semreg.cluster.antientropy` settles them, pushing the
tombstone where a live copy is older), the shard sends these removals with every read it answers
(`semreg.registry.shard.Held`), and a merged read leaves out every copy older than one of them: a stale
copy never brings a removed instance back, whichever node it is read from.

A node alone has no other copies: nothing is kept until a ring says so (`travel`). The ring is handed this
object at wiring, beside the shard: what it needs of this node's removals is here, not in the shard.
"""
from __future__ import annotations

from collections.abc import Callable

TOMBSTONE_KEEP_S = 24 * 3600.0  # how long a removal is remembered (a copy older than its tombstone stays out)


class RecentRemovals:
    def __init__(self, tombstones: dict[str, tuple[int, float]]) -> None:
        """`tombstones`: the registry's (id → (revision of the removal, wall time)), read, never written."""
        self.tombstones = tombstones
        self.enabled = False
        self.on_added: Callable[[], None] | None = None
        self._pending: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def travel(self, on_added: Callable[[], None]) -> None:
        """In a ring: from now on a removal travels with reads until settled; `on_added` is told of each."""
        self.enabled = True
        self.on_added = on_added

    def known(self) -> dict[str, int]:
        """Every tombstone held here, settled or not: id → revision of the removal."""
        return {iid: revision for iid, (revision, _) in self.tombstones.items()}

    def added(self, instance_id: str, revision: int) -> None:
        """A tombstone was stored here."""
        if self.enabled:
            self._pending[instance_id] = revision
            if self.on_added is not None:
                self.on_added()

    def current(self) -> dict[str, int]:
        """The removals not yet settled whose tombstone is still the newest thing held here (a newer
        registration of the same id supersedes one)."""
        if not self._pending:
            return {}
        tombstones = self.tombstones
        for iid, revision in list(self._pending.items()):
            tomb = tombstones.get(iid)
            if tomb is None or tomb[0] != revision:
                del self._pending[iid]
        return dict(self._pending)

    def settled(self, done: dict[str, int]) -> None:
        """Every member of the ring holds these removals, or nothing older: they need not travel any more."""
        for iid, revision in done.items():
            if self._pending.get(iid) == revision:
                del self._pending[iid]

    def reopen(self, since_wall: float) -> int:
        """Tombstones stored since `since_wall` travel again until settled anew (a member joined the ring,
        which may hold copies they remove). Returns how many."""
        if not self.enabled:
            return 0
        reopened = 0
        for iid, (revision, at) in self.tombstones.items():
            if at >= since_wall and self._pending.get(iid) != revision:
                self._pending[iid] = revision
                reopened += 1
        if reopened and self.on_added is not None:
            self.on_added()
        return reopened
