"""Following every other member's change log: into this node's watches, and into its SPARQL replica.

- **Followers.** This node follows every other member's change log (long polls, `semreg.registry.changelog`):
  their changes recompute this node's watched topics, as local ones do, so a blocking read on any node
  wakes for a change on any owner, and only for a relevant one. A follower that reconnects, or finds
  the other node restarted, recomputes everything (it may have missed changes).
- **The SPARQL replica's copies.** Each logged change carries that member's copy of the instance; copies
  from every member, this node's own included, go into the table of the copies the replica shows
  (`semreg.cluster.replica_copies`). A follower that starts over lists what the member holds now.
- **Reading one's writes.** Before a SPARQL query is answered, this node reads every other member's
  change log as far as it went when the query arrived (`read_barrier`, `semreg.cluster.barrier`).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from semreg.clock import Clock, sleep
from semreg.cluster import wire
from semreg.cluster.barrier import ReadBarrier
from semreg.cluster.membership import LEFT, View
from semreg.cluster.placement import RingPlacement
from semreg.cluster.replica_copies import ReplicaCopies
from semreg.errors import SemregError
from semreg.registry.coordinator import Coordinator
from semreg.registry.registry import Change
from semreg.registry.removals import TOMBSTONE_KEEP_S
from semreg.registry.revisions import revision_at
from semreg.registry.shard import OwnShard, ShardUnavailable
from semreg.work.lane import Lane, paced

log = logging.getLogger("semreg.cluster")

FOLLOW_WAIT_S = 20.0
CATCH_UP_S = 2.0  # the longest a SPARQL query waits for another member's changes before it is answered
MOVED = "moved"


class Followers:
    """A follower of each other member of the ring, what they have been read into, and the read barrier."""

    def __init__(self, *, placement: RingPlacement, local: OwnShard, coordinator: Coordinator, clock: Clock,
                 lane: Lane, stopping: Callable[[], bool]) -> None:
        """`local`: this node's shard; `lane`: where a page of a member's changes is taken in."""
        self.placement = placement
        self.node_id = placement.node_id
        self.local = local
        self.lane = lane
        self.coordinator = coordinator
        self.clock = clock
        self._stopping = stopping
        self._followers: dict[str, asyncio.Task[None]] = {}
        # the SPARQL replica's copies of every member's instances (set by the node), and how far each
        # member's change log has been read into it
        self.copies: ReplicaCopies | None = None
        self._followed: dict[str, tuple[int, int]] = {}
        self._copied_from: set[str] = set()
        self._progress = asyncio.Event()
        self._barrier = ReadBarrier(self._catch_up_round)

    # -- which members are followed ------------------------------------------------------------------------
    def follow(self, member: str) -> None:
        """Follow `member`'s change log (once; not while stopping)."""
        if member not in self._followers and not self._stopping():
            self._followers[member] = asyncio.get_running_loop().create_task(self._follow(member))

    def keep(self, ring_members: tuple[str, ...], view: View) -> None:
        """Stop following the members out of the ring; forget the copies of those gone from the view."""
        for member in list(self._followers):
            if member not in ring_members:
                self._followers.pop(member).cancel()
        if self.copies is not None:  # a member that left (or was forgotten) holds no copies any more
            present = {m.id for m in view.members.values() if m.status != LEFT} | set(ring_members)
            for member in [m for m in self._copied_from if m not in present]:
                self._copied_from.discard(member)
                self.copies.forget(member)

    def tasks(self) -> list[asyncio.Task[None]]:
        return list(self._followers.values())

    def clear(self) -> None:
        self._followers.clear()

    # -- following the other nodes' changes --------------------------------------------------------------
    async def _follow(self, member: str) -> None:
        epoch: int | None = None
        cursor = 0
        backoff = 0.2
        while not self._stopping():
            peer = self.placement.peers.get(member)
            if peer is None:
                return
            try:
                # starting over: an answer at once (where its log is), not a wait for its next change, which
                # may be long in coming and would leave it suspected meanwhile
                answer = await peer.changes(epoch, cursor, FOLLOW_WAIT_S if epoch is not None else 0)
            except (ShardUnavailable, SemregError):
                self.placement.failed(member)
                await sleep(self.clock, backoff)
                backoff = min(backoff * 2, 5.0)
                epoch = None  # when it answers again, start over: changes may have been missed
                continue
            backoff = 0.2
            self.placement.answered(member)
            if answer["reset"] or epoch is None:
                epoch, cursor = int(answer["epoch"]), int(answer["cursor"])
                self.coordinator.everything_changed()
                if self.copies is not None:
                    try:  # what it holds now; the changes after `cursor` follow
                        held = await peer.instances(None, tags=True)
                    except (ShardUnavailable, SemregError):
                        self.placement.failed(member)
                        epoch = None
                        await sleep(self.clock, backoff)
                        backoff = min(backoff * 2, 5.0)
                        continue
                    self.copies.resync(member, [(m.view, m.revision, m.state_version) for m in held.items])
                    for iid, revision in held.removed.items():  # a stale copy elsewhere stays hidden
                        self.copies.removed(member, iid, revision)
                    self._copied_from.add(member)
                self._progressed(member, epoch, cursor)
                continue
            cursor = int(answer["cursor"])
            if answer["changes"]:  # a page of changes, taken in as essential work in slices (`semreg.work.lane`)
                await self.lane.run(self._take, member, answer["changes"], what="a member's changes",
                                    essential=True)
            self._progressed(member, epoch, cursor)
        self._followed.pop(member, None)

    def _take(self, member: str, changes: list[list[Any]]) -> None:
        """A page of a member's change log: its changes told to the coordinator, and their copies taken."""
        entries = [wire.logged_change_from_json(c) for c in paced(changes)]
        self.coordinator.changed([c for c, _ in entries])
        if self.copies is not None:
            self._copy(member, entries)
            self._copied_from.add(member)

    def _copy(self, member: str, entries: list[tuple[Change, wire.Copy | None]]) -> None:
        """A member's changes (another's, or this node's own), into the table of copies the SPARQL replica
        shows: a copy handed on, an instance removed, or the member's copy as it is now."""
        copies = self.copies
        assert copies is not None
        for c, copy in paced(entries):
            if c.reason == MOVED:
                copies.let_go(member, c.id)
            elif c.removed:  # at the removal's revision, newer than any copy it removed
                copies.removed(member, c.id, c.revision)
            elif copy is not None:
                copies.put(member, *copy)
        copies.forget_removed(revision_at(self.clock.wall() - TOMBSTONE_KEEP_S))

    def local_copies(self, changes: list[Change]) -> None:
        """This node's own changes, into the same table."""
        if self.copies is None:
            return

        def copy_of(c: Change) -> wire.Copy | None:
            inst = self.local.held(c.id) if c.membership and not c.removed else None
            return None if inst is None else (inst.view(), inst.revision, inst.state_version)
        self._copy(self.node_id, [(c, copy_of(c)) for c in changes])

    def local_removals(self, tombstones: dict[str, int]) -> None:
        """This node's tombstones (id → revision, as it starts), into the same table: a stale copy another
        member lists never shows an instance removed here."""
        if self.copies is not None:
            for iid, revision in tombstones.items():
                self.copies.removed(self.node_id, iid, revision)

    def _progressed(self, member: str, epoch: int, cursor: int) -> None:
        self._followed[member] = (epoch, cursor)
        progress, self._progress = self._progress, asyncio.Event()
        progress.set()

    # -- reading one's writes ----------------------------------------------------------------------------
    async def read_barrier(self) -> None:
        """Return once this node has read every other member's change log as far as it went when this
        was called (or `CATCH_UP_S` passed): a write acknowledged anywhere before then is in this node's
        copies. Calls at once share a round of requests (`semreg.cluster.barrier`)."""
        await self._barrier.wait()

    async def _catch_up_round(self) -> None:
        members = [m for m in self.placement.ring.members if m != self.node_id and m not in self.placement.suspects]

        async def one(member: str) -> None:
            peer = self.placement.peers.get(member)
            if peer is None:
                return
            try:
                epoch, cursor = await peer.cursor()
            except (ShardUnavailable, SemregError):
                self.placement.failed(member)
                return
            while member in self._followers and not self._stopping():
                followed = self._followed.get(member)
                if followed is not None and followed[0] == epoch and followed[1] >= cursor:
                    return
                await self._progress.wait()

        if not members:
            return
        try:
            await asyncio.wait_for(asyncio.gather(*(one(m) for m in members)), CATCH_UP_S)
        except TimeoutError:
            behind = [m for m in members if self._followed.get(m) is None]
            log.warning("answering before every member's changes were read", extra={
                "members": members, "never_read": behind, "waited_s": CATCH_UP_S})
