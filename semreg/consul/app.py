"""The Consul listener's app: its routes over the node's typed state (`semreg.http.state.AppState`, the same
object the public app reads, so every answer is this registry's), and Consul's way of refusing: a plain-text
body with the status (400 for a body or parameter at fault, 403 for a token, 404 for an unknown service or check),
never a 500 for anything the client sent.
"""
from __future__ import annotations

import logging
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from semreg import __version__
from semreg.config import Settings
from semreg.consul import agent, catalog
from semreg.consul.entries import NodeInfo
from semreg.consul.short_path import ReadShortPath
from semreg.errors import SemregError
from semreg.http.metrics import MetricsMiddleware
from semreg.http.state import AppState

log = logging.getLogger("semreg.consul")
WILDCARDS = frozenset({"0.0.0.0", "::", "*", ""})

ROUTES = [
    Route("/v1/agent/service/register", agent.register, methods=["PUT"]),
    Route("/v1/agent/service/deregister/{id:path}", agent.deregister, methods=["PUT"]),
    Route("/v1/agent/check/pass/{check:path}", agent.check_pass, methods=["PUT"]),
    Route("/v1/agent/check/warn/{check:path}", agent.check_warn, methods=["PUT"]),
    Route("/v1/agent/check/fail/{check:path}", agent.check_fail, methods=["PUT"]),
    Route("/v1/agent/check/update/{check:path}", agent.check_update, methods=["PUT"]),
    Route("/v1/agent/service/maintenance/{id:path}", agent.maintenance, methods=["PUT"]),
    Route("/v1/agent/services", agent.services, methods=["GET"]),
    Route("/v1/agent/service/{id:path}", agent.service, methods=["GET"]),
    Route("/v1/agent/self", agent.self_, methods=["GET"]),
    Route("/v1/catalog/services", catalog.services, methods=["GET"]),
    Route("/v1/catalog/service/{name:path}", catalog.catalog_service, methods=["GET"]),
    Route("/v1/catalog/nodes", catalog.nodes, methods=["GET"]),
    Route("/v1/health/service/{name:path}", catalog.health_service, methods=["GET"]),
    Route("/v1/status/leader", catalog.leader, methods=["GET"]),
    Route("/v1/status/peers", catalog.peers, methods=["GET"]),
]


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SemregError)
    status = 403 if exc.status == 401 else exc.status
    if status >= 500:
        log.warning("consul request refused", extra={"path": request.url.path, "status": status, "error": exc.message})
    return PlainTextResponse(exc.message, status_code=status, headers=exc.headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    sentence = {404: "Not found: semreg serves the part of Consul's API its documentation lists (Consul-compatible "
                     "API).", 405: "method not allowed"}.get(exc.status_code, str(exc.detail))
    return PlainTextResponse(sentence, status_code=exc.status_code, headers=dict(exc.headers or {}))


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.error("unexpected error", exc_info=exc, extra={"path": request.url.path, "method": request.method})
    return PlainTextResponse("the server failed to handle this request; the log says why.", status_code=500)


def node_info(settings: Settings) -> NodeInfo:
    """This node as Consul's agent: named by `--node-id` (else `semreg`), at the address its Consul listener is
    reached at (the advertised host where it listens on every address), in the datacenter `--cluster` names."""
    host, _, port = settings.consul_listen.rpartition(":")
    host = host.strip("[]")
    if host in WILDCARDS:
        host = (urlsplit(settings.advertise).hostname if settings.advertise else None) or "127.0.0.1"
    peer = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return NodeInfo(settings.node_id or "semreg", host, settings.cluster, __version__, peer)


def consul_app(state: AppState) -> Starlette:
    """The Consul-compatible app over `state` (no lifespan: the node runs what lives around it). Its requests are
    counted and timed in the node's metrics by their Consul route (`/v1/health/service/{name:path}`), which no
    route of the public API shares."""
    app = Starlette(routes=ROUTES, middleware=[Middleware(MetricsMiddleware, metrics=state.metrics),
                                               Middleware(ReadShortPath, routes=ROUTES, refused=_refused)],
                    exception_handlers={SemregError: _refused, HTTPException: _http_error, Exception: _unexpected})
    app.state.semreg = state
    app.state.consul_node = node_info(state.settings)
    return app
