"""Which copy of each instance the SPARQL replica shows, when copies come from every node of a ring.

In a cluster every node's replica holds the whole registry graph, not only the records its shard owns:
each node follows every other node's change log (`semreg.cluster.followers`), and each logged change of an
instance carries that node's copy of it. Copies of one instance arrive from each of its owners, in any
order, late or twice; this table keeps, per instance, the newest copy seen (by revision, then state
version, as `semreg.registry.discovery.newest` orders copies) and which members hold it, and tells the replica
feed when what it should show changes:

- a copy newer than the one shown replaces it;
- a removal (deregistered, deleted) at a revision at least the shown one's removes the instance and
  leaves a tombstone of that revision (a logged removal says the removal's revision, newer than any copy
  it removed), so a late copy of the removed registration never brings it back; the members that said
  the removal are kept with it;
- a copy at or below the tombstone from a member that said the removal is that member's again: it let
  go of its tombstone (a removal not acknowledged, which the other owners never took: the member took
  their live copies back). Once no member that said the removal holds it any more, the copy shows;
- a member letting go of a copy it no longer owns (`moved`, handed to the new owners) only stops holding
  it: the instance stays while any member holds it;
- a member resynchronised whole (its follower reconnected, or it restarted) holds exactly what it listed;
  what nobody holds any more leaves the replica (changes missed while no owner could be followed);
- a member forgotten (it left the ring) holds nothing;
- a removal is remembered as long as the members' own tombstones are (`forget_removed`, with the revision
  of the oldest removal still kept): past it no copy of the removed registration can come any more, and
  the table does not grow with every id ever removed.

Pure: no I/O, no clock; `show(view)` and `hide(id)` are the replica feed's `put_instance` and
`remove_instance`.

A member serving SPARQL in a ring keeps an entry for every instance of the ring, so an entry is small: the
members holding a copy are one of the few combinations of members there are, each kept once and shared
(`_Holders`, as are the members that said a removal; a set of its own per entry was ~216 bytes of ~380),
and the shown copy's revision and state version are two slots rather than a tuple.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

View = dict[str, Any]
Key = tuple[int, int]  # (revision, state version)
NOBODY: frozenset[str] = frozenset()


class _Holders:
    """Each combination of members once: `with_(holders, member)` and `without(holders, member)` return the
    shared frozenset for the result (a ring of n members has at most 2^n, and in practice its owner sets)."""

    def __init__(self) -> None:
        self._sets: dict[frozenset[str], frozenset[str]] = {NOBODY: NOBODY}

    def with_(self, holders: frozenset[str], member: str) -> frozenset[str]:
        return holders if member in holders else self._shared(holders | {member})

    def without(self, holders: frozenset[str], member: str) -> frozenset[str]:
        return self._shared(holders - {member}) if member in holders else holders

    def _shared(self, holders: frozenset[str]) -> frozenset[str]:
        return self._sets.setdefault(holders, holders)

    def __len__(self) -> int:
        return len(self._sets)


class _Entry:
    __slots__ = ("revision", "state_version", "holders", "shown", "tombstone", "removers")

    def __init__(self) -> None:
        self.revision = -1  # the shown copy's (revision, state version): its key
        self.state_version = -1
        self.holders = NOBODY  # shared (`_Holders`)
        self.shown = False
        self.tombstone = -1  # the revision of the newest removal seen
        # the members that said that removal and still hold it (shared while empty: one per instance shown)
        self.removers = NOBODY

    @property
    def key(self) -> Key:
        return self.revision, self.state_version


class ReplicaCopies:
    def __init__(self, show: Callable[[View], Any], hide: Callable[[str], Any]) -> None:
        self._show = show
        self._hide = hide
        self._entries: dict[str, _Entry] = {}
        self._holders = _Holders()
        self._removals: deque[tuple[int, str]] = deque()  # (tombstone, id) as set, about in time order

    def shown(self) -> dict[str, Key]:
        """Every instance shown, with the key of its copy (for tests and the operator's eyes)."""
        return {iid: e.key for iid, e in self._entries.items() if e.shown}

    def put(self, member: str, view: View, revision: int, state_version: int) -> None:
        """`member` holds this copy of the instance."""
        iid = view["id"]
        entry = self._entries.get(iid)
        if entry is None:
            entry = self._entries[iid] = _Entry()
        if revision <= entry.tombstone:
            if member not in entry.removers:
                return  # a copy of a registration removed since
            # the member let go of its tombstone and holds the copy again
            entry.removers = self._holders.without(entry.removers, member)
            if entry.removers:
                return  # another member still holds the removal
            entry.tombstone = -1
        entry.holders = self._holders.with_(entry.holders, member)
        if entry.shown and (revision, state_version) <= (entry.revision, entry.state_version):
            return
        entry.revision, entry.state_version = revision, state_version
        entry.shown = True
        self._show(view)

    def removed(self, member: str, instance_id: str, revision: int) -> None:
        """The instance was removed (deregistered, or deleted past its deregister_after) at `revision`."""
        entry = self._entries.get(instance_id)
        if entry is None:
            entry = self._entries[instance_id] = _Entry()
        if revision < entry.revision:
            return  # a removal older than a registration seen since
        if revision > entry.tombstone:
            entry.tombstone, entry.removers = revision, self._holders.with_(NOBODY, member)
            self._removals.append((revision, instance_id))
        elif revision == entry.tombstone:
            entry.removers = self._holders.with_(entry.removers, member)
        entry.holders = self._holders.without(entry.holders, member)  # the others hold theirs until they say otherwise
        self._drop(instance_id, entry)

    def let_go(self, member: str, instance_id: str) -> None:
        """`member` no longer holds a copy (it handed it to the new owners of the instance)."""
        entry = self._entries.get(instance_id)
        if entry is None:
            return
        entry.holders = self._holders.without(entry.holders, member)
        if not entry.holders:
            self._drop(instance_id, entry)

    def resync(self, member: str, copies: Iterable[tuple[View, int, int]]) -> None:
        """Everything `member` holds now, as (view, revision, state version): it holds nothing else."""
        listed: set[str] = set()
        for view, revision, state_version in copies:
            listed.add(view["id"])
            self.put(member, view, revision, state_version)
        for iid, entry in list(self._entries.items()):
            if member in entry.holders and iid not in listed:
                self.let_go(member, iid)

    def forget(self, member: str) -> None:
        """`member` is no longer in the cluster: it holds nothing."""
        for iid, entry in list(self._entries.items()):
            if member in entry.holders:
                self.let_go(member, iid)

    def forget_removed(self, before: int) -> int:
        """Forget the removals older than revision `before` (the members forget their tombstones at the same
        age); how many entries went (those of instances nobody holds). Amortised: each removal is looked at once, in
        the order the removals came."""
        gone = 0
        removals = self._removals
        while removals and removals[0][0] < before:
            tombstone, iid = removals.popleft()
            entry = self._entries.get(iid)
            if entry is None or entry.tombstone != tombstone:
                continue  # removed again since, or its removal let go of
            if entry.holders or entry.shown:  # as a member's store, forgetting: its stale copies count again
                entry.tombstone, entry.removers = -1, NOBODY
            else:
                del self._entries[iid]
                gone += 1
        return gone

    def _drop(self, instance_id: str, entry: _Entry) -> None:
        if entry.shown:
            entry.shown = False
            self._hide(instance_id)
        if entry.tombstone < 0 and not entry.holders:
            del self._entries[instance_id]
