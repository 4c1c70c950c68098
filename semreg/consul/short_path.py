"""A short path for the reads Consul's tools repeat: a `GET` of `/v1/health/service/{name}` or
`/v1/catalog/service/{name}` (Prometheus's Consul discovery and consul-template ask one of them every few seconds,
or hold one blocked). They are answered by the same handlers, from the same state, with the same errors, but
without the router's matching over every route and the layers of exception handling around it, which were more
of a read's time than building its answer once that answer is kept (`WatchHub.shaped`).

It sits inside the app's metrics, and labels these requests with their route as the router would; a handler's
refusal is the app's own (`refused`); anything else goes the long way.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from semreg.errors import SemregError

Refused = Callable[[Request, Exception], Awaitable[Response]]


class ReadShortPath:
    def __init__(self, app: Any, routes: list[Route], refused: Refused) -> None:
        self.app = app
        self.refused = refused
        # the routes ending in {name:path} that GET answers: (their prefix, the route, its endpoint)
        self.reads = [(r.path[:-len("{name:path}")], r, r.endpoint) for r in routes
                      if r.path.endswith("/{name:path}") and r.methods and "GET" in r.methods]

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            path: str = scope["path"]
            for prefix, route, endpoint in self.reads:
                if path.startswith(prefix) and len(path) > len(prefix):
                    scope["route"] = route
                    scope["endpoint"] = endpoint
                    scope["path_params"] = {"name": path[len(prefix):]}
                    request = Request(scope, receive)
                    try:
                        response = await endpoint(request)
                    except SemregError as exc:
                        response = await self.refused(request, exc)
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)
