"""Prometheus metrics: requests by route and status, latency, instances by status, watches, checks,
routes by policy, closure rebuilds, failed authentications by address. Exposed at `GET /metrics` in the Prometheus text format."""
from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from semreg import malloc
from semreg.access.failure_report import FailureReport

LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


class Pool(Protocol):
    """What is read of the SPARQL query pool (`semreg.sparql.pool.QueryPool`)."""

    @property
    def workers(self) -> int: ...

    @property
    def busy(self) -> int: ...

    @property
    def waiting(self) -> int: ...

    @property
    def killed(self) -> int: ...

    @property
    def forked(self) -> int: ...

    @property
    def checkpoint_cuts(self) -> int | None: ...


@dataclass(frozen=True)
class Sources:
    """Where the gauges come from, read at scrape time so the hot paths keep no extra counters."""

    instances_by_status: Callable[[], dict[str, int]]
    watches: Callable[[], int]
    topics: Callable[[], int]
    tags: Callable[[], int]
    concepts: Callable[[], int]
    checks: Callable[[], tuple[int, int]]  # (run, failed)
    routes_by_policy: Callable[[], dict[str, int]]
    closure_rebuilds: Callable[[], int]
    replica_pending: Callable[[], int]
    pool: Pool | None = None
    at_rest: Any = None  # semreg.storage.at_rest.AtRest, with a data directory
    cluster: Any = None  # semreg.cluster.cluster.Cluster, in a cluster
    forward: Any = None  # semreg.cluster.sparql_forward.SparqlForward, on a ring member started with --no-sparql
    lane: Any = None  # semreg.work.lane.Lane: request work
    lag: Any = None  # semreg.work.lag.LoopLag: how late the event loop runs
    stalls: Any = None  # semreg.work.stalls.StallWatch, unless --stall-log 0
    dns: Callable[[], Any] | None = None  # the DNS server (semreg.dns.server.DnsServer) with --dns, else None
    auth_failures: tuple[FailureReport, ...] = ()  # the public port's, and the cluster listener's in a cluster


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("semreg_http_requests", "HTTP requests by route template, method and status",
                                ["route", "method", "status"], registry=self.registry)
        self.latency = Histogram("semreg_http_request_duration_seconds", "HTTP request latency by route template",
                                 ["route"], buckets=LATENCY_BUCKETS_S, registry=self.registry)
        self.closure_seconds = Histogram("semreg_closure_rebuild_seconds",
                                         "time to compute the closure and indexes after an ontology change",
                                         buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
                                         registry=self.registry)

    def attach(self, sources: Sources) -> None:
        self.registry.register(_Collector(sources))

    def observe_closure(self, seconds: float) -> None:
        self.closure_seconds.observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _Collector(Collector):
    def __init__(self, sources: Sources) -> None:
        self.sources = sources

    def collect(self) -> Iterator:
        src = self.sources
        g = GaugeMetricFamily("semreg_instances", "registered instances by status", labels=["status"])
        for status, n in src.instances_by_status().items():
            g.add_metric([status], n)
        yield g
        yield GaugeMetricFamily("semreg_watches", "blocking reads waiting for a change", value=src.watches())
        yield GaugeMetricFamily("semreg_watch_topics", "distinct queries whose results are tracked", value=src.topics())
        yield GaugeMetricFamily("semreg_tags", "distinct registered tags", value=src.tags())
        yield GaugeMetricFamily("semreg_concepts", "concepts in the reasoner's hierarchy", value=src.concepts())
        runs, failures = src.checks()
        yield CounterMetricFamily("semreg_checks", "active health checks run", value=runs)
        yield CounterMetricFamily("semreg_check_failures", "active health checks failed", value=failures)
        c = CounterMetricFamily("semreg_routes", "routes handed out by policy", labels=["policy"])
        for policy, n in sorted(src.routes_by_policy().items()):
            c.add_metric([policy], n)
        yield c
        yield CounterMetricFamily("semreg_closure_rebuilds", "closure and index rebuilds", value=src.closure_rebuilds())
        yield GaugeMetricFamily("semreg_replica_pending", "changes not yet handed to the SPARQL replica",
                                value=src.replica_pending())
        if src.at_rest is not None:
            yield GaugeMetricFamily("semreg_store_rdf_pending", "registrations and graphs whose RDF in the data "
                                    "directory is not yet written", value=src.at_rest.pending)
            yield CounterMetricFamily("semreg_store_rdf_written", "registrations written or removed as RDF in the "
                                      "data directory", value=src.at_rest.written)
            yield CounterMetricFamily("semreg_store_rdf_cpu_seconds", "CPU seconds the thread writing the data "
                                      "directory's RDF spent itself (a bulk load's threads and RocksDB's not counted)",
                                      value=src.at_rest.cpu_s)
            yield CounterMetricFamily("semreg_store_reopens", "times the data directory's store was closed and "
                                      "opened again to give its block caches back", value=src.at_rest.reopens)
        yield from _sparql(src)
        yield from _work(src)
        yield from _dns(src.dns() if src.dns is not None else None)
        yield from _memory()
        yield from _auth_failures(src.auth_failures)
        cluster = src.cluster
        if cluster is not None:
            members = GaugeMetricFamily("semreg_cluster_members", "cluster members by status", labels=["status"])
            counts: dict[str, int] = {}
            for m in cluster.view.members.values():
                counts[m.status] = counts.get(m.status, 0) + 1
            for status in ("alive", "suspect", "faulty", "left"):
                members.add_metric([status], counts.get(status, 0))
            yield members
            yield CounterMetricFamily("semreg_cluster_records_moved", "records handed to an owner that lacked them",
                                      value=cluster.moved)
            yield CounterMetricFamily("semreg_cluster_records_repaired", "records an owner held older, brought up "
                                      "to date by anti-entropy", value=cluster.repaired)
            yield CounterMetricFamily("semreg_cluster_records_dropped", "copies let go once their owners held them",
                                      value=cluster.dropped)
            yield CounterMetricFamily("semreg_cluster_stale_copies_removed", "live copies older than a removal, "
                                      "found on a member and replaced by the tombstone", value=cluster.settled)
            yield CounterMetricFamily("semreg_cluster_hints_kept", "writes of a record an owner missed, kept to "
                                      "bring it when it answers again", value=cluster.hints.kept)
            yield CounterMetricFamily("semreg_cluster_hints_delivered", "records an owner took from hints",
                                      value=cluster.hints.delivered)
            yield CounterMetricFamily("semreg_cluster_syncs", "hand-off and anti-entropy passes over what this node "
                                      "holds", value=cluster.syncs)
            yield GaugeMetricFamily("semreg_cluster_degraded", "1 while etcd cannot be reached", value=int(cluster.degraded))


