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
from semreg.http import JSONResponse
from semreg.metrics import Metrics, MetricsMiddleware, metrics_endpoint
from semreg.node import Node
from semreg.openapi import openapi_endpoint
from semreg.ratelimit import RateLimiter
from semreg.routing import Router

log = logging.getLogger("semreg.app")

_STATUS_SENTENCES = {404: "no such route; the API lives under /v1/ (see the README).",
                     405: "this route does not take that method."}


async def _semreg_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SemregError)
    if exc.status >= 500:
        log.warning("request refused", extra={"path": request.url.path, "status": exc.status, "error": exc.message})
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    sentence = _STATUS_SENTENCES.get(exc.status_code, str(exc.detail))
    return JSONResponse({"error": sentence}, status_code=exc.status_code, headers=dict(exc.headers or {}))


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.error("unexpected error", exc_info=exc, extra={"path": request.url.path, "method": request.method})
    return JSONResponse({"error": "the server failed to handle this request; the log says why."}, status_code=500)


def sparql_route(node: Node, settings: Settings) -> Route | None:
    try:
        from semreg.sparql import SparqlEndpoint
    except ImportError:
        return None

    holder: dict[str, Any] = {}

    async def before_query() -> None:
        m = node.materializer
        if m is not None and m.pending:
            import asyncio

            await asyncio.to_thread(m.wait, None, settings.sparql_time_limit_s)

    async def endpoint(request: Request) -> Response:
        ep = holder.get("ep")
        if ep is None:
            assert node.store is not None
            ep = holder["ep"] = SparqlEndpoint(node.store.ox, time_limit_s=settings.sparql_time_limit_s,
                                               result_limit=settings.sparql_result_limit,
                                               prefixes=node.prefixes.as_dict, before_query=before_query,
                                               generation=node.store_generation, visible_graphs=node.sparql_graphs)
        return await ep(request)

    def close() -> None:
        ep = holder.get("ep")
        if ep is not None:
            ep.close()

    node.on_close.append(close)
    return Route("/sparql", endpoint, methods=["GET", "POST"])


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
        _on_sighup(tokens)
        try:
            yield
        finally:
            await node.close()
            log.info("node stopped")

    routes = list(ROUTES)
    sparql = sparql_route(node, settings)
    if sparql is not None:
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
                                Middleware(DiscoverFastPath, node=node, route=DISCOVER)],
                    exception_handlers={SemregError: _semreg_error, HTTPException: _http_error,
                                        Exception: _unexpected})
    app.state.node = node
    app.state.router = router
    app.state.metrics = metrics
    app.state.tokens = tokens
    app.state.settings = settings
    return app
