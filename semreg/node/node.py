"""One registry node, wired: the store and its writer thread, what every node holds whole
(`semreg.knowledge.knowledge`), this node's shard (`semreg.registry.local_shard`), the coordinator over the shards
(`semreg.registry.coordinator`), and the feed of the SPARQL replica (`semreg.sparql.feed`). No HTTP here, and no
logic of its own beyond the order things start and stop in.

Store operations run on one writer thread, in submission order; reasoning runs on worker threads, so
the event loop keeps serving discovery while an ontology is being reasoned over.
"""
from __future__ import annotations

import asyncio
import logging
import ssl
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from semreg import heap, malloc
from semreg.clock import Cancellable, Clock, LoopClock
from semreg.cluster import pacemaker as pacemakers
from semreg.cluster import tls
from semreg.cluster.cluster import Cluster
from semreg.cluster.etcd_access import EtcdAccess, client_factory, read_access
from semreg.cluster.kv import KV, EtcdKV, parse_endpoints
from semreg.cluster.replica_copies import ReplicaCopies
from semreg.config import Settings
from semreg.errors import StopAsked
from semreg.knowledge.knowledge import Knowledge
from semreg.knowledge.ontologies import Published, PublishedTo, Unpublished
from semreg.registry.changelog import ChangeLog
from semreg.registry.coordinator import Coordinator
from semreg.registry.health import HealthChecker
from semreg.registry.local_shard import LocalShard
from semreg.registry.placement import Single
from semreg.registry.registry import Change
from semreg.registry.saved import Questions
from semreg.sparql.feed import ReplicaFeed
from semreg.storage.at_rest import AtRest
from semreg.storage.store import Store
from semreg.storage.warm import warm
from semreg.work.budget import Limits
from semreg.work.lag import LoopLag
from semreg.work.lane import Lane
from semreg.work.stalls import StallWatch

log = logging.getLogger("semreg.node")

TRIM_EVERY_S = 600.0  # how often a node alone forgets tombstones past their keep
RELEASE_EVERY_S = 60.0  # how often freed memory goes back to the system (`semreg.malloc`)


