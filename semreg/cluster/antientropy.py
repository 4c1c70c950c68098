"""Hand-off and anti-entropy: every record this node holds, on every one of its owners.

After every ring change, and every `SYNC_INTERVAL_S`, this node compares what it holds with what each
owner of it holds (revisions, tombstones included), sends what they lack or hold older, and lets go of
what it no longer owns once its owners have it. Arcs whose digests agree (`semreg.cluster.digests`) are
not compared record by record (`semreg.registry.digests`). Counters of records moved and repaired are in
`/metrics`. Every shard is asked through the `semreg.registry.shard.Shard` interface, this node's own too.

Before this node is on the ring again (starting, or back from a pause past its lease), it takes from
every other member what they hold newer (`repair`); a graceful leave hands every record to its owners
without this node (`sync` over that ring).

Removals are settled apart, and soon (`settle`): a tombstone stored here travels with every read this
node answers (this node's `semreg.registry.removals.RecentRemovals`, handed over at wiring) until every
member of the ring is known to hold it or nothing older; a member still holding an older live copy is sent
the tombstone. So a stale copy is hidden from every read at once, and gone from every node within a pass
(`SETTLE_DELAY_S`, then `SETTLE_RETRY_S` while a member does not answer).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable

from semreg.clock import Clock
from semreg.cluster.placement import RingPlacement
from semreg.cluster.ring import Ring
from semreg.errors import SemregError
from semreg.registry import digests
from semreg.registry.removals import TOMBSTONE_KEEP_S, RecentRemovals
from semreg.registry.shard import OwnShard, Shard, ShardUnavailable

log = logging.getLogger("semreg.cluster")

SYNC_INTERVAL_S = 30.0
SYNC_BATCH = 2000
SETTLE_DELAY_S = 0.1  # a burst of removals is settled in one pass
SETTLE_RETRY_S = 1.0


class AntiEntropy:
    """The passes that bring this node's records to their owners, and what they moved."""

    def __init__(self, *, placement: RingPlacement, local: OwnShard, removals: RecentRemovals, clock: Clock,
                 degraded: Callable[[], bool], stopping: Callable[[], bool]) -> None:
        """`local`: this node's shard; `removals`: its removals not yet settled with every member."""
        self.placement = placement
        self.node_id = placement.node_id
        self.replicas = placement.replicas
        self.local = local
        self.removals = removals
        self.clock = clock
        self._degraded = degraded
        self._stopping = stopping
        self._sync_wanted = asyncio.Event()
        self._settle_wanted = asyncio.Event()
        self.moved = 0
        self.settled = 0  # stale live copies found on a member and replaced by their tombstone
        self.repaired = 0
        self.dropped = 0
        self.syncs = 0

    def wanted(self) -> None:
        """Run a pass soon (the ring changed)."""
        self._sync_wanted.set()

    async def repair(self) -> None:
        """Before this node (back from a restart, or from a pause past its lease) is on the ring again:
        take from the other owners of what it holds whatever they hold newer, removals included, so that
        no stale copy here is read (a deregistered instance never comes back)."""
        held = await self.local.inventory()
        # every member, not only the owners: a removal made while owners were away sits on stand-ins
        by_member = {member: list(held) for member in self.placement.ring.members if member != self.node_id}
        taken = 0
        for member, ids in by_member.items():
            peer = self.placement.peers.get(member)
            if peer is None:
                continue
            for start in range(0, len(ids), SYNC_BATCH):
                batch = ids[start:start + SYNC_BATCH]
                try:
                    theirs = await peer.inventory(batch)
                    newer = [iid for iid in batch if abs(theirs.get(iid, 0)) > abs(held[iid])]
                    if newer:
                        taken += await self.local.restore_records(await peer.export(newer))
                except (ShardUnavailable, SemregError) as exc:
                    log.warning("could not compare records with a member", extra={"member": member,
                                                                                    "error": str(exc)[:200]})
                    break
        self.repaired += taken
        log.info("records compared before joining", extra={"held": len(held), "taken": taken})

    async def forget_if_away(self) -> int:
        """Before this node is on the ring again: if it was away longer than a removal is remembered (the
        tombstones' lifetime), forget every copy it holds. Some may be of instances removed since, whose
        tombstones the others no longer hold, and nothing could tell them from current ones; the ring holds
        every current one (on W owners at least). Returns how many were forgotten."""
        seen = await self.local.last_on_ring()
        away = self.clock.wall() - seen if seen is not None else 0.0
        if away <= TOMBSTONE_KEEP_S:
            return 0
        forgotten = await self.local.drop(list(await self.local.inventory()))
        log.warning("away longer than removals are remembered: the copies held here are forgotten, and the "
                    "ring's current ones taken instead", extra={"away_h": round(away / 3600, 1), "forgotten": forgotten})
        return forgotten

    def settle_wanted(self) -> None:
        """A tombstone was stored here: settle it soon."""
        self._settle_wanted.set()

    async def settle_loop(self) -> None:
        while not self._stopping():
            await self._settle_wanted.wait()
            self._settle_wanted.clear()
            await asyncio.sleep(SETTLE_DELAY_S)
            try:
                left = await self.settle()
            except Exception:
                log.exception("settling removals failed; trying again")
                left = 1
            if left:
                await asyncio.sleep(SETTLE_RETRY_S)
                self._settle_wanted.set()

    async def settle(self) -> int:
        """Make sure every member of the ring holds this node's recent removals or nothing older, sending
        the tombstone to any that still holds an older live copy; then they need not travel with reads any
        more. Returns how many are left unsettled (a member did not answer)."""
        pending = self.removals.current()
        if not pending:
            return 0
        ids = sorted(pending)
        ring = self.placement.ring
        for member in ring.members:
            if member == self.node_id:
                continue
            peer = self.placement.peers.get(member)
            if peer is None:
                return len(pending)
            for start in range(0, len(ids), SYNC_BATCH):
                batch = ids[start:start + SYNC_BATCH]
                try:
                    theirs = await peer.inventory(batch)
                    # an older live copy goes; an owner holding nothing takes the tombstone too, so that a
                    # hand-off still in flight cannot bring the copy back once this removal stops travelling
                    behind = [iid for iid in batch if abs(theirs.get(iid, 0)) < pending[iid]
                              and (theirs.get(iid, 0) > 0 or member in ring.owners(iid, self.replicas))]
                    if behind:
                        self.settled += await peer.restore_records(await self.local.export(behind))
                except (ShardUnavailable, SemregError) as exc:
                    log.warning("could not settle removals with a member", extra={"member": member,
                                                                                   "error": str(exc)[:200]})
                    self.placement.failed(member)
                    return len(pending)
        self.removals.settled(pending)
        return 0

    async def run(self) -> None:
        """A pass after every ring change (a burst of them, once), and every `SYNC_INTERVAL_S`."""
        while not self._stopping():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._sync_wanted.wait(), SYNC_INTERVAL_S)
            self._sync_wanted.clear()
            await asyncio.sleep(0.2)  # let a burst of ring changes settle into one pass
            try:
                if await self.sync(self.placement.ring):  # every member answered: this node was on the ring
                    self.local.on_ring()
            except Exception:
                log.exception("a hand-off pass failed; the next one will try again")
            self.local.forget_tombstones()

    async def sync(self, ring: Ring, leaving: bool = False) -> bool:
        """Give every owner (on `ring`) what it lacks of what this node holds; let go of what this node no
        longer owns once every owner of it holds it. Whether every member it had to ask answered."""
        held = await self.local.inventory()
        wanted, mine_not = await asyncio.to_thread(plan, ring, held, self.replicas, self.node_id)
        confirmed: dict[str, set[str]] = {}
        complete = True
        for member, ids in wanted.items():
            peer = self.placement.peers.get(member)
            if peer is None:
                complete = False
                continue
            confirmed.setdefault(member, set()).update(found := await self._hand_to(member, peer, ring, held, ids))
            complete = complete and len(found) == len(ids)
        let_go = await asyncio.to_thread(confirmed_elsewhere, ring, self.replicas, mine_not, confirmed)
        if let_go and (leaving or not self._degraded()):
            self.dropped += await self.local.drop(let_go, held)  # unless written since `held` was read
        self.syncs += 1
        return complete

    async def _hand_to(self, member: str, peer: Shard, ring: Ring, held: dict[str, int], ids: list[str]
                       ) -> set[str]:
        """Send `member` what it lacks or holds older of `ids`; the ids it is known to hold as this node does."""
        confirmed: set[str] = set()
        try:
            ids, same = await self._differing(peer, ring, held, ids)
        except (ShardUnavailable, SemregError) as exc:
            log.warning("hand-off to a member failed", extra={"member": member, "error": str(exc)[:200]})
            self.placement.failed(member)
            return confirmed
        confirmed.update(same)
        for start in range(0, len(ids), SYNC_BATCH):
            batch = ids[start:start + SYNC_BATCH]
            try:
                theirs = await peer.inventory(batch)
                behind = [iid for iid in batch if abs(theirs.get(iid, 0)) < abs(held[iid])]
                if behind:
                    applied = await peer.restore_records(await self.local.export(behind))
                    new = sum(1 for iid in behind if iid not in theirs)
                    self.moved += min(new, applied)
                    self.repaired += max(0, applied - new)
            except (ShardUnavailable, SemregError) as exc:
                log.warning("hand-off to a member failed", extra={"member": member, "error": str(exc)[:200]})
                self.placement.failed(member)
                break
            confirmed.update(batch)
        return confirmed

    async def _differing(self, peer: Shard, ring: Ring, held: dict[str, int], ids: list[str]
                         ) -> tuple[list[str], list[str]]:
        """Of `ids` (held here, owned by `peer` too), those in arcs whose digests differ between this node
        and `peer`, and those in arcs that agree (nothing to compare). When the peer's ring is another,
        every id is to compare."""
        if ring is not self.placement.ring:
            return ids, []
        arcs, mine = await asyncio.to_thread(digests.of_ids, ring, held, ids)
        theirs = await peer.digests(ring, sorted(arcs))
        if theirs is None:
            return ids, []
        differing: list[str] = []
        same: list[str] = []
        for arc, arc_ids in arcs.items():
            (same if theirs.get(arc) == mine.get(arc) else differing).extend(arc_ids)
        return differing, same


def plan(ring: Ring, held: Iterable[str], replicas: int, node_id: str) -> tuple[dict[str, list[str]], list[str]]:
    """For a pass (in a worker thread: a loop over every record held): the ids each other owner should
    hold, and those this node no longer owns."""
    wanted: dict[str, list[str]] = {}
    mine_not: list[str] = []
    for iid in held:
        owners = ring.owners(iid, replicas)
        for member in owners:
            if member != node_id:
                wanted.setdefault(member, []).append(iid)
        if node_id not in owners:
            mine_not.append(iid)
    return wanted, mine_not


def confirmed_elsewhere(ring: Ring, replicas: int, ids: list[str], confirmed: dict[str, set[str]]) -> list[str]:
    """Of `ids` (no longer this node's), those every owner is known to hold."""
    return [iid for iid in ids if all(iid in confirmed.get(m, ()) for m in ring.owners(iid, replicas))]
