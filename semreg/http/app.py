"""The public ASGI app over the node's parts (`semreg.http.state.AppState`): the declared routes, the middleware,
the error mapping, and the SPARQL route's parts (the endpoint, its query processes' gate and their round trip to the
server). The node wires it (`semreg.node.edge`) and runs its life cycle."""
from __future__ import annotations

import asyncio
import collections
import logging
import signal
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response

from semreg.access.tokens import Tokens, TokensFileError
from semreg.cluster.sparql_forward import SparqlForward
from semreg.config import Settings
from semreg.errors import NotServed, SemregError
from semreg.http import console
from semreg.http.endpoints import Endpoint
from semreg.http.fastpath import DiscoverFastPath
from semreg.http.gate import AccessMiddleware, over_rate
from semreg.http.metrics import MetricsMiddleware
from semreg.http.responses import JSONResponse, error_response
from semreg.http.routes import API, DISCOVER, SPARQL_GET
from semreg.http.routes.discovery import discover_warnings
from semreg.http.sparql import MAX_BODY_BYTES, SparqlEndpoint
from semreg.http.sparql_forward import ForwardedSparql, SparqlOff
from semreg.http.state import AppState
from semreg.registry.query_params import discover_query
from semreg.sparql.pool import QueryPool
from semreg.sparql.service import Gate

if TYPE_CHECKING:
    from semreg.cluster.cluster import Cluster
    from semreg.rdf.terms import PrefixMap
    from semreg.sparql.feed import ReplicaFeed

log = logging.getLogger("semreg.app")

_STATUS_SENTENCES = {404: "no such route; the API lives under /v1/ (see the documentation, HTTP API, or /openapi.json).",
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


def sparql_endpoint(replica: ReplicaFeed, prefixes: PrefixMap, settings: Settings,
                    barrier: Callable[[], Awaitable[None]]) -> SparqlEndpoint:
    """`/sparql`, evaluated by a pool of query processes over a replica `replica` keeps current; `barrier`: what
    other members acknowledged before a query, into the replica (a ring's read barrier)."""

    def request_snapshot() -> None:
        replica.on_replica = pool.publish
        replica.request_snapshot()

    pool = QueryPool(request_snapshot, min_workers=settings.sparql_workers, max_workers=settings.sparql_max_workers,
                     memory_limit_mib=settings.sparql_memory_limit_mib, on_disk=settings.sparql_replica_dir)

    async def before_query() -> None:
        await barrier()
        if replica.pending:
            await asyncio.to_thread(replica.wait, None, settings.sparql_time_limit_s)

    return SparqlEndpoint(pool, time_limit_s=settings.sparql_time_limit_s, result_limit=settings.sparql_result_limit,
                          prefixes=prefixes, before_query=before_query)


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


def sparql_gate(state: AppState, endpoint: SparqlEndpoint) -> Gate:
    """What the query processes check of callers on the connections they serve (as the access gate
    does for the route), and whether they must ask the server first (a rate limit, a cluster)."""
    path, scopes, limiter, settings = SPARQL_GET.path, state.scopes, state.limiter, state.settings
    return Gate(tokens=state.tokens, scope=scopes.required("GET", path), every_environment=scopes.every_environment("GET", path),
                ask=limiter.enabled or state.cluster is not None, rate_limited=limiter.enabled,
                endpoint_url=endpoint.endpoint_url, time_limit_s=endpoint.time_limit_s,
                result_limit=endpoint.result_limit, max_body_bytes=endpoint.max_body_bytes,
                cache_bytes=endpoint.cache.max_bytes // max(1, settings.sparql_max_workers),
                forwarded_allow_ips=settings.forwarded_allow_ips, fingerprint_key=state.auth_failures.key)


def connect_pool(state: AppState, pool: QueryPool, replica: ReplicaFeed, barrier: Callable[[], Awaitable[None]]
                 ) -> None:
    """The server's side of the requests the query processes answer on their own connections: the
    replica's tickets and the prefixes on the shared page, the round trip, the failed authentications (counted
    and throttled with the public port's), the metrics."""
    replica.on_requested = pool.note_requested
    prefixes = state.knowledge.prefixes
    prefixes.listeners.append(pool.note_prefixes)
    pool.note_prefixes(prefixes.version, prefixes.as_dict())
    limiter, metrics, failures, clock = state.limiter, state.metrics, state.auth_failures, state.clock

    async def ask(key: str | None) -> SemregError | None:
        if key is not None:
            refusal = over_rate(limiter, key, clock.monotonic())
            if refusal is not None:
                return refusal
        await barrier()  # what other members acknowledged before this query, into the replica
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
    pool.on_failure = lambda failure: failures.failed(failure, clock.monotonic())


def reload_on_sighup(tokens: Tokens, reloaded: Callable[[], None]) -> None:
    """Reload the tokens file on SIGHUP; a broken file keeps the tokens in force and says why."""
    if not tokens.enabled:
        return

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


def without_sparql(cluster: Cluster | None, settings: Settings) -> SparqlOff | ForwardedSparql:
    """`/sparql` on a node with no replica (`--no-sparql`): forwarded to a member that serves it, or 501 alone."""
    if cluster is None:
        return SparqlOff()
    return ForwardedSparql(SparqlForward(cluster.placement, settings.sparql_time_limit_s), MAX_BODY_BYTES)


def create_app(state: AppState, lifespan: Callable[[Starlette], AbstractAsyncContextManager[None]] | None = None
               ) -> Starlette:
    """The public app over `state`: the declared routes and the console's, the middleware, the error mapping.
    `lifespan`: what runs around it when it is served on its own (a test's; `semreg serve` runs the node's
    services itself)."""
    app = Starlette(routes=[*API.routes(), *console.routes()], lifespan=lifespan, middleware=middleware(state),
                    exception_handlers={SemregError: _semreg_error, HTTPException: _http_error,
                                        Exception: _unexpected})
    app.state.semreg = state
    return app


def middleware(state: AppState) -> list[Middleware]:
    """The middleware, outermost first: the metrics, the access gate, then the short paths of `GET /v1/discover`
    and `GET /sparql` (inside the gate and the metrics; the latter only where this node answers SPARQL itself)."""
    sparql, knowledge, lane = state.sparql, state.knowledge, state.lane
    short = [Middleware(SparqlGet, endpoint=sparql, route=SPARQL_GET)] if isinstance(sparql, SparqlEndpoint) else []
    return [Middleware(MetricsMiddleware, metrics=state.metrics),
            Middleware(AccessMiddleware, tokens=state.tokens, scopes=state.scopes, limiter=state.limiter,
                       clock=state.clock.monotonic, failures=state.auth_failures),
            Middleware(DiscoverFastPath, known=state.known_queries, coordinator=state.coordinator,
                       prefixes=knowledge.prefixes, parse=discover_query,
                       warnings=lambda q: discover_warnings(knowledge, lane, q), route=DISCOVER),
            *short]
