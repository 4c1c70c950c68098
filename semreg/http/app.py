"""The ASGI application: the node, the declared routes, the middleware, error mapping and life cycle."""
from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import State
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response

from semreg.access.failures import FailureThrottle
from semreg.access.ratelimit import RateLimiter
from semreg.access.tokens import Tokens, TokensFileError
from semreg.clock import Clock
from semreg.cluster.kv import KV
from semreg.cluster.sparql_forward import SparqlForward
from semreg.config import Settings
from semreg.dns.answers import Zone
from semreg.dns.apex import listen_addresses
from semreg.dns.connections import Limits
from semreg.dns.directory import Directory
from semreg.dns.names import zone
from semreg.dns.server import DnsServer, parse_listen
from semreg.errors import NotServed, SemregError
from semreg.http import console
from semreg.http.cluster_listener import cluster_app, secret_failures
from semreg.http.endpoints import Endpoint, ScopeTable
from semreg.http.fastpath import DiscoverFastPath, KnownQueries
from semreg.http.gate import AccessMiddleware, over_rate
from semreg.http.metrics import Metrics, MetricsMiddleware, Sources
from semreg.http.responses import JSONResponse, error_response
from semreg.http.routes import API, DISCOVER, SPARQL_GET
from semreg.http.routes.discovery import discover_warnings
from semreg.http.sparql import MAX_BODY_BYTES, SparqlEndpoint
from semreg.http.sparql_forward import ForwardedSparql, SparqlOff
from semreg.node import Node
from semreg.registry.health import HealthChecker
from semreg.registry.query_params import discover_query
from semreg.registry.routing import Router
from semreg.sparql.pool import QueryPool
from semreg.sparql.service import Gate
from semreg.storage.store import Store

log = logging.getLogger("semreg.app")

_STATUS_SENTENCES = {404: "no such route; the API lives under /v1/ (see the README).",
                     405: "this route does not take that method."}


async def _semreg_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SemregError)
    if exc.status >= 500 and exc.status != NotServed.status:  # a 501 is the node's configuration, not trouble
        log.warning("request refused", extra={"path": request.url.path, "status": exc.status, "error": exc.message})
    return error_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    sentence = _STATUS_SENTENCES.get(exc.status_code, str(exc.detail))
    return JSONResponse({"error": sentence}, status_code=exc.status_code, headers=dict(exc.headers or {}))


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.error("unexpected error", exc_info=exc, extra={"path": request.url.path, "method": request.method})
    return JSONResponse({"error": "the server failed to handle this request; the log says why."}, status_code=500)


def sparql_endpoint(node: Node, settings: Settings) -> SparqlEndpoint:
    """`/sparql`, evaluated by a pool of query processes over a replica the node's feed keeps current."""
    replica = node.replica
    assert replica is not None, "a node started with --sparql keeps the replica"

    def request_snapshot() -> None:
        replica.on_replica = pool.publish
        replica.request_snapshot()

    pool = QueryPool(request_snapshot, min_workers=settings.sparql_workers, max_workers=settings.sparql_max_workers,
                     memory_limit_mib=settings.sparql_memory_limit_mib)

    async def before_query() -> None:
        if node.cluster is not None:  # what other members acknowledged before this query, into the replica
            await node.cluster.read_barrier()
        if replica.pending:
            await asyncio.to_thread(replica.wait, None, settings.sparql_time_limit_s)

    return SparqlEndpoint(pool, time_limit_s=settings.sparql_time_limit_s, result_limit=settings.sparql_result_limit,
                          prefixes=node.knowledge.prefixes, before_query=before_query)


class SparqlGet:
    """`GET /sparql` answered straight from the ASGI scope by the endpoint (inside the access gate and the
    metrics, like the discovery short path); POST and HEAD take the router."""

    def __init__(self, app: Any, endpoint: SparqlEndpoint, route: Endpoint) -> None:
        self.app = app
        self.endpoint = endpoint
        self.route = route

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/sparql" and scope["method"] == "GET":
            scope["route"] = self.route
            await self.endpoint.asgi_get(scope, send)
            return
        await self.app(scope, receive, send)


