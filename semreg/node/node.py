"""One registry node, wired: its parts, and the services they run as, in the order they start (docs/design/architecture.md,
Services). What a node was started without (`--no-sparql`, no `--etcd`, no `--dns`, a store in
memory) is not in the list.

Store operations run on one writer thread, in submission order; reasoning runs on worker threads, so the event
loop keeps serving discovery while an ontology is being reasoned over.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator

from starlette.applications import Starlette

from semreg.clock import Clock, LoopClock
from semreg.cluster.cluster import Cluster
from semreg.cluster.kv import KV
from semreg.config import Settings
from semreg.consul.app import consul_app
from semreg.errors import StopAsked
from semreg.knowledge.ontologies import Published
from semreg.node.at_rest import RdfWriter
from semreg.node.edge import Parts, edge
from semreg.node.knowledge import KnowledgeService
from semreg.node.listeners import HttpListener, consul, dns_server, node_to_node, public
from semreg.node.memory import Memory
from semreg.node.registry import RegistryService, tombstone_trim
from semreg.node.replica import Replica
from semreg.node.ring import Membership, ring_of
from semreg.node.services import Basic, Manager, Service, present
from semreg.node.work import Work
from semreg.node.writer import StoreWriter
from semreg.registry.changelog import ChangeLog
from semreg.registry.coordinator import Coordinator
from semreg.registry.health import HealthChecker
from semreg.registry.local_shard import LocalShard
from semreg.registry.placement import Single
from semreg.registry.saved import Questions
from semreg.storage.store import Store

log = logging.getLogger("semreg.node")
OPENING = "the node is still opening its store or reasoning."


class Node:
    def __init__(self, settings: Settings, *, clock: Clock | None = None, store: Store | None = None,
                 health: HealthChecker | None = None, kv: KV | None = None, listen: bool = False) -> None:
        """`kv`: the cluster's store with `--etcd` (etcd at those endpoints by default; tests pass a
        `semreg.cluster.kv.MemoryKV`). `listen`: the HTTP listeners are the node's last services (`semreg serve`),
        and it joins the ring once the cluster listener listens; without, its app is served by whoever runs it (a
        test), whose lifespan starts the node, and it joins the ring at once."""
        self.settings, self.clock = settings, clock or LoopClock()
        self.stop_asked = threading.Event()  # set from a signal handler too: the loop may not be known yet
        self._started, self.opened = time.perf_counter(), False  # opened: once the start-up got past `open`
        services: list[Service] = []
        rdf = self._storage(store, services)
        self._registry(health, rdf, services)
        self._ring(kv, services)
        self._edge(listen, services)
        self.manager = Manager(services, self.clock, stop_within_s=settings.service_stop_timeout_s,
                               stop_asked=self.stop_asked.is_set)

    def _storage(self, store: Store | None, services: list[Service]) -> RdfWriter | None:
        """The loop's watches, the store, the SPARQL replica, what every node holds whole; the data directory's RDF
        writer, which starts after the registry."""
        settings = self.settings
        self.writer = StoreWriter(store if store is not None else Store(settings.data_dir))
        self.store, self.write = self.writer.store, self.writer.write
        work = Work(settings)
        self.lag, self.stalls, self.lane, self.post = work.lag, work.stalls, work.lane, work.post
        self.memory = Memory(self.clock, needs=("registry",))
        services += [*work.services(), self.writer]
        sinks: list[Published] = []
        self.replica = Replica(self.store, self.memory) if settings.sparql else None
        if self.replica is not None:  # none with --no-sparql: no views kept, no copies from the other members
            services.append(self.replica)
            sinks.append(self.replica.feed)
        rdf = RdfWriter(self.store, self.clock.monotonic, lambda: self.knowledge.ontologies.metas) \
            if self.store.path is not None else None  # none for a store in memory: nobody could read it
        self.at_rest = rdf.at_rest if rdf is not None else None
        sinks += [self.at_rest] if self.at_rest is not None else []
        knowledge = KnowledgeService(settings, self.writer, sinks, needs=present(services, "store", "replica"),
                                     since=self._ms)
        self.knowledge = knowledge.knowledge
        services.append(knowledge)
        return rdf

    def _registry(self, health: HealthChecker | None, rdf: RdfWriter | None, services: list[Service]) -> None:
        self.shard = LocalShard(self.clock, self.store, self.write, self.writer.submit, health, self.settings.node_id,
                                self.lane)
        self.coordinator = Coordinator(self.knowledge, self.clock, Single(self.shard), self.lane)
        self.questions = Questions(self.knowledge)  # what each saved query asks, parsed once per change
        self.shard.subscribe(self.coordinator.changed)
        self.changelog = ChangeLog(epoch=int(self.clock.wall() * 1_000_000))
        self.registry = RegistryService(self.shard, self.coordinator, self.writer, stop_asked=self.stop_asked,
                                        post=self.post, needs=("store", "knowledge"),
                                        keep_at_stop=not self.settings.etcd and self.store.path is not None)
        services.append(self.registry)
        if rdf is not None:
            services.append(rdf)

    def _ring(self, kv: KV | None, services: list[Service]) -> None:
        """In a ring, the cluster (membership starts later, with the edge); alone, the tombstones' trim. Then what
        the registry's changes reach, and the memory kept out of the way once the registry is restored."""
        self.cluster: Cluster | None = None
        if self.settings.etcd:  # other members follow this log; a node alone keeps no one's changes
            self.shard.subscribe(self.changelog.append)
            self.cluster = ring_of(self.settings, self.clock, kv, self.shard, self.coordinator, self.knowledge, self.lane)
            self.coordinator.placement = self.cluster
        else:
            services.append(tombstone_trim(self.shard, self.clock))
        self.knowledge.on_hierarchy(lambda h, seconds: self.shard.registry.catalogue.set_hierarchy(h))
        self.knowledge.on_hierarchy(self.coordinator.hierarchy_changed)
        self.knowledge.on_hierarchy(lambda h, seconds: self.memory.settle())
        if self.replica is not None:
            self.replica.show(self.shard, self.cluster)
        else:  # the replica tells the collector of what it publishes; here nothing does
            self.shard.subscribe(self.memory.note_made)
        services += [self.memory, Basic("open", self._opened, needs=("registry", "memory"))]

    def _edge(self, listen: bool, services: list[Service]) -> None:
        """The HTTP edge and its services, DNS, membership, the Consul app, and (with `listen`) the listeners."""
        settings = self.settings
        self.dns = dns_server(settings, self.coordinator, self.knowledge, self.questions, self.clock) \
            if settings.dns else None
        parts = Parts(settings=settings, clock=self.clock, knowledge=self.knowledge, coordinator=self.coordinator,
                      questions=self.questions, shard=self.shard, changelog=self.changelog, lane=self.lane, lag=self.lag,
                      stalls=self.stalls, cluster=self.cluster, replica=self.replica, at_rest=self.at_rest, dns=self.dns,
                      ready=lambda: self.ready, starting=self.starting)
        self.edge = edge(parts, self._lifespan)
        self.app, self.cluster_app = self.edge.app, self.edge.cluster_app
        # the Consul-compatible API reads and writes this node's registry through the edge's own state
        self.consul_app: Starlette | None = consul_app(self.edge.state) if settings.consul_listen else None
        services += self.edge.services
        if self.dns is not None:
            services.append(Basic("dns", self.dns.start, self.dns.stop, needs=("registry", "knowledge")))
        if self.cluster is not None and listen:  # on the ring only once it listens: peers call members they see
            services.append(node_to_node(self.cluster_app, settings, needs=("registry", "knowledge")))
        if self.cluster is not None:
            services.append(Membership(self.cluster, self.coordinator,
                                       needs=present(services, "registry", "cluster listener")))
        if self.consul_app is not None and listen:
            services.append(consul(self.consul_app, settings, needs=("registry", "knowledge")))
        # the public port opens last and closes first: requests drain before the node leaves the ring
        self.public: HttpListener | None = None
        if listen:
            self.public = public(self.app, settings, self.edge.pool, needs=tuple(s.name for s in services))
            services.append(self.public)

    async def start(self) -> bool:
        """Start the services in order. False when a stop asked meanwhile gave the start-up up (`stop_asked`; at a
        million instances it takes a minute or more, past the grace a supervisor gives a stop before it kills): the
        records stay as they were, and `stop()` stops what started."""
        self._started = time.perf_counter()
        try:
            await self.manager.start()
        except StopAsked as exc:
            log.info("start-up stopped: the server was asked to stop", extra={"step": str(exc), "ms": self._ms()})
            return False
        return True

    async def stop(self) -> None:
        await self.manager.stop()
        log.info("node stopped")

    def stopping(self) -> None:
        """The node was asked to stop: answer what would hold the drain up (watches, queries) now, and give a
        start-up still running up."""
        self.stop_asked.set()
        self.coordinator.hub.release_all()
        self.coordinator.feed.release()
        self.changelog.release()
        self.edge.stopping()

    @property
    def ready(self) -> bool:
        return self.manager.ready()

    def starting(self) -> str:
        """Why the node is not ready yet."""
        return self.manager.waiting(OPENING)

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        """The app's life when it is served on its own (a test's server): the node's."""
        try:
            await self.start()
            yield
        finally:
            await self.stop()

    def _opened(self) -> None:
        self.opened = True
        log.info("node open", extra={"instances": self.registry.instances, "ontologies": len(self.knowledge.ontologies),
                                      "concepts": self.knowledge.hierarchy.size,
                                      "data_dir": str(self.settings.data_dir or ":memory:"), "ms": self._ms()})

    def _ms(self) -> int:
        return round((time.perf_counter() - self._started) * 1000)