def _work(src: Sources) -> Iterator:
    """Request work (docs/operations/limits.md): jobs, what was refused and why, slices, and how late the loop runs."""
    lane, lag, stalls = src.lane, src.lag, src.stalls
    if lane is not None:
        yield CounterMetricFamily("semreg_work_jobs", "request work run on the event loop in slices", value=lane.jobs)
        refused = CounterMetricFamily("semreg_work_refused", "request work refused: shed, out of time, or past a "
                                      "budget (by the budget's name)", labels=["reason"])
        for reason in ("shed", "timeout", "scored", "expanded", "walked", "instances"):
            refused.add_metric([reason], lane.refused.get(reason, 0))
        yield refused
        spent = GaugeMetricFamily("semreg_work_spent_max", "the most one piece of request work that finished spent "
                                  "of each budget, since start (what the --max-... flags may be set against)",
                                  labels=["budget"])
        for name in ("scored", "expanded", "walked", "instances"):
            spent.add_metric([name], lane.spent_max.get(name, 0))
        yield spent
        yield CounterMetricFamily("semreg_work_slices", "slices of request work run", value=lane.slices)
        yield CounterMetricFamily("semreg_work_long_slices", "slices of request work longer than 20 ms (a checkpoint "
                                  "missing on some path)", value=lane.long_slices)
        yield GaugeMetricFamily("semreg_work_longest_slice_seconds", "the longest slice of request work since start",
                                value=lane.longest_slice_s)
        yield GaugeMetricFamily("semreg_work_running", "request work under way", value=lane.running)
        yield GaugeMetricFamily("semreg_work_waiting", "request work waiting for a place", value=lane.waiting)
    if lag is not None:
        yield GaugeMetricFamily("semreg_loop_lag_seconds", "the longest stall of the event loop in the last 2 s",
                                value=lag.lag_s())
        yield GaugeMetricFamily("semreg_loop_late_share", "the share of the last 2 s the event loop spent stalled "
                                "(past --shed-late-share, new request work is shed)", value=lag.late_share())
        yield GaugeMetricFamily("semreg_loop_max_lag_seconds", "the latest the event loop ran a beat, since start",
                                value=lag.max_lag_s)
    if stalls is not None:
        yield CounterMetricFamily("semreg_loop_stalls", "stalls of the event loop past --stall-log (each logged "
                                  "with its stack)", value=stalls.stalls)