def sparql_gate(tokens: Tokens, scopes: ScopeTable, limiter: RateLimiter, endpoint: SparqlEndpoint,
                node: Node, settings: Settings, failures: FailureThrottle) -> Gate:
    """What the query processes check of callers on the connections they serve (as the access gate
    does for the route), and whether they must ask the server first (a rate limit, a cluster)."""
    path = SPARQL_GET.path
    return Gate(tokens=tokens, scope=scopes.required("GET", path), every_environment=scopes.every_environment("GET", path),
                ask=limiter.enabled or node.cluster is not None, rate_limited=limiter.enabled,
                endpoint_url=endpoint.endpoint_url, time_limit_s=endpoint.time_limit_s,
                result_limit=endpoint.result_limit, max_body_bytes=endpoint.max_body_bytes,
                cache_bytes=endpoint.cache.max_bytes // max(1, settings.sparql_max_workers),
                forwarded_allow_ips=settings.forwarded_allow_ips, fingerprint_key=failures.key)


def connect_pool(pool: QueryPool, node: Node, limiter: RateLimiter, metrics: Metrics,
                 failures: FailureThrottle) -> None:
    """The server's side of the requests the query processes answer on their own connections: the
    replica's tickets and the prefixes on the shared page, the round trip, the failed authentications (counted
    and throttled with the public port's), the metrics."""
    assert node.replica is not None
    node.replica.on_requested = pool.note_requested
    prefixes = node.knowledge.prefixes
    prefixes.listeners.append(pool.note_prefixes)
    pool.note_prefixes(prefixes.version, prefixes.as_dict())

    async def ask(key: str | None) -> SemregError | None:
        if key is not None:
            refusal = over_rate(limiter, key, node.clock.monotonic())
            if refusal is not None:
                return refusal
        if node.cluster is not None:  # what other members acknowledged before this query, into the replica
            await node.cluster.read_barrier()
        return None

    def observe(observations: list[tuple[str, int, float]]) -> None:
        """A batch of requests a worker answered: each label set looked up once (it is most of the cost)."""
        counts = collections.Counter((method, status) for method, status, _ in observations)
        for (method, status), n in counts.items():
            metrics.requests.labels(SPARQL_GET.path, method, str(status)).inc(n)
        latency = metrics.latency.labels(SPARQL_GET.path)
        for _, _, seconds in observations:
            latency.observe(seconds)

    pool.asker = ask
    pool.observe = observe
    pool.on_failure = lambda failure: failures.failed(failure, node.clock.monotonic())


def _on_sighup(tokens: Tokens, reloaded: Callable[[], None]) -> None:
    """Reload the tokens file on SIGHUP; a broken file keeps the tokens in force and says why."""
    if not tokens.enabled:
        return
    import asyncio
    import signal

    def reload() -> None:
        try:
            tokens.reload()
        except TokensFileError as exc:
            log.error("tokens file not reloaded; the previous tokens stay in force", extra={"reason": str(exc)})
            return
        reloaded()

    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reload)
    except (NotImplementedError, RuntimeError, ValueError):
        log.warning("SIGHUP reload of the tokens file is not available here")


