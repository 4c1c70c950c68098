"""Operations: the presented token, liveness and readiness, the cluster's members, Prometheus metrics,
and this API's own description (`/openapi.json`, of the table the app hands its handlers)."""
from __future__ import annotations

import functools

from starlette.requests import Request
from starlette.responses import Response

from semreg.access.tokens import ADMIN, OPEN, READ, WRITE
from semreg.cluster.ring import Ring
from semreg.errors import Unauthorized
from semreg.http import schemas as s
from semreg.http.endpoints import Endpoints, Reply
from semreg.http.metrics import read_heap
from semreg.http.openapi import document_bytes
from semreg.http.responses import JSONResponse
from semreg.http.state import app_state

API = Endpoints()
OBJECT = {"type": "object"}


@API.route("GET", "/v1/token/self", scope=None, summary="the presented token: its name and scopes",
           replies=[Reply(200, s.TokenView)], errors=(401,))
async def token_self(request: Request) -> Response:
    """Open, so that a token of any scope can learn what it may do; the token is checked here (401 when it
    is not valid, 429 instead once its address or itself has failed too often). Without one, the caller is
    anonymous, with every scope when no tokens are in force and with none when they are."""
    state = app_state(request)
    tokens = state.tokens
    if tokens.enabled and not request.headers.get("authorization"):
        return JSONResponse({"name": OPEN.name, "scopes": [], "tokens": True})
    client = request.client.host if request.client else "unknown"
    try:
        principal = state.auth_failures.authenticate(tokens, request.headers.get("authorization"), client,
                                                     state.clock.monotonic(), request.url.path)
    except Unauthorized as exc:
        return JSONResponse(exc.body(), status_code=401, headers={"WWW-Authenticate": 'Bearer realm="semreg"'})
    scopes = [scope for scope in (READ, WRITE, ADMIN) if principal.admin or scope in principal.scopes]
    bound = {"environments": sorted(principal.environments or ())} if principal.bound else {}
    return JSONResponse({"name": principal.name, "scopes": scopes, "tokens": tokens.enabled, **bound})


@API.route("GET", "/healthz", scope=None, summary="alive", replies=[Reply(200, OBJECT)])
async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "alive"})


@API.route("GET", "/readyz", scope=None, summary="ready: store open, closure built, ring joined",
           replies=[Reply(200, OBJECT, "ready, or degraded: serving on the last ring known while etcd is away"),
                    Reply(503, s.ErrorView, "starting, or recovering: its membership in the ring is not running as "
                                            "it should (the error says why)")])
async def readyz(request: Request) -> Response:
    state = app_state(request)
    if not state.ready():
        return JSONResponse({"status": "starting", "error": state.starting()}, status_code=503,
                            headers={"Retry-After": "1"})
    cluster = state.cluster
    if cluster is not None and cluster.trouble:
        return JSONResponse({"status": "recovering", "error": cluster.trouble}, status_code=503,
                            headers={"Retry-After": "1"})
    degraded = cluster is not None and cluster.degraded
    return JSONResponse({"status": "degraded" if degraded else "ready", "store": "open", "closure": "built",
                         "ring": "last known (etcd cannot be reached)" if degraded else "joined",
                         **state.readiness()})


@API.route("GET", "/v1/cluster", scope=READ, summary="cluster members", replies=[Reply(200, s.ClusterView)])
async def cluster(request: Request) -> Response:
    state = app_state(request)
    if state.cluster is not None:
        return JSONResponse(state.cluster.describe())
    settings = state.settings
    me = settings.node_id or f"{settings.host}:{settings.port}"
    members = [{"id": me, "address": settings.advertise or f"http://{settings.host}:{settings.port}",
                "status": "alive", "sparql": settings.sparql}]
    return JSONResponse({"node": me, "members": members, "replicas": 1, "checksum": Ring([me]).checksum,
                         "revision": 0, "degraded": False})


@API.route("GET", "/metrics", scope=READ, summary="Prometheus metrics",
           replies=[Reply(200, description="the Prometheus text format",
                          content={"text/plain": {"schema": {"type": "string"}}})], every_environment=True)
async def metrics(request: Request) -> Response:
    """The node's figures, which count every environment (instances, tags, checks, routes, requests): a token
    bound to environments gets 403, as on `/sparql`. They are the operator's, scraped with an unbound token."""
    await read_heap()
    return Response(app_state(request).metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


@API.route("GET", "/openapi.json", scope=None, summary="this API, as OpenAPI 3.1", replies=[Reply(200, OBJECT)])
async def openapi(request: Request) -> Response:
    return JSONResponse(_openapi_document(app_state(request).endpoints))


@functools.cache
def _openapi_document(table: Endpoints) -> bytes:
    """Made once, on the first request: the table does not change while the server runs. It comes from the
    app (`state.endpoints`): joined from every resource's routes, this module's among them, it cannot be
    imported here without a circle."""
    return document_bytes(table.endpoints)

