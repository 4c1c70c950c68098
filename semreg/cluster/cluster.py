"""This node in a ring of nodes: membership in etcd, the other nodes' shards, and what keeps replicas
converging (`--etcd`). A node without it is a node alone (`semreg.registry.placement.Single`).

`Cluster` is the ring's `semreg.registry.placement.Placement` and the node's one handle on the ring. It
owns membership in etcd (`semreg.cluster.membership`) and a collaborator for each concern, wired
explicitly to the ones it needs. Of this node's insides it is handed, at wiring, its shard as the ring
drives it (`semreg.registry.shard.OwnShard`), its recent removals (`semreg.registry.removals.RecentRemovals`),
what numbers its writes (`semreg.registry.revisions.Revisions`) and the lane request work runs on; every
member's shard, its own included, is asked through the `semreg.registry.shard.Shard` interface.

- **Placement** (`semreg.cluster.placement`): the ring built from the member list, an instance's owners
  (the first `replicas` members clockwise from `mmh3(id)`), the shards a read asks, the peers.
- **Followers** (`semreg.cluster.followers`): every other member's change log, followed into this node's
  watches and into the SPARQL replica's copies, and the read barrier a SPARQL query waits on.
- **Statuses** (`semreg.cluster.statuses`): a status change on an owner, sent to the other owners.
- **Hints** (`semreg.cluster.hints`): the writes an owner missed (a write is acknowledged without
  waiting for every owner), sent to it as soon as it answers again.
- **Hand-off and anti-entropy** (`semreg.cluster.antientropy`): after every ring change, and every
  `SYNC_INTERVAL_S`, every record this node holds brought to its owners; what it no longer owns let go.
- **What every node holds whole** (`semreg.cluster.shared`): ontologies, prefixes and saved queries, published in etcd
  and applied on every node. A node starting catches up before it says it is ready.
- **etcd away.** Reads and writes go on over the last ring known; `/readyz` says `degraded`.
- **Fencing.** A node that knows its lease lapsed takes no writes until it is back on the ring
  (`check_writable`, 503). A write from another node carries the sender's view (`RingPlacement.fencing_view`):
  a node whose member list is at a newer revision, with another ring, refuses it (`admit`, 409), so no write
  is acknowledged on a ring the others moved past. `/readyz` is 503 while the membership is not running as
  it should (`trouble`).

Every view of the member list comes here first (`_on_view`): placement takes it, the followers follow the
ring's members, and a ring change recomputes every watch and asks for a hand-off pass.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Iterable
from typing import Any

from semreg.clock import Clock, sleep
from semreg.cluster.antientropy import AntiEntropy
from semreg.cluster.followers import Followers
from semreg.cluster.hints import Hints
from semreg.cluster.kv import KV, KVUnavailable
from semreg.cluster.membership import Membership, View
from semreg.cluster.pacemaker import Pacemaker
from semreg.cluster.peer import RemoteShard
from semreg.cluster.placement import RingPlacement
from semreg.cluster.replica_copies import ReplicaCopies
from semreg.cluster.ring import Ring
from semreg.cluster.shared import SharedKnowledge
from semreg.cluster.signed import SignedKV
from semreg.cluster.statuses import Statuses
from semreg.errors import Unavailable
from semreg.knowledge.queries import SavedQuery
from semreg.registry.coordinator import Coordinator
from semreg.registry.registry import Change
from semreg.registry.removals import RecentRemovals
from semreg.registry.revisions import Revisions
from semreg.registry.shard import OwnShard, Shard, ShardUnavailable, StaleRing
from semreg.work.lane import Lane

log = logging.getLogger("semreg.cluster")
# removals made this long before a member joins travel with reads again until settled with it (it compared
# what it holds with every member before joining: this covers what was removed meanwhile)
REOPEN_S = 600.0


class Cluster:
    def __init__(self, *, kv: KV, cluster: str, node_id: str, address: str, replicas: int, secret: str,
                 local: OwnShard, removals: RecentRemovals, revisions: Revisions, lane: Lane,
                 coordinator: Coordinator, knowledge: Any, clock: Clock, lease_ttl_s: int = 10,
                 tls: ssl.SSLContext | None = None, sparql: bool = True, pacemaker: Pacemaker | None = None) -> None:
        """`local`: this node's shard, `removals` its removals not yet settled with every member, `revisions`
        what numbers this node's writes, `lane` where request work runs. `sparql`: whether this node serves
        `/sparql`, as its membership key says. `pacemaker`: the lease refreshed from a thread as well
        (`semreg.cluster.pacemaker`)."""
        kv = SignedKV(kv, secret)  # a record etcd holds counts only if a holder of the secret wrote it
        self.kv = kv
        self.name = cluster
        self.node_id = node_id
        self.address = address
        self.replicas = replicas
        self.secret = secret
        self.local = local
        self.removals = removals
        self.coordinator = coordinator
        self.knowledge = knowledge
        self.clock = clock
        self.membership = Membership(kv, cluster, node_id, address, clock, lease_ttl_s=lease_ttl_s,
                                     on_view=self._on_view, before_rejoin=self.repair, sparql=sparql,
                                     pacemaker=pacemaker, on_slot=revisions.assign)
        self._stopping = False
        stopping = self._is_stopping
        self.placement = RingPlacement(membership=self.membership, node_id=node_id, replicas=replicas, secret=secret,
                                       local=local, revisions=revisions, tls=tls)
        self.followers = Followers(placement=self.placement, local=local, coordinator=coordinator, clock=clock,
                                   lane=lane, stopping=stopping)
        self.statuses = Statuses(placement=self.placement, local=local)
        self.hints = Hints(placement=self.placement, local=local, stopping=stopping)
        self.placement.on_answer = self.hints.answered
        self.anti_entropy = AntiEntropy(placement=self.placement, local=local, removals=removals, clock=clock,
                                        degraded=lambda: self.degraded, stopping=stopping)
        removals.travel(self.anti_entropy.settle_wanted)  # a removal travels with reads until every member holds it
        self.shared = SharedKnowledge(kv=kv, name=cluster, node_id=node_id, knowledge=knowledge, clock=clock,
                                      placement=self.placement, membership=self.membership, stopping=stopping)
        self._tasks: list[asyncio.Task[None]] = []
        self.waiting = "reading the member list from etcd"

    def _is_stopping(self) -> bool:
        return self._stopping

    # -- life cycle ------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Read the member list, catch up with what every node holds whole, then join the ring and keep
        everything converging. While etcd cannot be reached, keep trying (`waiting` says why)."""
        self.local.subscribe(self.statuses.local_changes)
        self.followers.local_removals(self.removals.known())
        self.removals.reopen(self.clock.wall() - REOPEN_S)
        backoff = 0.5
        while not self._stopping:
            try:
                await self.membership.observe()
                self.waiting = "catching up with the ontologies and prefixes of the cluster"
                await self.catch_up()
                self.waiting = "taking what changed meanwhile on the other owners of its records"
                await self.anti_entropy.forget_if_away()
                await self.repair()
                self.waiting = "joining the ring"
                await self.membership.join()
                break
            except KVUnavailable as exc:
                self.waiting = f"etcd cannot be reached ({str(exc)[:120]}); trying again"
                log.warning("cannot join the cluster yet: etcd cannot be reached",
                            extra={"node": self.node_id, "error": str(exc)[:200]})
                await sleep(self.clock, backoff)
                backoff = min(backoff * 2, 5.0)
        self.waiting = ""
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self.anti_entropy.run()), loop.create_task(self.shared.run()),
                       loop.create_task(self.anti_entropy.settle_loop())]
        self.anti_entropy.wanted()

    async def leave(self) -> None:
        """A graceful leave: hand every record to its owners without this node, then say goodbye."""
        self._stopping = True
        without = Ring([m for m in self.ring.members if m != self.node_id])
        if without.members:
            try:
                await asyncio.wait_for(self.anti_entropy.sync(without, leaving=True), 15.0)
            except (TimeoutError, ShardUnavailable, KVUnavailable) as exc:
                log.warning("leaving before every record was handed over", extra={"error": str(exc)[:200]})
        await self.membership.leave()
        await self.stop()

    async def stop(self) -> None:
        self._stopping = True
        await self.membership.stop()
        for task in [*self._tasks, *self.followers.tasks(), *self.statuses.tasks(), *self.hints.tasks()]:
            task.cancel()
        for task in [*self._tasks, *self.followers.tasks(), *self.hints.tasks()]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self.followers.clear()
        await self.placement.close()
        await self.kv.close()

    @property
    def degraded(self) -> bool:
        return self.membership.degraded

    @property
    def trouble(self) -> str:
        """Why this node's membership is not running as it should ('' when it is)."""
        return self.membership.trouble

    # -- fencing ---------------------------------------------------------------------------------------
    def check_writable(self) -> None:
        if self.membership.slot is None:
            raise Unavailable("this node is joining the ring: it takes writes once it holds its revision slot; "
                              "try again.", retry_after_s=1)
        if not self.membership.writable:
            raise Unavailable("this node's membership lease lapsed: it takes no writes until it is back on the "
                              "ring and has read the member list; try again.", retry_after_s=1)

    def admit(self, sender: Any) -> None:
        """A write from another node, whose view is `sender` ([revision, checksum], None from a node that
        sends none): refused while this node may not take writes, and when this node's member list is newer
        with another ring. A sender ahead of this node makes it read the member list at once."""
        self.check_writable()
        if not sender:
            return
        revision, checksum = int(sender[0]), int(sender[1])
        if checksum == self.ring.checksum:
            return
        if revision < self.view.revision:
            raise StaleRing(f"the sender's ring (checksum {checksum}, member list at etcd revision {revision}) is "
                            f"one this node moved past (checksum {self.ring.checksum}, revision "
                            f"{self.view.revision}): the sender reads the member list again; try again.")
        if revision > self.view.revision:
            self.membership.refresh()

    # -- the ring ----------------------------------------------------------------------------------------
    def _on_view(self, view: View) -> None:
        before = set(self.ring.members)
        ring_changed = self.placement.see(view)
        if set(self.ring.members) - before:  # a member (back) on the ring may hold copies of what was removed
            self.removals.reopen(self.clock.wall() - REOPEN_S)
        for member in self.ring.members:
            if member == self.node_id:
                continue
            self.placement.connect(member, view.address(member))
            self.followers.follow(member)
        self.followers.keep(self.ring.members, view)
        if ring_changed:
            log.info("ring changed", extra={"members": list(self.ring.members), "checksum": self.ring.checksum,
                                            "revision": view.revision})
            self.local.set_primary(self.is_primary, self.ring.members)
            self.coordinator.everything_changed()
            self.anti_entropy.wanted()

    @property
    def view(self) -> View:
        return self.placement.view

    @property
    def ring(self) -> Ring:
        return self.placement.ring

    @property
    def peers(self) -> dict[str, RemoteShard]:
        return self.placement.peers

    def is_primary(self, instance_id: str) -> bool:
        return self.placement.is_primary(instance_id)

    # -- placement (semreg.registry.placement.Placement) ----------------------------------------------------------
    @property
    def here(self) -> str:
        return self.node_id

    def owners(self, instance_id: str, avoid: frozenset[str] = frozenset()) -> list[tuple[str, Shard]]:
        return self.placement.owners(instance_id, avoid)

    def accountable(self, instance_id: str) -> list[tuple[str, Shard | None]]:
        return self.placement.accountable(instance_id)

    def needed(self, instance_id: str) -> int:
        return self.placement.needed(instance_id)

    def readers(self) -> list[tuple[str, Shard]]:
        return self.placement.readers()

    def members(self) -> list[tuple[str, Shard]]:
        return self.placement.members()

    def failed(self, member: str) -> None:
        self.placement.failed(member)

    def answered(self, member: str) -> None:
        self.placement.answered(member)

    def hint(self, member: str, ids: list[str]) -> None:
        self.hints.keep(member, ids)

    def missing(self, failed: Iterable[str]) -> list[str]:
        return self.placement.missing(failed)

    def next_revision(self) -> int:
        return self.placement.next_revision()

    # -- followers: the SPARQL replica's copies, reading one's writes ------------------------------------------
    @property
    def copies(self) -> ReplicaCopies | None:
        """The SPARQL replica's copies of every member's instances (set by the node)."""
        return self.followers.copies

    @copies.setter
    def copies(self, copies: ReplicaCopies | None) -> None:
        self.followers.copies = copies

    def local_copies(self, changes: list[Change]) -> None:
        self.followers.local_copies(changes)

    async def read_barrier(self) -> None:
        await self.followers.read_barrier()

    # -- hand-off and anti-entropy -----------------------------------------------------------------------
    async def repair(self) -> None:
        await self.anti_entropy.repair()

    @property
    def moved(self) -> int:
        return self.anti_entropy.moved

    @property
    def repaired(self) -> int:
        return self.anti_entropy.repaired

    @property
    def dropped(self) -> int:
        return self.anti_entropy.dropped

    @property
    def syncs(self) -> int:
        return self.anti_entropy.syncs

    @property
    def settled(self) -> int:
        return self.anti_entropy.settled

    # -- what every node holds whole ----------------------------------------------------------------------
    async def catch_up(self) -> None:
        await self.shared.catch_up()

    @property
    def caught_up(self) -> bool:
        return self.shared.caught_up

    async def publish_ontology(self, name: str, sha: str | None, media_type: str = "", wait: bool = True
                               ) -> dict[str, list[str]]:
        return await self.shared.publish_ontology(name, sha, media_type, wait)

    async def publish_prefix(self, prefix: str, iri: str | None) -> None:
        await self.shared.publish_prefix(prefix, iri)

    async def publish_query(self, saved: SavedQuery) -> None:
        await self.shared.publish_query(saved.name, saved)

    async def publish_query_removal(self, name: str) -> None:
        await self.shared.publish_query(name, None)

    # -- what /v1/cluster shows ----------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        members = [{"id": m.id, "address": m.address, "status": m.status, "sparql": m.sparql}
                   for m in sorted(self.view.members.values(), key=lambda m: m.id)]
        return {"node": self.node_id, "members": members, "replicas": min(self.replicas, max(1, len(self.ring))),
                "checksum": self.ring.checksum, "revision": self.view.revision, "degraded": self.degraded}