def create_app(settings: Settings, *, store: Store | None = None, clock: Clock | None = None,
               health: HealthChecker | None = None, join_at_start: bool = True, kv: KV | None = None) -> Starlette:
    """The app of one node. Tests pass a `FakeClock` (leases and watches then move only when it does), a
    checker with a fake probe, and a cluster's store in memory (`kv`); `semreg serve` passes the store it
    opened, and joins the cluster itself once it listens (`join_at_start=False`): peers may call a member
    as soon as it is on the ring."""
    node = Node(settings, clock=clock, store=store, health=health, kv=kv)
    tokens = Tokens(settings.tokens_file)
    sparql = sparql_endpoint(node, settings) if settings.sparql else without_sparql(node, settings)
    pool = sparql.pool if isinstance(sparql, SparqlEndpoint) else None
    router = Router(node.coordinator, verbose=settings.verbose_routing)
    known = KnownQueries()
    failures = FailureThrottle(shown=settings.auth_failure_addresses, lines_per_s=settings.auth_failure_log_rate)
    wrong_secrets = secret_failures(settings.auth_failure_addresses, settings.auth_failure_log_rate)
    state = State()  # the app's, made before it for the metrics to read the DNS server from once it listens
    metrics = node_metrics(node, router, pool, sparql.forward if isinstance(sparql, ForwardedSparql) else None,
                           (failures, wrong_secrets) if node.cluster is not None else (failures,),
                           dns=lambda: getattr(state, "dns", None))
    scopes = ScopeTable(API.endpoints, (console.PREFIX,), open_paths=("/",))
    limiter = RateLimiter(settings.rate_limit_per_s, settings.rate_burst)
    gate: Callable[[], Gate] | None = None
    if isinstance(sparql, SparqlEndpoint):
        endpoint, query_pool = sparql, sparql.pool
        node.on_stopping.append(query_pool.stop)
        connect_pool(query_pool, node, limiter, metrics, failures)

        def gate() -> Gate:
            """The query processes' gate, of the tokens in force (made again when SIGHUP reloads them)."""
            return sparql_gate(tokens, scopes, limiter, endpoint, node, settings, failures)

        query_pool.set_gate(gate())
    app = Starlette(routes=[*API.routes(), *console.routes()],
                    lifespan=node_lifespan(node, pool, settings, tokens, gate, join_at_start),
                    middleware=middleware(node, metrics, tokens, scopes, limiter, known, sparql, failures),
                    exception_handlers={SemregError: _semreg_error, HTTPException: _http_error,
                                        Exception: _unexpected})
    app.state = state
    hand_to_handlers(app.state, node, settings, tokens=tokens, router=router, metrics=metrics, known=known,
                     sparql=sparql)
    app.state.auth_failures = failures
    app.state.scopes = scopes  # the internal route checks a forwarded SPARQL request's caller as the gate does
    app.state.limiter = limiter
    app.state.cluster_app = cluster_app(app.state, wrong_secrets)  # served on --cluster-listen only
    return app


def without_sparql(node: Node, settings: Settings) -> SparqlOff | ForwardedSparql:
    """`/sparql` on a node with no replica (`--no-sparql`): forwarded to a member that serves it, or 501 alone."""
    if node.cluster is None:
        return SparqlOff()
    return ForwardedSparql(SparqlForward(node.cluster.placement, settings.sparql_time_limit_s), MAX_BODY_BYTES)


def node_metrics(node: Node, router: Router, pool: QueryPool | None, forward: SparqlForward | None = None,
                 failures: tuple[FailureThrottle, ...] = (), dns: Callable[[], DnsServer | None] = lambda: None
                 ) -> Metrics:
    """The node's metrics: the sources read at each scrape, and the closure's rebuilds as they happen. `dns`: the
    DNS server once it listens."""
    metrics = Metrics()
    shard = node.shard
    metrics.attach(Sources(
        instances_by_status=shard.registry.counts_by_status, watches=lambda: node.coordinator.hub.watches,
        topics=lambda: node.coordinator.hub.topics, tags=lambda: len(shard.registry.catalogue.holders),
        concepts=lambda: node.knowledge.hierarchy.size, checks=lambda: (shard.health.runs, shard.health.failures),
        routes_by_policy=lambda: router.routes_by_policy, closure_rebuilds=lambda: node.knowledge.closure_rebuilds,
        replica_pending=lambda: node.replica_pending, pool=pool, cluster=node.cluster, at_rest=node.at_rest,
        forward=forward, lane=node.lane, lag=node.lag, stalls=node.stalls, dns=dns,
        auth_failures=tuple(f.report for f in failures)))
    node.knowledge.on_hierarchy(lambda hierarchy, seconds: metrics.observe_closure(seconds))
    return metrics


