"""This node in a ring of nodes: membership in etcd, the other nodes' shards, and what keeps replicas
converging (`--etcd`). A node without it is a node alone (`semreg.registry.placement.Single`).

- **Placement.** The ring is built from the member list in etcd (`semreg.cluster.membership`): an instance's
  owners are the first `replicas` members clockwise from `mmh3(id)` (capped at the member count), and
  the first of them runs its lease and checks. A read asks every member once.
- **Followers.** This node follows every other member's change log (long polls, `semreg.registry.changelog`):
  their changes recompute this node's watched topics, as local ones do, so a blocking read on any node
  wakes for a change on any owner, and only for a relevant one. A follower that reconnects, or finds
  the other node restarted, recomputes everything (it may have missed changes).
- **Statuses.** A status change on an owner (an expiry, a check, an admin status) is sent to the other
  owners with its state version; copies keep the newest.
- **Hand-off and anti-entropy.** After every ring change, and every `SYNC_INTERVAL_S`, this node
  compares what it holds with what each owner of it holds (revisions, tombstones included), sends what
  they lack or hold older, and lets go of what it no longer owns once its owners have it. Counters of
  records moved and repaired are in `/metrics`.
- **What every node holds whole.** An ontology or prefix change through any node is stored there, then
  published in etcd; every node applies it (fetching the document from a node that has it) and says so
  in etcd, and the upload answers once every live member has (laggards named). A node starting catches
  up before it says it is ready.
- **etcd away.** Reads and writes go on over the last ring known; `/readyz` says `degraded`.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Iterable
from typing import Any

import orjson

from semreg.clock import Clock, sleep
from semreg.cluster import digests, wire
from semreg.cluster.barrier import ReadBarrier
from semreg.cluster.kv import DELETE, KV, KVUnavailable
from semreg.cluster.membership import FAULTY, LEFT, Membership, View
from semreg.cluster.peer import RemoteShard
from semreg.cluster.replica_copies import ReplicaCopies
from semreg.cluster.ring import Ring
from semreg.errors import SemregError
from semreg.registry.coordinator import Coordinator
from semreg.registry.registry import DELETED, STATUS, Change
from semreg.registry.shard import LocalShard, ShardUnavailable

log = logging.getLogger("semreg.cluster")

SYNC_INTERVAL_S = 30.0
SYNC_BATCH = 2000
FOLLOW_WAIT_S = 20.0
APPLY_WAIT_S = 30.0
CATCH_UP_S = 2.0  # the longest a SPARQL query waits for another member's changes before it is answered
MOVED = "moved"
STATUS_REASONS = frozenset({"status", "check", "expired"})


class Cluster:
    def __init__(self, *, kv: KV, cluster: str, node_id: str, address: str, replicas: int, secret: str,
                 shard: LocalShard, coordinator: Coordinator, knowledge: Any, clock: Clock,
                 lease_ttl_s: int = 10) -> None:
        self.kv = kv
        self.name = cluster
        self.node_id = node_id
        self.address = address
        self.replicas = replicas
        self.secret = secret
        self.shard = shard
        self.coordinator = coordinator
        self.knowledge = knowledge
        self.clock = clock
        self.membership = Membership(kv, cluster, node_id, address, clock, lease_ttl_s=lease_ttl_s,
                                     on_view=self._on_view, before_rejoin=self.repair)
        self.peers: dict[str, RemoteShard] = {}
        self.view = View()
        self.ring = Ring([node_id])
        self._followers: dict[str, asyncio.Task] = {}
        self._tasks: list[asyncio.Task] = []
        self._sync_wanted = asyncio.Event()
        self._states: dict[str, list[tuple[str, int, int, str, bool, bool]]] = {}
        self._states_task: asyncio.Task | None = None
        self._records: dict[str, list[str]] = {}  # member → ids whose record (or tombstone) it should take
        self.caught_up = False
        self._unpublished: dict[tuple[str, str], bytes] = {}
        self.waiting = "reading the member list from etcd"
        self.moved = 0
        self.repaired = 0
        self.dropped = 0
        self.syncs = 0
        self._stopping = False
        self._missing_cache: dict[tuple[int, frozenset[str]], list[str]] = {}
        # the SPARQL replica's copies of every member's instances (set by the node), and how far each
        # member's change log has been read into it
        self.copies: ReplicaCopies | None = None
        self._followed: dict[str, tuple[int, int]] = {}
        self._copied_from: set[str] = set()
        self._progress = asyncio.Event()
        self._barrier = ReadBarrier(self._catch_up_round)

    # -- life cycle ------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Read the member list, catch up with what every node holds whole, then join the ring and keep
        everything converging. While etcd cannot be reached, keep trying (`waiting` says why)."""
        self.shard.subscribe(self._local_changes)
        backoff = 0.5
        while not self._stopping:
            try:
                await self.membership.observe()
                self.waiting = "catching up with the ontologies and prefixes of the cluster"
                await self.catch_up()
                self.waiting = "taking what changed meanwhile on the other owners of its records"
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
        self._tasks = [loop.create_task(self._sync_loop()), loop.create_task(self._knowledge_loop())]
        self._sync_wanted.set()

    async def leave(self) -> None:
        """A graceful leave: hand every record to its owners without this node, then say goodbye."""
        self._stopping = True
        without = Ring([m for m in self.ring.members if m != self.node_id])
        if without.members:
            try:
                await asyncio.wait_for(self._sync(without, leaving=True), 15.0)
            except (TimeoutError, ShardUnavailable, KVUnavailable) as exc:
                log.warning("leaving before every record was handed over", extra={"error": str(exc)[:200]})
        await self.membership.leave()
        await self.stop()

    async def stop(self) -> None:
        self._stopping = True
        await self.membership.stop()
        for task in [*self._tasks, *self._followers.values(), *([self._states_task] if self._states_task else [])]:
            task.cancel()
        for task in [*self._tasks, *self._followers.values()]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._followers.clear()
        for peer in self.peers.values():
            await peer.close()
        self.peers.clear()
        await self.kv.close()

    @property
    def degraded(self) -> bool:
        return self.membership.degraded

    # -- the ring ----------------------------------------------------------------------------------------
    def _on_view(self, view: View) -> None:
        ring_changed = view.ring.members != self.ring.members
        self.view = view
        if view.ring.members:
            self.ring = view.ring
        for member in self.ring.members:
            if member == self.node_id:
                continue
            address = view.address(member)
            peer = self.peers.get(member)
            if address and (peer is None or peer.address != address.rstrip("/")):
                if peer is not None:
                    asyncio.get_running_loop().create_task(peer.close())
                self.peers[member] = RemoteShard(member, address, self.secret)
            if member not in self._followers and not self._stopping:
                self._followers[member] = asyncio.get_running_loop().create_task(self._follow(member))
        for member in list(self._followers):
            if member not in self.ring.members:
                self._followers.pop(member).cancel()
        if self.copies is not None:  # a member that left (or was forgotten) holds no copies any more
            present = {m.id for m in view.members.values() if m.status != LEFT} | set(self.ring.members)
            for member in [m for m in self._copied_from if m not in present]:
                self._copied_from.discard(member)
                self.copies.forget(member)
        if ring_changed:
            log.info("ring changed", extra={"members": list(self.ring.members), "checksum": self.ring.checksum,
                                            "revision": view.revision})
            self._missing_cache.clear()
            self.shard.set_primary(self.is_primary)
            self.coordinator.everything_changed()
            self._sync_wanted.set()

    def is_primary(self, instance_id: str) -> bool:
        owners = self.ring.owners(instance_id, 1)
        return not owners or owners[0] == self.node_id

    def _shard(self, member: str) -> Any:
        return self.shard if member == self.node_id else self.peers.get(member)

    # -- placement (semreg.registry.placement.Placement) ----------------------------------------------------------
    def owners(self, instance_id: str, avoid: frozenset[str] = frozenset()) -> list[tuple[str, Any]]:
        """The instance's owners; members in `avoid`, and suspects, are passed over for the next members
        clockwise (a stand-in holds the copy until anti-entropy hands it to the owner back on its feet)."""
        k = min(self.replicas, len(self.ring))
        skip = avoid | self.membership.suspects if avoid or self.membership.suspects else avoid
        if not skip:
            members = self.ring.owners(instance_id, k)
        else:
            members = [m for m in self.ring.owners(instance_id, len(self.ring)) if m not in skip][:k]
        return [(m, s) for m in members if (s := self._shard(m)) is not None]

    def needed(self, instance_id: str) -> int:
        return min(2, self.replicas, len(self.ring))

    def readers(self) -> list[tuple[str, Any]]:
        """Every member once; suspects only when some of their records have no other owner to answer."""
        suspects = self.membership.suspects
        if suspects and not self.missing(suspects):
            return [(m, s) for m in self.ring.members if m not in suspects and (s := self._shard(m)) is not None]
        return [(m, s) for m in self.ring.members if (s := self._shard(m)) is not None]

    def failed(self, member: str) -> None:
        self.membership.suspect(member)

    def answered(self, member: str) -> None:
        self.membership.unsuspect(member)

    def missing(self, failed: Iterable[str]) -> list[str]:
        """The members some of whose records no answer covered: every owner of an arc either failed to
        answer now, or failed earlier (its lease lapsed; it is listed `faulty` until it comes back or is
        forgotten) and nobody holds its records since. Empty when every record had an owner answer."""
        faulty = frozenset(m.id for m in self.view.members.values() if m.status == FAULTY)
        lost = frozenset(failed) | faulty
        if not lost:
            return []
        key = (self.ring.checksum, lost)
        found = self._missing_cache.get(key)
        if found is None:
            ring = Ring([*self.ring.members, *faulty]) if faulty else self.ring
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

    def next_revision(self) -> int:
        return self.shard.revisions.next()

    # -- following the other nodes' changes --------------------------------------------------------------
    async def _follow(self, member: str) -> None:
        epoch: int | None = None
        cursor = 0
        backoff = 0.2
        while not self._stopping:
            peer = self.peers.get(member)
            if peer is None:
                return
            try:
                answer = await peer.changes(epoch, cursor, FOLLOW_WAIT_S)
            except (ShardUnavailable, SemregError):
                self.failed(member)
                await sleep(self.clock, backoff)
                backoff = min(backoff * 2, 5.0)
                epoch = None  # when it answers again, start over: changes may have been missed
                continue
            backoff = 0.2
            self.answered(member)
            if answer["reset"] or epoch is None:
                epoch, cursor = int(answer["epoch"]), int(answer["cursor"])
                self.coordinator.everything_changed()
                if self.copies is not None:
                    try:  # what it holds now; the changes after `cursor` follow
                        held = await peer.instances(None, tags=True)
                    except (ShardUnavailable, SemregError):
                        self.failed(member)
                        epoch = None
                        continue
                    self.copies.resync(member, [(m.view, m.revision, m.state_version) for m in held])
                    self._copied_from.add(member)
                self._progressed(member, epoch, cursor)
                continue
            entries = [wire.logged_change_from_json(c) for c in answer["changes"]]
            cursor = int(answer["cursor"])
            if entries:
                self.coordinator.changed([c for c, _ in entries])
                if self.copies is not None:
                    self._copy(member, entries)
                    self._copied_from.add(member)
            self._progressed(member, epoch, cursor)
        self._followed.pop(member, None)

    def _copy(self, member: str, entries: list[tuple[Change, wire.Copy | None]]) -> None:
        """A member's changes (another's, or this node's own), into the table of copies the SPARQL replica
        shows: a copy handed on, an instance removed, or the member's copy as it is now."""
        copies = self.copies
        assert copies is not None
        for c, copy in entries:
            if c.reason == MOVED:
                copies.let_go(member, c.id)
            elif c.removed:
                copies.removed(member, c.id, c.revision)
            elif copy is not None:
                copies.put(member, *copy)

    def local_copies(self, changes: list[Change]) -> None:
        """This node's own changes, into the same table."""
        if self.copies is None:
            return

        def copy_of(c: Change) -> wire.Copy | None:
            inst = self.shard.held(c.id) if c.membership and not c.removed else None
            return None if inst is None else (inst.view(), inst.revision, inst.state_version)
        self._copy(self.node_id, [(c, copy_of(c)) for c in changes])

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
        members = [m for m in self.ring.members if m != self.node_id and m not in self.membership.suspects]

        async def one(member: str) -> None:
            peer = self.peers.get(member)
            if peer is None:
                return
            try:
                epoch, cursor = await peer.cursor()
            except (ShardUnavailable, SemregError):
                self.failed(member)
                return
            while member in self._followers and not self._stopping:
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

    # -- statuses to the other owners ----------------------------------------------------------------------
    def _local_changes(self, changes: list[Change]) -> None:
        for c in changes:
            if c.reason == DELETED and self.is_primary(c.id):
                # critical past deregister_after on the lease's owner: the other copies go too
                for member in self.ring.owners(c.id, self.replicas):
                    if member != self.node_id:
                        self._records.setdefault(member, []).append(c.id)
                continue
            if c.reason not in STATUS_REASONS or c.removed:
                continue
            inst = self.shard.registry.instances.get(c.id)
            if inst is None:
                continue
            state = LocalShard.state_of(inst)
            for member in self.ring.owners(c.id, self.replicas):
                if member != self.node_id:
                    if c.reason == STATUS:  # an admin status is written down: the record itself is newer
                        self._records.setdefault(member, []).append(c.id)
                    self._states.setdefault(member, []).append(state)
        if (self._states or self._records) and (self._states_task is None or self._states_task.done()):
            self._states_task = asyncio.get_running_loop().create_task(self._send_states())

    async def _send_states(self) -> None:
        await asyncio.sleep(0)  # gather what this turn of the loop changed (and let tombstones be written)
        records, self._records = self._records, {}
        for member, ids in records.items():
            peer = self.peers.get(member)
            exported = self.shard.export(dict.fromkeys(ids))
            if peer is None or not exported:
                continue
            try:
                await peer.restore_records(exported)
            except (ShardUnavailable, SemregError):
                self.failed(member)  # anti-entropy carries tombstones: the next pass will
        batches, self._states = self._states, {}
        for member, states in batches.items():
            peer = self.peers.get(member)
            if peer is None:
                continue
            try:
                await peer.apply_states(states)
            except (ShardUnavailable, SemregError):
                self.failed(member)  # anti-entropy does not carry statuses: the next change will

    # -- hand-off and anti-entropy -----------------------------------------------------------------------
    async def repair(self) -> None:
        """Before this node (back from a restart, or from a pause past its lease) is on the ring again:
        take from the other owners of what it holds whatever they hold newer, removals included, so that
        no stale copy here is read (a deregistered instance never comes back)."""
        held = self.shard.inventory()
        by_member: dict[str, list[str]] = {}
        for iid in held:
            for member in self.ring.owners(iid, self.replicas + 1):
                if member != self.node_id:
                    by_member.setdefault(member, []).append(iid)
        taken = 0
        for member, ids in by_member.items():
            peer = self.peers.get(member)
            if peer is None:
                continue
            for start in range(0, len(ids), SYNC_BATCH):
                batch = ids[start:start + SYNC_BATCH]
                try:
                    theirs = await peer.inventory(batch)
                    newer = [iid for iid in batch if abs(theirs.get(iid, 0)) > abs(held[iid])]
                    if newer:
                        taken += await self.shard.restore_records(await peer.export(newer))
                except (ShardUnavailable, SemregError) as exc:
                    log.warning("could not compare records with a member", extra={"member": member,
                                                                                    "error": str(exc)[:200]})
                    break
        self.repaired += taken
        log.info("records compared before joining", extra={"held": len(held), "taken": taken})

    async def _sync_loop(self) -> None:
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._sync_wanted.wait(), SYNC_INTERVAL_S)
            self._sync_wanted.clear()
            await asyncio.sleep(0.2)  # let a burst of ring changes settle into one pass
            try:
                await self._sync(self.ring)
            except Exception:
                log.exception("a hand-off pass failed; the next one will try again")
            self.shard.forget_tombstones()

    async def _sync(self, ring: Ring, leaving: bool = False) -> None:
        """Give every owner (on `ring`) what it lacks of what this node holds; let go of what this node no
        longer owns once every owner of it holds it."""
        held = self.shard.inventory()
        wanted: dict[str, list[str]] = {}
        mine_not: list[str] = []
        for iid in held:
            owners = ring.owners(iid, self.replicas)
            for member in owners:
                if member != self.node_id:
                    wanted.setdefault(member, []).append(iid)
            if self.node_id not in owners:
                mine_not.append(iid)
        confirmed: dict[str, set[str]] = {}
        for member, ids in wanted.items():
            peer = self.peers.get(member)
            if peer is None:
                continue
            try:
                ids, same = await self._differing(peer, ring, held, ids)
            except (ShardUnavailable, SemregError) as exc:
                log.warning("hand-off to a member failed", extra={"member": member, "error": str(exc)[:200]})
                self.failed(member)
                continue
            confirmed.setdefault(member, set()).update(same)
            for start in range(0, len(ids), SYNC_BATCH):
                batch = ids[start:start + SYNC_BATCH]
                try:
                    theirs = await peer.inventory(batch)
                    behind = [iid for iid in batch if abs(theirs.get(iid, 0)) < abs(held[iid])]
                    if behind:
                        applied = await peer.restore_records(self.shard.export(behind))
                        new = sum(1 for iid in behind if iid not in theirs)
                        self.moved += min(new, applied)
                        self.repaired += max(0, applied - new)
                except (ShardUnavailable, SemregError) as exc:
                    log.warning("hand-off to a member failed", extra={"member": member, "error": str(exc)[:200]})
                    self.failed(member)
                    break
                confirmed.setdefault(member, set()).update(batch)
        let_go = [iid for iid in mine_not
                  if all(iid in confirmed.get(m, ()) for m in ring.owners(iid, self.replicas))]
        if let_go and (leaving or not self.degraded):
            self.dropped += await self.shard.drop(let_go)
        self.syncs += 1

    async def _differing(self, peer: RemoteShard, ring: Ring, held: dict[str, int], ids: list[str]
                         ) -> tuple[list[str], list[str]]:
        """Of `ids` (held here, owned by `peer` too), those in arcs whose digests differ between this node
        and `peer`, and those in arcs that agree (nothing to compare). When the peer's ring is another,
        every id is to compare."""
        if ring is not self.ring:
            return ids, []
        arcs = digests.by_arc(ring, ids)
        in_arcs = {iid: held[iid] for iid in held if ring.arc_of(iid) in arcs}
        mine = digests.digests(ring, in_arcs, arcs)
        theirs = await peer.digests(ring.checksum, sorted(arcs))
        if theirs is None:
            return ids, []
        differing: list[str] = []
        same: list[str] = []
        for arc, arc_ids in arcs.items():
            (same if theirs.get(arc) == mine.get(arc) else differing).extend(arc_ids)
        return differing, same

    # -- what every node holds whole ----------------------------------------------------------------------
    def _key(self, kind: str, name: str = "") -> str:
        return f"/semreg/{self.name}/{kind}/{name}"

    async def catch_up(self) -> None:
        """Apply the ontologies and prefixes etcd lists (fetching documents from the nodes that have them)."""
        await self._republish()
        _, prefixes = await self.kv.get_prefix(self._key("prefixes"))
        for key, value in prefixes:
            await self._apply_prefix(key.rsplit("/", 1)[1], value.decode())
        _, ontologies = await self.kv.get_prefix(self._key("ontologies"))
        listed = set()
        for key, value in ontologies:
            name = key.rsplit("/", 1)[1]
            listed.add(name)
            await self._apply_ontology(name, orjson.loads(value))
        for name in list(self.knowledge.ontologies.metas):
            if name not in listed:  # removed while this node was away, or never published
                meta = self.knowledge.ontologies.metas[name]
                await self.publish_ontology(name, meta.sha256, meta.media_type, wait=False)
        self.caught_up = True

    async def _knowledge_loop(self) -> None:
        revision = 0
        while not self._stopping:
            try:
                revision, _ = await self.kv.get_prefix(self._key(""))
                async for event in self.kv.watch_prefix(f"/semreg/{self.name}/", revision + 1):
                    kind, _, name = event.key[len(f"/semreg/{self.name}/"):].partition("/")
                    if kind == "ontologies" and event.kind != DELETE:
                        await self._apply_ontology(name, orjson.loads(event.value))
                    elif kind == "prefixes" and event.kind != DELETE:
                        await self._apply_prefix(name, event.value.decode())
            except KVUnavailable:
                await sleep(self.clock, 1.0)
                with contextlib.suppress(KVUnavailable):
                    await self.catch_up()  # what changed while etcd was away
            except Exception:
                log.exception("applying a cluster-wide change failed")
                await sleep(self.clock, 1.0)

    async def _apply_ontology(self, name: str, published: dict[str, Any]) -> None:
        """An ontology as etcd lists it: a document's sha256, or `deleted` (a removal is kept as a marker,
        so that a node away meanwhile does not bring it back)."""
        ontologies = self.knowledge.ontologies
        meta = ontologies.metas.get(name)
        sha = published.get("sha256")
        if published.get("deleted"):
            if meta is not None:
                await ontologies.delete(name)
            sha = "deleted"
        elif meta is None or meta.sha256 != sha:
            body = await self._fetch(name, str(sha), published)
            if body is None:
                log.error("no member could send an ontology", extra={"ontology": name})
                return
            await ontologies.put(name, body, published.get("media_type", "text/turtle"))
        with contextlib.suppress(KVUnavailable):
            await self.kv.put(self._key("applied", f"{self.node_id}/{name}"), str(sha).encode(),
                              lease=self.membership.lease)

    async def _fetch(self, name: str, sha: str, published: dict[str, Any]) -> bytes | None:
        first = published.get("node")
        order = [first] + [m for m in self.ring.members if m != first]
        for member in order:
            peer = self.peers.get(member) if member else None
            if peer is None:
                continue
            try:
                body, _ = await peer.ontology(name)
            except (ShardUnavailable, SemregError):
                continue
            if hashlib.sha256(body).hexdigest() == sha:
                return body
        return None

    async def _apply_prefix(self, prefix: str, iri: str | None) -> None:
        """A client prefix as etcd lists it (an empty value: removed)."""
        current = self.knowledge.prefixes.explicit.get(prefix)
        if not iri:
            if current is not None:
                await self.knowledge.delete_prefix(prefix)
        elif current != iri:
            await self.knowledge.put_prefix(prefix, iri)

    async def publish_ontology(self, name: str, sha: str | None, media_type: str = "", wait: bool = True
                               ) -> dict[str, list[str]]:
        """Tell every node (through etcd) of an upload (`sha`) or a removal (None); with `wait`, until every
        live member applied it or `APPLY_WAIT_S` passed. Returns the members that did and did not. If etcd
        went away meanwhile, the change is published when it answers again (before anything is applied
        from it, so that it is not undone by the older listing)."""
        published = {"deleted": True} if sha is None else {"sha256": sha, "media_type": media_type}
        try:
            await self.kv.put(self._key("ontologies", name), orjson.dumps({**published, "node": self.node_id}))
        except KVUnavailable:
            self._unpublished[("ontologies", name)] = orjson.dumps({**published, "node": self.node_id})
            return {"applied": [self.node_id], "laggards": sorted(m for m in self.ring.members if m != self.node_id)}
        if not wait:
            return {"applied": [], "laggards": []}
        expected = sha or "deleted"
        deadline = self.clock.monotonic() + APPLY_WAIT_S
        while True:
            try:
                _, acks = await self.kv.get_prefix(self._key("applied"))
            except KVUnavailable:
                acks = []
            have = {key.rsplit("/", 2)[1] for key, value in acks
                    if key.endswith("/" + name) and value.decode() == expected}
            done = [m for m in self.ring.members if m in have]
            laggards = [m for m in self.ring.members if m not in have]
            if not laggards or self.clock.monotonic() > deadline:
                if laggards:
                    log.warning("members had not applied an ontology change when it answered",
                                extra={"ontology": name, "laggards": laggards})
                return {"applied": sorted(done), "laggards": sorted(laggards)}
            await sleep(self.clock, 0.05)

    async def publish_prefix(self, prefix: str, iri: str | None) -> None:
        """A client prefix set (or removed: None, kept as an empty value) through this node, for every node."""
        try:
            await self.kv.put(self._key("prefixes", prefix), (iri or "").encode())
        except KVUnavailable:
            self._unpublished[("prefixes", prefix)] = (iri or "").encode()

    async def _republish(self) -> None:
        """Publish what changed here while etcd could not be reached."""
        for (kind, name), value in list(self._unpublished.items()):
            await self.kv.put(self._key(kind, name), value)
            del self._unpublished[(kind, name)]

    # -- what /v1/cluster shows ----------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        members = [{"id": m.id, "address": m.address, "status": m.status}
                   for m in sorted(self.view.members.values(), key=lambda m: m.id)]
        return {"node": self.node_id, "members": members, "replicas": min(self.replicas, max(1, len(self.ring))),
                "checksum": self.ring.checksum, "revision": self.view.revision, "degraded": self.degraded}
