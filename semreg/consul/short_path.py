"""A short path for the reads Consul's tools repeat: a `GET` of `/v1/health/service/{name}` or
`/v1/catalog/service/{name}` (Prometheus's Consul discovery and consul-template ask one of them every few seconds,
or hold one blocked). They are answered by the same handlers, from the same state, with the same errors, but
without the router's matching over every route and the layers of exception handling around it.

A read asked before, by the same caller, is not even handled: its handler left behind which topic answered it
and which shape of that answer it sent (`catalog.PLAN`), so while that topic's answer stands
(`WatchHub.fresh`) and the shape is kept beside it (`WatchHub.shaped`), the kept bytes are sent at once. What
decides the plan is all in its key: the path and query string, the namespace header, and the admitted caller
(its environments decide what a saved query's name answers for it), under the saved queries' and prefixes'
versions (what a name means). The caller is admitted on every request, once (`access.admit`); a blocking read
(`index=` or `wait=`) always goes to its handler, which waits.

It sits inside the app's metrics, and labels these requests with their route as the router would; a handler's
refusal is the app's own (`refused`); anything else goes the long way.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from semreg.access.tokens import READ
from semreg.consul import encoding
from semreg.consul.access import NAMESPACE_HEADER, admit
from semreg.consul.catalog import PLAN, Answer
from semreg.errors import SemregError
from semreg.http.state import app_state

Refused = Callable[[Request, Exception], Awaitable[Response]]
MAX_PLANS = 4096


class KnownReads:
    """A read's key → the versions it was planned under, its topic's key and the shape of the answer it sent."""

    def __init__(self) -> None:
        self._known: OrderedDict[Hashable, tuple[tuple[int, int], Hashable, Hashable]] = OrderedDict()

    def remember(self, key: Hashable, versions: tuple[int, int], topic_key: Hashable, shape: Hashable) -> None:
        self._known[key] = (versions, topic_key, shape)
        self._known.move_to_end(key)
        if len(self._known) > MAX_PLANS:
            self._known.popitem(last=False)

    def get(self, key: Hashable, versions: tuple[int, int]) -> tuple[Hashable, Hashable] | None:
        hit = self._known.get(key)
        if hit is None or hit[0] != versions:
            return None
        return hit[1], hit[2]


class ReadShortPath:
    def __init__(self, app: Any, routes: list[Route], refused: Refused) -> None:
        self.app = app
        self.refused = refused
        self.known = KnownReads()
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
                    await self._read(Request(scope, receive), endpoint, send)
                    return
        await self.app(scope, receive, send)

    async def _read(self, request: Request, endpoint: Any, send: Any) -> None:
        scope = request.scope
        raw = scope["query_string"]
        try:
            if b"index=" in raw or b"wait=" in raw:
                response = await endpoint(request)
            else:
                principal = admit(request, READ)
                knowledge = app_state(request).knowledge
                versions = (knowledge.queries.version, knowledge.prefixes.version)
                key = (scope["path"], raw, request.headers.get(NAMESPACE_HEADER), principal)
                kept = self._kept(request, key, versions)
                if kept is not None:
                    await kept(scope, request.receive, send)
                    return
                response = await endpoint(request)
                plan = scope.get(PLAN)
                if plan is not None:
                    self.known.remember(key, versions, *plan)
        except SemregError as exc:
            response = await self.refused(request, exc)
        await response(scope, request.receive, send)

    def _kept(self, request: Request, key: Hashable, versions: tuple[int, int]) -> Answer | None:
        """The answer this read's handler would send, when it is kept: else None (the handler builds it)."""
        plan = self.known.get(key, versions)
        if plan is None:
            return None
        topic_key, shape = plan
        topic = app_state(request).coordinator.hub.fresh(topic_key)
        if topic is None:
            return None
        content = topic.shapes.get(shape)
        if content is None:
            return None
        if len(content) >= encoding.MIN_BYTES and encoding.accepts_gzip(request.headers.get("accept-encoding")):
            packed = topic.shapes.get((shape, encoding.GZIP))
            return None if packed is None else Answer(packed, topic.index, gzipped=True)
        return Answer(content, topic.index)