def node_lifespan(node: Node, pool: QueryPool | None, settings: Settings, tokens: Tokens,
                  gate: Callable[[], Gate] | None, join_at_start: bool
                  ) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """The app's life: the node opens (and joins, and the query processes start, when asked), SIGHUP reloads
    the tokens (and the query processes' gate); at the end the query processes close before the node. A node
    with `--no-sparql` has no query processes (`pool`, `gate` None)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await node.open()
        app.state.dns = None
        try:  # a step that fails here (a DNS port taken) still closes the node: its store flushed, its threads ended
            if node.opened:  # else the server was asked to stop during the start-up: it stops at once
                if join_at_start:
                    node.start_joining()
                if pool is not None and settings.sparql_prestart:
                    await pool.start()
                _on_sighup(tokens, lambda: pool.set_gate(gate()) if pool is not None and gate is not None else None)
                app.state.dns = await dns_server(node, settings)
            yield
        finally:
            if app.state.dns is not None:
                await app.state.dns.stop()
            if pool is not None:
                await pool.close()
            await node.close()
            log.info("node stopped")

    return lifespan


async def dns_server(node: Node, settings: Settings) -> DnsServer | None:
    """The DNS listeners of `--dns`, answering the saved queries through the node's coordinator (None without)."""
    if not settings.dns:
        return None
    directory = Directory(node.coordinator, node.knowledge, node.questions)
    served = Zone(zone(settings.dns_domain), settings.dns_ttl_s, wall=node.clock.wall,
                  addresses=listen_addresses(parse_listen(settings.dns)[0]))
    tcp = Limits(settings.dns_tcp_connections, settings.dns_tcp_per_address, settings.dns_tcp_timeout_s,
                 settings.dns_tcp_write_timeout_s)
    server = DnsServer(directory, served, settings.dns, settings.dns_rate_per_s, clock=node.clock, tcp=tcp)
    await server.start()
    return server


def middleware(node: Node, metrics: Metrics, tokens: Tokens, scopes: ScopeTable, limiter: RateLimiter,
               known: KnownQueries, sparql: Any, failures: FailureThrottle) -> list[Middleware]:
    """The middleware, outermost first: the metrics, the access gate, then the short paths of `GET /v1/discover`
    and `GET /sparql` (inside the gate and the metrics; the latter only where this node answers SPARQL itself)."""
    short = [Middleware(SparqlGet, endpoint=sparql, route=SPARQL_GET)] if isinstance(sparql, SparqlEndpoint) else []
    return [Middleware(MetricsMiddleware, metrics=metrics),
            Middleware(AccessMiddleware, tokens=tokens, scopes=scopes, limiter=limiter, clock=node.clock.monotonic,
                       failures=failures),
            Middleware(DiscoverFastPath, known=known, coordinator=node.coordinator, prefixes=node.knowledge.prefixes,
                       parse=discover_query, warnings=lambda q: discover_warnings(node.knowledge, node.lane, q),
                       route=DISCOVER),
            *short]


def hand_to_handlers(state: State, node: Node, settings: Settings, *, tokens: Tokens, router: Router,
                     metrics: Metrics, known: KnownQueries, sparql: Any) -> None:
    """The node's parts, where the handlers find them (`request.app.state`, see `semreg.http.routes`)."""
    shard = node.shard
    state.node = node
    state.coordinator = node.coordinator
    state.lane = node.lane
    state.knowledge = node.knowledge
    state.router = router
    state.metrics = metrics
    state.tokens = tokens
    state.settings = settings
    state.known_queries = known
    state.sparql = sparql
    state.ready = lambda: node.ready
    state.starting = node.starting
    state.readiness = lambda: {"instances": len(shard.registry.instances),
                               "ontologies": len(node.knowledge.ontologies), "replica_pending": node.replica_pending}
    state.cluster = node.cluster
    state.changelog = node.changelog
    state.cluster_secret = node.cluster.secret if node.cluster is not None else ""
    state.endpoints = API
