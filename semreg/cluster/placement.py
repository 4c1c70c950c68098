"""Placement over the ring: where an instance lives, and which shards a read asks, on the membership view.

The ring is built from the member list in etcd (`semreg.cluster.membership`): an instance's owners are the
first `replicas` members clockwise from `mmh3(id)` (capped at the member count), and the first of them runs
its lease and checks. A read asks every member once. Members this node cannot reach are suspects
(`failed`, `answered`): writes pass over them for stand-ins, reads leave them out while others cover their
records. This node reaches every other member through a `RemoteShard`, kept at the address the view lists;
its own shard is the one in this process. Both are a `semreg.registry.shard.Shard`.

`semreg.cluster.cluster.Cluster` is the `semreg.registry.placement.Placement` the coordinator uses; it answers
with this.
"""
from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Iterable

from semreg.cluster.membership import FAULTY, Membership, View
from semreg.cluster.peer import RemoteShard
from semreg.cluster.ring import Ring
from semreg.registry.revisions import Revisions
from semreg.registry.shard import Shard


class RingPlacement:
    """The view and ring this node places over, and a shard for every member (its own, or a peer's)."""

    def __init__(self, *, membership: Membership, node_id: str, replicas: int, secret: str, local: Shard,
                 revisions: Revisions, tls: ssl.SSLContext | None = None) -> None:
        """`local`: this node's own shard; `revisions`: what this node numbers its writes with."""
        self.membership = membership
        self.node_id = node_id
        self.replicas = replicas
        self.secret = secret
        self.tls = tls  # what peers are called with over https (--cluster-tls-*)
        self.local = local
        self.revisions = revisions
        self.peers: dict[str, RemoteShard] = {}
        self.view = View()
        self.ring = Ring([node_id])
        self._missing_cache: dict[tuple[int, frozenset[str]], list[str]] = {}
        self._with_faulty: dict[tuple[int, frozenset[str]], Ring] = {}
        self.on_answer: Callable[[str], None] | None = None  # a member answered (hints are delivered then)

    # -- the view ----------------------------------------------------------------------------------------
    def see(self, view: View) -> bool:
        """Place over `view` from now on (over the last ring known while it lists nobody); whether the
        ring changed."""
        ring_changed = view.ring.members != self.ring.members
        self.view = view
        if view.ring.members:
            self.ring = view.ring
        if ring_changed:
            self._missing_cache.clear()
            self._with_faulty.clear()
        return ring_changed

    def connect(self, member: str, address: str | None) -> None:
        """Reach `member` at `address` (a peer at another address is closed and replaced)."""
        peer = self.peers.get(member)
        if address and (peer is None or peer.address != address.rstrip("/")):
            if peer is not None:
                asyncio.get_running_loop().create_task(peer.close())
            self.peers[member] = RemoteShard(member, address, self.secret, view=self.fencing_view,
                                             on_stale=self.membership.refresh, tls=self.tls)

    def fencing_view(self) -> tuple[int, int]:
        """What a write to another member carries: the revision of the member list placed over, and the
        ring's checksum (a member at a newer revision with another ring refuses it)."""
        return self.view.revision, self.ring.checksum

    async def close(self) -> None:
        for peer in self.peers.values():
            await peer.close()
        self.peers.clear()

    @property
    def suspects(self) -> frozenset[str]:
        return self.membership.suspects

    # -- placement (semreg.registry.placement.Placement) ----------------------------------------------------
    @property
    def here(self) -> str:
        return self.node_id

    def is_primary(self, instance_id: str) -> bool:
        owners = self.ring.owners(instance_id, 1)
        return not owners or owners[0] == self.node_id

    def shard_of(self, member: str) -> Shard | None:
        return self.local if member == self.node_id else self.peers.get(member)

    def owners(self, instance_id: str, avoid: frozenset[str] = frozenset()) -> list[tuple[str, Shard]]:
        """The instance's owners; members in `avoid`, and suspects, are passed over for the next members
        clockwise (a stand-in holds the copy until anti-entropy hands it to the owner back on its feet)."""
        k = min(self.replicas, len(self.ring))
        skip = avoid | self.membership.suspects if avoid or self.membership.suspects else avoid
        if not skip:
            members = self.ring.owners(instance_id, k)
        else:
            members = [m for m in self.ring.owners(instance_id, len(self.ring)) if m not in skip][:k]
        return [(m, s) for m in members if (s := self.shard_of(m)) is not None]

    def accountable(self, instance_id: str) -> list[tuple[str, Shard | None]]:
        """The instance's owners whose word counts, none passed over: on the ring with the members whose lease
        lapsed (listed `faulty` until they come back or are forgotten) in their places, these without a shard
        (they are not asked). A read of it is whole once one of them answered."""
        faulty = self._faulty()
        ring = self._ring_with(faulty)
        return [(m, None if m in faulty else self.shard_of(m)) for m in ring.owners(instance_id, min(self.replicas, len(ring)))]

    def needed(self, instance_id: str) -> int:
        return min(2, self.replicas, len(self.ring))

    def readers(self) -> list[tuple[str, Shard]]:
        """Every member once; suspects only when some of their records have no other owner to answer."""
        suspects = self.membership.suspects
        if suspects and not self.missing(suspects):
            return [(m, s) for m in self.ring.members if m not in suspects and (s := self.shard_of(m)) is not None]
        return [(m, s) for m in self.ring.members if (s := self.shard_of(m)) is not None]

    def members(self) -> list[tuple[str, Shard]]:
        """Every member once, suspects too (what each one answers for, no other member covers)."""
        return [(m, s) for m in self.ring.members if (s := self.shard_of(m)) is not None]

    def failed(self, member: str) -> None:
        self.membership.suspect(member)

    def answered(self, member: str) -> None:
        self.membership.unsuspect(member)
        if self.on_answer is not None:
            self.on_answer(member)

    def missing(self, failed: Iterable[str]) -> list[str]:
        """The members some of whose records no answer covered: every owner of an arc either failed to
        answer now, or failed earlier (its lease lapsed; it is listed `faulty` until it comes back or is
        forgotten) and nobody holds its records since. Empty when every record had an owner answer."""
        faulty = self._faulty()
        lost = frozenset(failed) | faulty
        if not lost:
            return []
        key = (self.ring.checksum, lost)
        found = self._missing_cache.get(key)
        if found is None:
            ring = self._ring_with(faulty)
            k = min(self.replicas, len(ring))
            uncovered: set[str] = set()
            for arc in ring.ranges():
                owners = ring.arc_owners(arc, k)
                if owners and all(o in lost for o in owners):
                    uncovered.update(owners)
            if len(self._missing_cache) > 64:
                self._missing_cache.clear()
            found = self._missing_cache[key] = sorted(uncovered)
        return found

    def _faulty(self) -> frozenset[str]:
        return frozenset(m.id for m in self.view.members.values() if m.status == FAULTY)

    def _ring_with(self, faulty: frozenset[str]) -> Ring:
        """The ring with the members whose lease lapsed in their places (this ring when there are none)."""
        if not faulty:
            return self.ring
        key = (self.ring.checksum, faulty)
        ring = self._with_faulty.get(key)
        if ring is None:
            if len(self._with_faulty) > 16:
                self._with_faulty.clear()
            ring = self._with_faulty[key] = Ring([*self.ring.members, *faulty])
        return ring

    def next_revision(self) -> int:
        return self.revisions.next()
