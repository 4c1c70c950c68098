"""The ASGI application: routes, error mapping, and the node's life cycle."""
from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from semreg.access import AccessMiddleware
from semreg.api import DISCOVER, ROUTES
from semreg.auth import Tokens, TokensFileError
from semreg.config import Settings
from semreg.errors import SemregError
from semreg.fastpath import DiscoverFastPath
from semreg.http import JSONResponse, error_response
from semreg.metrics import Metrics, MetricsMiddleware, metrics_endpoint
from semreg.node import Node
from semreg.openapi import openapi_endpoint
from semreg.ratelimit import RateLimiter
from semreg.routing import Router
from semreg.sparql import SparqlEndpoint

log = logging.getLogger("semreg.app")

_STATUS_SENTENCES = {404: "no such route; the API lives under /v1/ (see the README).",
                     405: "this route does not take that method."}


async def _semreg_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SemregError)
    if exc.status >= 500:
        log.warning("request refused", extra={"path": request.url.path, "status": exc.status, "error": exc.message})
    return error_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    sentence = _STATUS_SENTENCES.get(exc.status_code, str(exc.detail))
    return JSONResponse({"error": sentence}, status_code=exc.status_code, headers=dict(exc.headers or {}))


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.error("unexpected error", exc_info=exc, extra={"path": request.url.path, "method": request.method})
    return JSONResponse({"error": "the server failed to handle this request; the log says why."}, status_code=500)


def sparql_route(node: Node, settings: Settings) -> tuple[Route, SparqlEndpoint]:
    """`/sparql`, evaluated by a pool of query processes over a replica the node's feed keeps current."""
    from semreg.sparql_pool import QueryPool

    def request_snapshot() -> None:
        node.replica.on_replica = pool.publish
        node.replica.request_snapshot()

    pool = QueryPool(request_snapshot, min_workers=settings.sparql_workers, max_workers=settings.sparql_max_workers,
                     memory_limit_mib=settings.sparql_memory_limit_mib)

    async def before_query() -> None:
        if node.replica.pending:
            import asyncio

            await asyncio.to_thread(node.replica.wait, None, settings.sparql_time_limit_s)

    endpoint = SparqlEndpoint(pool, time_limit_s=settings.sparql_time_limit_s, result_limit=settings.sparql_result_limit,
                              prefixes=node.prefixes, before_query=before_query)

    async def handle(request: Request) -> Response:
        return await endpoint.handle(request)

    node.query_pool = pool
    node.on_stopping.append(pool.stop)
    return Route("/sparql", handle, methods=["GET", "POST"]), endpoint


class SparqlGet:
    """`GET /sparql` answered straight from the ASGI scope by the endpoint (inside the access gate and the
    metrics, like the discovery short path); POST and HEAD take the router."""

    def __init__(self, app: Any, endpoint: SparqlEndpoint, route: Route) -> None:
        self.app = app
        self.endpoint = endpoint
        self.route = route

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/sparql" and scope["method"] == "GET":
            scope["route"] = self.route
            await self.endpoint.asgi_get(scope, send)
            return
        await self.app(scope, receive, send)


def _on_sighup(tokens: Tokens) -> None:
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

    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reload)
    except (NotImplementedError, RuntimeError, ValueError):
        log.warning("SIGHUP reload of the tokens file is not available here")


def create_app(settings: Settings, node: Node | None = None, store=None) -> Starlette:
    node = node or Node(settings, store=store)

    tokens = Tokens(settings.tokens_file)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await node.open()
        if settings.sparql_prestart and node.query_pool is not None:
            await node.query_pool.start()
        _on_sighup(tokens)
        try:
            yield
        finally:
            await node.close()
            log.info("node stopped")

    routes = list(ROUTES)
    sparql, endpoint = sparql_route(node, settings)
    routes.insert(2, sparql)
    routes.append(Route("/metrics", metrics_endpoint, methods=["GET"]))
    routes.append(Route("/openapi.json", openapi_endpoint, methods=["GET"]))
    metrics = Metrics()
    router = Router(node)
    metrics.attach(node, router)
    app = Starlette(routes=routes, lifespan=lifespan,
                    middleware=[Middleware(MetricsMiddleware, metrics=metrics),
                                Middleware(AccessMiddleware, tokens=tokens,
                                           limiter=RateLimiter(settings.rate_limit_per_s, settings.rate_burst)),
                                Middleware(DiscoverFastPath, node=node, route=DISCOVER),
                                Middleware(SparqlGet, endpoint=endpoint, route=sparql)],
                    exception_handlers={SemregError: _semreg_error, HTTPException: _http_error,
                                        Exception: _unexpected})
    app.state.node = node
    app.state.router = router
    app.state.metrics = metrics
    app.state.tokens = tokens
    app.state.settings = settings
    return app
