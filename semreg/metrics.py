"""Prometheus metrics: requests by route and status, latency, instances by status, watches, checks,
routes by policy, closure rebuilds. Exposed at `GET /metrics` in the Prometheus text format."""
from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

if TYPE_CHECKING:
    from semreg.node import Node
    from semreg.routing import Router

LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


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

    def attach(self, node: "Node", router: "Router") -> None:
        self.registry.register(_NodeCollector(node, router))
        node.on_closure = lambda seconds: self.closure_seconds.observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _NodeCollector(Collector):
    """Values read from the node at scrape time, so the hot paths keep no extra counters."""

    def __init__(self, node: "Node", router: "Router") -> None:
        self.node = node
        self.router = router

    def collect(self) -> Iterator:
        from semreg.instances import STATUSES

        by_status = dict.fromkeys(STATUSES, 0)
        for inst in list(self.node.registry.instances.values()):
            by_status[inst.status] += 1
        g = GaugeMetricFamily("semreg_instances", "registered instances by status", labels=["status"])
        for status, n in by_status.items():
            g.add_metric([status], n)
        yield g
        yield GaugeMetricFamily("semreg_watches", "blocking reads waiting for a change", value=self.node.hub.watches)
        yield GaugeMetricFamily("semreg_watch_topics", "distinct queries whose results are tracked",
                                value=self.node.hub.topics)
        yield GaugeMetricFamily("semreg_tags", "distinct registered tags", value=len(self.node.registry.catalogue.holders))
        yield GaugeMetricFamily("semreg_concepts", "concepts in the reasoner's hierarchy", value=self.node.hierarchy.size)
        yield CounterMetricFamily("semreg_checks", "active health checks run", value=self.node.health.runs)
        yield CounterMetricFamily("semreg_check_failures", "active health checks failed",
                                  value=self.node.health.failures)
        c = CounterMetricFamily("semreg_routes", "routes handed out by policy", labels=["policy"])
        for policy, n in sorted(self.router.routes_by_policy.items()):
            c.add_metric([policy], n)
        yield c
        yield CounterMetricFamily("semreg_closure_rebuilds", "closure and index rebuilds",
                                  value=self.node.closure_rebuilds)
        yield GaugeMetricFamily("semreg_replica_pending", "changes not yet handed to the SPARQL replica",
                                value=self.node.replica.pending)
        pool = self.node.query_pool
        if pool is not None:
            yield GaugeMetricFamily("semreg_sparql_processes", "SPARQL query processes ready or busy", value=pool.workers)
            yield GaugeMetricFamily("semreg_sparql_running", "SPARQL queries being evaluated", value=pool.busy)
            yield GaugeMetricFamily("semreg_sparql_waiting", "SPARQL queries waiting for a process", value=pool.waiting)
            yield CounterMetricFamily("semreg_sparql_stopped", "SPARQL queries stopped at their time limit "
                                      "(their process killed)", value=pool.killed)
            yield CounterMetricFamily("semreg_sparql_forks", "SPARQL query processes forked", value=pool.forked)


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


async def metrics_endpoint(request: Request) -> Response:
    return Response(request.app.state.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")
