"""The node's HTTP edge, wired: the tokens, the rate limits and the failures they count, the router, the metrics,
the `/sparql` route (the query processes over the replica, forwarded in a ring without one, 501 alone without one),
the typed state the handlers read (`semreg.http.state.AppState`), and the two apps over it: the public one
(`semreg.http.app`) and the cluster listener's (`semreg.http.cluster_listener`).

Its services: the query processes (`query pool`: started with the node when `--sparql-prestart`, else at the first
query; closed at the stop, after `stop()` at the stop signal), and the tokens file reloaded on SIGHUP (`tokens`).
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette

from semreg.access.failures import FailureThrottle
from semreg.access.ratelimit import RateLimiter
from semreg.access.tokens import Tokens
from semreg.clock import Clock
from semreg.cluster.cluster import Cluster
from semreg.config import Settings
from semreg.dns.server import DnsServer
from semreg.http import console
from semreg.http.app import connect_pool, create_app, reload_on_sighup, sparql_endpoint, sparql_gate, without_sparql
from semreg.http.cluster_listener import cluster_app, secret_failures
from semreg.http.endpoints import ScopeTable
from semreg.http.fastpath import KnownQueries
from semreg.http.metrics import Metrics, Sources
from semreg.http.routes import API
from semreg.http.sparql import SparqlEndpoint
from semreg.http.sparql_forward import ForwardedSparql
from semreg.http.state import AppState
from semreg.knowledge.knowledge import Knowledge
from semreg.node.replica import Replica
from semreg.node.services import Basic, Service
from semreg.registry.changelog import ChangeLog
from semreg.registry.coordinator import Coordinator
from semreg.registry.local_shard import LocalShard
from semreg.registry.routing import Router
from semreg.registry.saved import Questions
from semreg.sparql.pool import QueryPool
from semreg.storage.at_rest import AtRest
from semreg.work.lag import LoopLag
from semreg.work.lane import Lane
from semreg.work.stalls import StallWatch

Lifespan = Callable[[Starlette], AbstractAsyncContextManager[None]]


@dataclass
class Parts:
    """What the edge serves of the node."""

    settings: Settings
    clock: Clock
    knowledge: Knowledge
    coordinator: Coordinator
    questions: Questions
    shard: LocalShard
    changelog: ChangeLog
    lane: Lane
    lag: LoopLag
    stalls: StallWatch | None
    cluster: Cluster | None
    replica: Replica | None
    at_rest: AtRest | None
    dns: DnsServer | None
    ready: Callable[[], bool]
    starting: Callable[[], str]


@dataclass
class Edge:
    state: AppState
    app: Starlette  # the public port's
    cluster_app: Starlette  # the cluster listener's
    pool: QueryPool | None  # the query processes, where this node answers SPARQL itself
    services: list[Service] = field(default_factory=list)

    def stopping(self) -> None:
        """The node was asked to stop: the query processes take no more queries."""
        if self.pool is not None:
            self.pool.stop()


def edge(parts: Parts, lifespan: Lifespan | None = None) -> Edge:
    """The edge of a node made of `parts`; `lifespan`: the public app's, when it is served on its own."""
    settings = parts.settings
    failures = FailureThrottle(shown=settings.auth_failure_addresses, lines_per_s=settings.auth_failure_log_rate)
    wrong_secrets = secret_failures(settings.auth_failure_addresses, settings.auth_failure_log_rate)
    barrier = _barrier(parts.cluster)
    sparql = (sparql_endpoint(parts.replica.feed, parts.knowledge.prefixes, settings, barrier)
              if parts.replica is not None else without_sparql(parts.cluster, settings))
    router = Router(parts.coordinator, verbose=settings.verbose_routing)
    state = AppState(
        settings=settings, clock=parts.clock, knowledge=parts.knowledge, coordinator=parts.coordinator,
        questions=parts.questions, lane=parts.lane, shard=parts.shard, changelog=parts.changelog,
        cluster=parts.cluster, router=router, metrics=metrics(parts, router, sparql, failures, wrong_secrets),
        tokens=Tokens(settings.tokens_file), scopes=ScopeTable(API.endpoints, (console.PREFIX,), open_paths=("/",)),
        limiter=RateLimiter(settings.rate_limit_per_s, settings.rate_burst), auth_failures=failures,
        secret_failures=wrong_secrets, known_queries=KnownQueries(), sparql=sparql, endpoints=API,
        ready=parts.ready, starting=parts.starting, readiness=_readiness(parts))
    pool = sparql.pool if isinstance(sparql, SparqlEndpoint) else None
    services: list[Service] = []
    if isinstance(sparql, SparqlEndpoint) and parts.replica is not None:
        endpoint, processes = sparql, sparql.pool
        connect_pool(state, processes, parts.replica.feed, barrier)
        processes.set_gate(sparql_gate(state, endpoint))
        services.append(Basic("query pool", processes.start if settings.sparql_prestart else None, processes.close,
                              needs=("replica",)))

        def reloaded() -> None:  # the query processes' gate, of the tokens now in force
            processes.set_gate(sparql_gate(state, endpoint))
    else:
        def reloaded() -> None:
            return None
    services.append(Basic("tokens", lambda: reload_on_sighup(state.tokens, reloaded)))
    return Edge(state, create_app(state, lifespan), cluster_app(state), pool, services)


def metrics(parts: Parts, router: Router, sparql: Any, *failures: FailureThrottle) -> Metrics:
    """The node's metrics: the sources read at each scrape, and the closure's rebuilds as they happen."""
    out = Metrics()
    shard, coordinator, knowledge, replica, dns = parts.shard, parts.coordinator, parts.knowledge, parts.replica, parts.dns
    out.attach(Sources(
        instances_by_status=shard.registry.counts_by_status, watches=lambda: coordinator.hub.watches,
        topics=lambda: coordinator.hub.topics, tags=lambda: len(shard.registry.catalogue.holders),
        concepts=lambda: knowledge.hierarchy.size, checks=lambda: (shard.health.runs, shard.health.failures),
        routes_by_policy=lambda: router.routes_by_policy, closure_rebuilds=lambda: knowledge.closure_rebuilds,
        replica_pending=_pending(replica), pool=sparql.pool if isinstance(sparql, SparqlEndpoint) else None,
        cluster=parts.cluster, at_rest=parts.at_rest,
        forward=sparql.forward if isinstance(sparql, ForwardedSparql) else None, lane=parts.lane, lag=parts.lag,
        stalls=parts.stalls, dns=lambda: dns,
        auth_failures=tuple(f.report for f in (failures if parts.cluster is not None else failures[:1]))))
    knowledge.on_hierarchy(lambda hierarchy, seconds: out.observe_closure(seconds))
    return out


def _readiness(parts: Parts) -> Callable[[], dict[str, int]]:
    shard, knowledge, pending = parts.shard, parts.knowledge, _pending(parts.replica)
    return lambda: {"instances": len(shard.registry.instances), "ontologies": len(knowledge.ontologies),
                    "replica_pending": pending()}


def _pending(replica: Replica | None) -> Callable[[], int]:
    """Changes not yet handed to the SPARQL replica (0 without one)."""
    if replica is None:
        return lambda: 0
    feed = replica.feed
    return lambda: feed.pending


def _barrier(cluster: Cluster | None) -> Callable[[], Awaitable[None]]:
    """What a SPARQL query waits for first: in a ring, what other members acknowledged before it, in the replica."""
    if cluster is not None:
        return cluster.read_barrier

    async def alone() -> None:
        return None
    return alone