def _dns(server: Any) -> Iterator:
    if server is None:
        return
    yield CounterMetricFamily("semreg_dns_answered", "DNS queries answered", value=server.answered)
    yield CounterMetricFamily("semreg_dns_refused", "DNS queries refused (past --dns-rate)", value=server.refused)
    tcp = server.connections
    closed = CounterMetricFamily("semreg_dns_tcp_closed", "DNS TCP connections refused or closed by the limits",
                                 labels=["reason"])
    for reason, n in (("per_address", tcp.refused), ("shed", tcp.shed), ("read_timeout", tcp.read_timeouts),
                      ("write_timeout", tcp.write_timeouts)):
        closed.add_metric([reason], n)
    yield closed
    yield GaugeMetricFamily("semreg_dns_tcp_connections", "DNS TCP connections held", value=tcp.held)


class MetricsMiddleware:
    """Counts and times every request by its route template (not its path, to bound cardinality)."""

    def __init__(self, app, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def send_wrapper(message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", "unmatched")
            self.metrics.requests.labels(template, scope["method"], str(status[0])).inc()
            self.metrics.latency.labels(template).observe(time.perf_counter() - started)


_HEAP = malloc.Recent(every_s=1.0)


async def read_heap() -> None:
    """The C heap read again on a worker thread when the last reading is a second old, before a scrape renders:
    walking it took the event loop 90-150 ms at a time on a node that had restored 100,000 instances."""
    if _HEAP.due():
        await asyncio.to_thread(_HEAP)


def _memory() -> Iterator:
    """Where this process's memory is, as far as it can tell cheaply (`semreg.malloc`). Not how many objects are
    frozen (`gc.get_freeze_count` walks them: 88 ms for 6,000,000, each scrape on the event loop)."""
    yield GaugeMetricFamily("semreg_python_allocated_blocks", "memory blocks Python's allocator has handed out "
                            "(its objects; a count, not bytes)", value=sys.getallocatedblocks())
    heap = _HEAP.cached()  # read by `read_heap`, off the loop: reading it walks the C heap (`semreg.malloc`)
    if heap is not None:
        g = GaugeMetricFamily("semreg_malloc_bytes", "bytes of the C heap (glibc's mallinfo2): in use, and freed "
                              "but kept by its arenas", labels=["state"])
        g.add_metric(["in_use"], heap.in_use)
        g.add_metric(["free_kept"], heap.free_kept)
        yield g


def _sparql(src: Sources) -> Iterator:
    """The query processes' figures (none without them), and the forward's (on a ring member without them)."""
    pool = src.pool
    if pool is not None:
        yield GaugeMetricFamily("semreg_sparql_processes", "SPARQL query processes ready or busy", value=pool.workers)
        yield GaugeMetricFamily("semreg_sparql_running", "SPARQL queries being evaluated", value=pool.busy)
        yield GaugeMetricFamily("semreg_sparql_waiting", "SPARQL queries waiting for a process", value=pool.waiting)
        yield CounterMetricFamily("semreg_sparql_stopped", "SPARQL queries stopped at their time limit "
                                  "(their process killed)", value=pool.killed)
        yield CounterMetricFamily("semreg_sparql_forks", "SPARQL query processes forked", value=pool.forked)
        if pool.checkpoint_cuts is not None:
            yield CounterMetricFamily("semreg_sparql_checkpoints", "checkpoints of the replica on disk cut for "
                                      "queries that needed a newer state", value=pool.checkpoint_cuts)
    if src.forward is not None:
        yield CounterMetricFamily("semreg_sparql_forwarded", "/sparql requests a member that serves SPARQL "
                                  "answered for this one (--no-sparql)", value=src.forward.forwarded)
        yield CounterMetricFamily("semreg_sparql_forward_passed_over", "members serving SPARQL passed over for "
                                  "the next: no answer, or not serving it", value=src.forward.passed_over)


def _auth_failures(reports: tuple[FailureReport, ...]) -> Iterator:
    """Failed authentications by listener and client address: the addresses that failed last by name, the rest
    as `other` (`semreg.access.failure_report`), so that cardinality stays bounded."""
    if not reports:
        return
    failures = CounterMetricFamily("semreg_auth_failures", "failed authentications (wrong or malformed tokens, "
                                   "wrong cluster secrets) by listener and client address: the addresses that "
                                   "failed last by name, the others as address=\"other\"",
                                   labels=["listener", "address"])
    throttled = CounterMetricFamily("semreg_auth_throttled", "failed authentications answered 429: their address "
                                    "or their credential had failed too often", labels=["listener"])
    for report in reports:
        for address, n in report.by_address():
            failures.add_metric([report.listener, address], n)
        throttled.add_metric([report.listener], report.refused)
    yield failures
    yield throttled