class Node:
    def __init__(self, settings: Settings, clock: Clock | None = None, store: Store | None = None,
                 health: HealthChecker | None = None, kv: KV | None = None) -> None:
        """`kv`: the cluster's store when `settings.etcd` is set (default etcd at those endpoints; tests pass
        a `semreg.cluster.kv.MemoryKV`)."""
        self.settings = settings
        self.clock = clock or LoopClock()
        self.store = store if store is not None else Store(settings.data_dir)
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="semreg-store")
        self._submitted = self._completed = 0
        self.store.foreground = self._writing
        # the SPARQL replica's feed; none with --no-sparql (no views kept, no copies from the other members)
        self.replica = ReplicaFeed(foreign=self.store.foreign_quads) if settings.sparql else None
        # the data directory as RDF, behind the records (none for a store in memory: nobody could read it)
        self.at_rest = AtRest(self.store, self.clock.monotonic) if self.store.path is not None else None
        if self.at_rest is not None:
            self.store.on_written = self.at_rest.records_written
        published = published_to(self.replica, self.at_rest)
        self.heap = heap.HeapSettler()
        self.lag, self.stalls, self.lane = request_work(settings)
        self.knowledge = Knowledge(self.store, self.write, published, strict_terms=settings.strict_terms,
                                   xml_depth=settings.ontology_xml_depth)
        self.shard = LocalShard(self.clock, self.store, self.write, self.submit, health, settings.node_id, self.lane)
        self.coordinator = Coordinator(self.knowledge, self.clock, Single(self.shard), self.lane)
        self.questions = Questions(self.knowledge)  # what each saved query asks, parsed once per change
        self.shard.subscribe(self.coordinator.changed)
        self.changelog = ChangeLog(epoch=int(self.clock.wall() * 1_000_000))
        self.cluster: Cluster | None = None
        if settings.etcd:  # other members follow this log; a node alone keeps no one's changes
            self.shard.subscribe(self.changelog.append)
            pacemaker = None
            if kv is None:  # etcd itself: the lease is also refreshed from a thread of its own
                endpoints, client = parse_endpoints(settings.etcd), client_factory(etcd_access(settings))
                kv = EtcdKV(endpoints, clock=self.clock, client=client)
                pacemaker = pacemakers.for_etcd(endpoints, client, settings.member_lease_ttl_s)
            self.cluster = Cluster(kv=kv, cluster=settings.cluster,
                                   node_id=settings.node_id, address=settings.advertise, replicas=settings.replicas,
                                   secret=read_secret(settings), shard=self.shard, coordinator=self.coordinator,
                                   knowledge=self.knowledge, clock=self.clock,
                                   lease_ttl_s=settings.member_lease_ttl_s, tls=peer_tls(settings),
                                   sparql=settings.sparql, pacemaker=pacemaker)
            self.coordinator.placement = self.cluster
            if self.replica is not None:  # every member's instances, in this node's SPARQL replica: the newest copy of each
                self.cluster.copies = ReplicaCopies(self._publish_view, self.replica.remove_instance)
        self.opened = False
        self._trim: Cancellable | None = None
        self._release: Cancellable | None = None
        self._joining: asyncio.Task | None = None
        self.ready = False
        self.started_at = self.clock.wall()
        self.on_stopping: list[Callable[[], None]] = []  # when asked to stop, before requests drain
        # set when the server is asked to stop (from a signal handler too: the loop may not be known yet)
        self.stop_asked = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.knowledge.on_hierarchy(lambda h, seconds: self.shard.registry.catalogue.set_hierarchy(h))
        self.knowledge.on_hierarchy(self.coordinator.hierarchy_changed)
        self.knowledge.on_hierarchy(lambda h, seconds: self._settle_heap())
        if self.replica is not None:
            self.shard.subscribe(self._feed_replica)
        else:  # the replica's feed tells the collector of what it publishes (`_publish_view`); here nothing does
            self.shard.subscribe(self._note_made)

    async def open(self) -> None:
        """Open the store, restore ontologies, closure and instances, then preload --ontology files.

        A stop asked meanwhile (`stop_asked`) gives the start-up up at the next look (between two steps, every
        16,384 records read or sorted out, between two batches put back): `opened` stays False, the records
        stay as they were, and `close` undoes what started. At a million instances the start-up takes a minute
        or more, past the grace a supervisor gives a stop before it kills."""
        self._loop = asyncio.get_running_loop()
        self.lag.start(self._loop)
        if self.stalls is not None:
            self.stalls.start()
        started = time.perf_counter()
        try:
            await self._open(started)
        except StopAsked as exc:
            log.info("start-up stopped: the server was asked to stop", extra={"step": str(exc),
                     "ms": round((time.perf_counter() - started) * 1000)})

    async def _open(self, started: float) -> None:
        # the store's tables read in order meanwhile (`semreg.storage.warm`): the records then come from memory
        warming = asyncio.ensure_future(asyncio.to_thread(warm, self.store.path)) if self.store.path else None
        dropped = await self.write(self.store.drop_derived_graphs)
        if dropped:
            log.info("dropped derived graphs an earlier version kept on disk", extra={"graphs": dropped})
        if self.replica is not None:
            self.replica.start()
        await self.knowledge.open(self.settings.ontologies)
        log.info("ontologies restored", extra={"ontologies": len(self.knowledge.ontologies),
                                               "concepts": self.knowledge.hierarchy.size,
                                               "ms": round((time.perf_counter() - started) * 1000)})
        heap.settle()  # what the ontologies' restore left, collected while the heap is still small
        if warming is not None:
            await warming
        if self.stop_asked.is_set():
            raise StopAsked("before the instance records were read")
        with heap.paused():  # a million restored objects, all kept and acyclic: frozen, never walked
            instances = await self.shard.open(self.post, self.stop_asked.is_set)
            # before the collector is back on: its first collection after a pause this long was a full one,
            # which walked every restored object for nothing (~3.5 s of the start-up at a million)
            heap.freeze()
        if self.at_rest is not None:
            self.at_rest.keep_ontologies(self.knowledge.ontologies.metas)
            self.at_rest.start()
        self.opened = True
        if self.cluster is None:
            self._trim_tombstones()
            self.ready = True
        heap.freeze()
        self.heap.settled()
        self._release_soon()
        self._release_memory()
        log.info("node open", extra={"instances": instances, "ontologies": len(self.knowledge.ontologies),
                                      "concepts": self.knowledge.hierarchy.size,
                                      "data_dir": str(self.settings.data_dir or ":memory:"),
                                      "ms": round((time.perf_counter() - started) * 1000)})

    def _trim_tombstones(self) -> None:
        """On a node alone, forget tombstones past their keep every `TRIM_EVERY_S` (in a ring, hand-off passes
        do): under steady churn they piled up in memory and in the records until a restart."""
        def trim() -> None:
            self.shard.forget_tombstones()
            self._trim = self.clock.call_at(self.clock.monotonic() + TRIM_EVERY_S, trim)
        self._trim = self.clock.call_at(self.clock.monotonic() + TRIM_EVERY_S, trim)

    def _release_memory(self) -> None:
        """Every `RELEASE_EVERY_S`, give what was freed back to the system, on a worker thread: under churn the
        arenas of the node's threads kept it, and the process grew with no plateau."""
        def release() -> None:
            self._release_soon()
            self._release = self.clock.call_at(self.clock.monotonic() + RELEASE_EVERY_S, release)
        self._release = self.clock.call_at(self.clock.monotonic() + RELEASE_EVERY_S, release)

    def start_joining(self) -> None:
        if self.cluster is not None and self._joining is None:
            self._joining = asyncio.get_running_loop().create_task(self.join())

    async def join(self) -> None:
        """Join the cluster once this node is reachable (`semreg serve` calls it once it listens): catch up
        with the ontologies and prefixes of the others, take a place on the ring, then say ready."""
        if self.cluster is None:
            return
        await self.cluster.start()
        self.ready = True
        log.info("node ready", extra={"node": self.settings.node_id, "members": len(self.cluster.ring)})

    def starting(self) -> str:
        """Why the node is not ready yet."""
        if not self.opened:
            return "the node is still opening its store or reasoning."
        if self.cluster is not None and not self.ready:
            return self.cluster.waiting or "joining the cluster."
        return ""

    def stopping(self) -> None:
        """The server was asked to stop: answer what would hold the drain up (watches, queries) now, and give
        a start-up still running up (`open`)."""
        self.stop_asked.set()
        self.coordinator.hub.release_all()
        self.coordinator.feed.release()
        self.changelog.release()
        for fn in self.on_stopping:
            fn()

    async def close(self) -> None:
        for timer in (self._trim, self._release):
            if timer is not None:
                timer.cancel()
        self.lag.stop()
        if self.stalls is not None:
            await asyncio.to_thread(self.stalls.stop)
        if self._joining is not None and not self._joining.done():
            self._joining.cancel()
        await self.coordinator.close()  # acknowledged writes still on their way to other owners
        if self.cluster is not None:
            await self.cluster.leave()  # hands its records over, then leaves the ring
        await self.shard.close()
        if self.replica is not None:
            await asyncio.to_thread(self.replica.stop)
        if self.at_rest is not None:
            await asyncio.to_thread(self.at_rest.stop)
        if self.opened and self.cluster is None and self.store.path is not None:
            await self.shard.keep()  # the last write: the next start-up reads it instead of the records
        await self.write(self.store.flush)
        self._writer.shutdown(wait=True)

    # -- plumbing the parts share --------------------------------------------------------------------
    async def write(self, fn: Callable, *args: Any) -> Any:
        """Run a store operation on the single writer thread, in submission order."""
        self._submitted += 1
        return await asyncio.get_running_loop().run_in_executor(self._writer, self._counted, fn, args)

    def submit(self, fn: Callable, *args: Any) -> None:
        """The same, for a write nobody waits for (still in order with the others)."""
        self._submitted += 1
        self._writer.submit(self._counted, fn, args).add_done_callback(_log_failure)

    def _counted(self, fn: Callable, args: tuple) -> Any:
        try:
            return fn(*args)
        finally:
            self._completed += 1  # on the writer thread only; `_submitted` on the event loop only

    def _writing(self) -> bool:
        """Whether a store operation is queued or running (the data directory's RDF waits for none)."""
        return self._submitted > self._completed

    def post(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the node's event loop, from any thread."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(fn)

    def _settle_heap(self) -> None:
        heap.settle()
        self.heap.settled()
        self._release_soon()

    def _release_soon(self) -> None:
        """Freed memory back to the system on a worker thread (`malloc_trim` walks the whole heap)."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.run_in_executor(None, malloc.release)

    def _note_made(self, changes: list[Change]) -> None:
        """Registrations made or replaced here, copies taken from other members: their objects live on, and the
        collector is told, as the SPARQL replica's feed tells it (`_publish_view`). Without it, a node serving
        no SPARQL froze nothing after its start-up, and each full collection walked every instance registered
        since with Python's lock held: seconds at a few hundred thousand, every thread of the node standing
        still, a ring member's lease lapsing."""
        made = sum(len(c.tags) + 1 for c in changes if c.membership and not c.removed)
        if made:
            self.heap.note(made)

    def _publish_view(self, view: dict[str, Any]) -> None:
        """An instance into the SPARQL replica. Each one published was just made (registered, replaced, a
        status changed, a copy from another member), with objects that live on: the collector is told."""
        self.heap.note(len(view.get("tags", ())) + 1)
        if self.replica is not None:
            self.replica.put_instance(view)

    @property
    def replica_pending(self) -> int:
        """Changes not yet handed to the SPARQL replica (0 without one)."""
        return self.replica.pending if self.replica is not None else 0

    def _feed_replica(self, changes: list[Change]) -> None:
        if self.cluster is not None:
            self.cluster.local_copies(changes)
            return
        assert self.replica is not None  # subscribed only with one
        for c in changes:
            if c.reason == "moved":
                continue  # a copy handed to its new owners: the instance itself stays
            if c.removed:
                self.replica.remove_instance(c.id)
            elif c.membership and (inst := self.shard.held(c.id)) is not None:
                # not held any more: removed by a later change of the same batch (expired, then deleted)
                self._publish_view(inst.view())


def published_to(replica: ReplicaFeed | None, at_rest: AtRest | None) -> Published:
    """Where the ontologies' graphs and the closure go: the SPARQL replica, the data directory's RDF, both or
    neither."""
    sinks: list[Published] = [sink for sink in (replica, at_rest) if sink is not None]
    if not sinks:
        return Unpublished()
    return sinks[0] if len(sinks) == 1 else PublishedTo(*sinks)


def request_work(settings: Settings) -> tuple[LoopLag, StallWatch | None, Lane]:
    """Request work kept from liveness (`semreg.work`): how late the loop runs, where it stalls, the lane."""
    lag = LoopLag(settings.shed_late_share)
    stalls = StallWatch(lambda: lag.last_beat, settings.stall_log_s) if settings.stall_log_s else None
    lane = Lane(limits(settings), time_limit_s=settings.work_time_limit_s, waiting=settings.work_queue, shed=lag.shed)
    return lag, stalls, lane


def limits(settings: Settings) -> Limits:
    """One piece of request work's budgets, from the node's flags."""
    return Limits(scored=settings.max_scored, expanded=settings.max_expanded, walked=settings.max_walked,
                  instances=settings.max_matched)


def peer_tls(settings: Settings) -> ssl.SSLContext | None:
    """What this node calls the others with when the cluster speaks TLS (`semreg.cluster.tls`)."""
    cert, key, ca = settings.cluster_tls_cert, settings.cluster_tls_key, settings.cluster_tls_ca
    if cert is None or key is None or ca is None:
        return None
    return tls.client_context(cert, key, ca)


def etcd_access(settings: Settings) -> EtcdAccess:
    return read_access(settings.etcd_ca, settings.etcd_cert, settings.etcd_key, settings.etcd_user,
                       settings.etcd_password_file)


def read_secret(settings: Settings) -> str:
    path = settings.cluster_secret_file
    return path.read_text(encoding="utf-8").strip() if path is not None else ""


def _log_failure(future: Any) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("a store write nobody waited for failed", exc_info=future.exception())
