"""Hints: the writes an owner missed, brought to it as soon as it answers again.

A write is acknowledged once `min(2, k)` owners hold it (`semreg.registry.quorum`); a send to another
owner that failed, or was still on its way past its timeout, or was called off, leaves a hint here: the
member, and the instance ids. When that member next answers this node (any request: `answered`), every
hinted record it still owns is sent to it as the newest copy at hand (this node's own, else another
owner's), through `restore_records`, which keeps only what is newer than what the member holds. A
tombstone goes the same way as an instance.

Hints live in memory and are bounded (`MAX_HINTS` ids a member): a hint lost (too many, this node
restarted, every other owner away) is what anti-entropy's next pass (`semreg.cluster.antientropy`)
repairs.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from semreg.cluster.placement import RingPlacement
from semreg.errors import SemregError
from semreg.registry.shard import Record, Shard, ShardUnavailable

log = logging.getLogger("semreg.cluster")

MAX_HINTS = 50_000  # ids held for one member
BATCH = 2000  # records a request


class Hints:
    """The ids each member missed, and the deliveries under way."""

    def __init__(self, *, placement: RingPlacement, local: Shard, stopping: Callable[[], bool]) -> None:
        """`local`: this node's shard, whose copies are sent first."""
        self.placement = placement
        self.local = local
        self._stopping = stopping
        self._held: dict[str, set[str]] = {}
        self._delivering: dict[str, asyncio.Task[None]] = {}
        self.kept = 0
        self.delivered = 0
        self.dropped = 0

    def held(self, member: str) -> set[str]:
        return set(self._held.get(member, ()))

    def keep(self, member: str, ids: list[str]) -> None:
        """`member` missed the writes of these records."""
        if member == self.placement.node_id or self._stopping():
            return
        held = self._held.setdefault(member, set())
        new = [i for i in dict.fromkeys(ids) if i not in held]
        room = max(0, MAX_HINTS - len(held))
        if len(new) > room:
            self.dropped += len(new) - room
            log.warning("too many hints for a member: anti-entropy will bring it the rest",
                        extra={"member": member, "dropped": len(new) - room})
            new = new[:room]
        held.update(new)
        self.kept += len(new)

    def answered(self, member: str) -> None:
        """`member` answered this node: deliver what it missed (once at a time)."""
        if member in self._held and member not in self._delivering and not self._stopping():
            self._delivering[member] = asyncio.get_running_loop().create_task(self._deliver(member))

    def tasks(self) -> list[asyncio.Task[None]]:
        return list(self._delivering.values())

    async def _deliver(self, member: str) -> None:
        try:
            while (ids := self._held.pop(member, None)) and not self._stopping():
                try:
                    self.delivered += await self._push(member, sorted(ids))
                except ShardUnavailable as exc:
                    self.keep(member, list(ids))  # for its next answer
                    self.placement.failed(member)
                    log.warning("hints not delivered: the member did not answer",
                                extra={"member": member, "error": str(exc)[:200]})
                    return
                except SemregError as exc:
                    self.dropped += len(ids)
                    log.warning("hints refused by the member: anti-entropy will bring it the records",
                                extra={"member": member, "error": str(exc)[:200]})
                    return
        finally:
            self._delivering.pop(member, None)

    async def _push(self, member: str, ids: list[str]) -> int:
        """Send `member` the newest copies at hand of the hinted records it still owns; how many it took."""
        peer = self.placement.peers.get(member)
        if peer is None:
            return 0  # gone from the view: its records are handed over by anti-entropy
        ring = self.placement.ring
        k = min(self.placement.replicas, len(ring))
        owned = [i for i in ids if member in ring.owners(i, k)]
        items = await self.local.export(owned)
        have = {rec["id"] for rec, _ in items}
        items += await self._from_owners(member, [i for i in owned if i not in have])
        applied = 0
        for start in range(0, len(items), BATCH):
            applied += await peer.restore_records(items[start:start + BATCH])
        return applied

    async def _from_owners(self, member: str, ids: list[str]) -> list[Record]:
        """The copies the other owners hold of records this node does not (it coordinated their writes
        without owning them), each from the first owner that has it."""
        ring = self.placement.ring
        k = min(self.placement.replicas, len(ring))
        by_owner: dict[str, list[str]] = {}
        for iid in ids:
            for owner in ring.owners(iid, k):
                if owner not in (member, self.placement.node_id):
                    by_owner.setdefault(owner, []).append(iid)
        found: dict[str, Record] = {}
        for owner, wanted in by_owner.items():
            peer = self.placement.peers.get(owner)
            wanted = [i for i in wanted if i not in found]
            if peer is None or not wanted:
                continue
            try:
                for rec, revision in await peer.export(wanted):
                    found.setdefault(rec["id"], (rec, revision))
            except (ShardUnavailable, SemregError) as exc:
                self.placement.failed(owner)
                log.warning("could not read the copies a hint needs from an owner",
                            extra={"owner": owner, "error": str(exc)[:200]})
        return list(found.values())
