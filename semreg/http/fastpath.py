"""A short path for the hottest read: a plain `GET /v1/discover` (not a blocking read).

It is answered here, from the coordinator's topic, without the router and Starlette's request and
response objects: on a repeated query that was ~40 % of the server's time, and on a question never asked
before about as much again. A query string seen before is not even parsed: the query parsed from it is
remembered under the raw bytes (and the prefix map's version, since a CURIE may expand differently after
an upload). A new one is checked by its route's declaration (`route.check_query`) and parsed by the
same function the handler uses (`parse`), so its errors are the handler's errors.

The short path sits inside the access gate and the metrics (so tokens, scopes, rate limits and
request metrics apply unchanged); a token bound to environments is checked here against the query's
environment, as the handler checks it, on every request. A blocking read (`index=` or `wait=`) goes the long way. What it
answers is byte for byte what the handler answers.
"""
from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.datastructures import QueryParams

from semreg.errors import SemregError
from semreg.http.responses import error_response

if TYPE_CHECKING:
    from semreg.rdf.terms import PrefixMap
    from semreg.registry.coordinator import Coordinator
    from semreg.registry.discovery import DiscoverQuery

log = logging.getLogger("semreg.app")

MAX_QUERIES = 4096
PATH = "/v1/discover"


class KnownQueries:
    """Raw query string → the query the handler parsed from it and the warnings its answer carries (the
    JSON members to add, `b""` for none), under the prefix version it used. Every ontology change moves
    that version, so the warnings about unknown terms are those of the ontologies of the day."""

    def __init__(self) -> None:
        self._known: OrderedDict[bytes, tuple[int, DiscoverQuery, bytes]] = OrderedDict()

    def remember(self, raw: bytes, prefix_version: int, query: DiscoverQuery, warnings: bytes = b"") -> None:
        if b"index=" in raw or b"wait=" in raw:
            return
        self._known[raw] = (prefix_version, query, warnings)
        if len(self._known) > MAX_QUERIES:
            self._known.popitem(last=False)

    def get(self, raw: bytes, prefix_version: int) -> tuple[DiscoverQuery, bytes] | None:
        hit = self._known.get(raw)
        if hit is None or hit[0] != prefix_version:
            return None
        return hit[1], hit[2]


class DiscoverFastPath:
    def __init__(self, app: Any, known: KnownQueries, coordinator: Coordinator, prefixes: PrefixMap,
                 parse: Callable[[QueryParams, PrefixMap], DiscoverQuery],
                 warnings: Callable[[DiscoverQuery], Awaitable[bytes]], route: Any) -> None:
        self.app = app
        self.known = known
        self.coordinator = coordinator
        self.prefixes = prefixes
        self.parse = parse
        self.warnings = warnings  # the members an answer to the query adds: its warnings, b"" for none
        self.route = route  # the router's /v1/discover route, so metrics label these requests alike

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != PATH or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        raw = scope["query_string"]
        version = self.prefixes.version
        known = self.known.get(raw, version)
        if known is None:
            if b"index=" in raw or b"wait=" in raw:
                await self.app(scope, receive, send)  # a blocking read: the handler waits
                return
            scope["route"] = self.route
            try:
                params = QueryParams(raw)
                self.route.check_query(params.keys())
                query = self.parse(params, self.prefixes)
                warnings = await self.warnings(query)
            except SemregError as exc:
                await error_response(exc)(scope, receive, send)
                return
            self.known.remember(raw, version, query, warnings)
        else:
            query, warnings = known
        scope["route"] = self.route
        principal = scope.get("state", {}).get("principal")
        if principal is not None and principal.bound:  # a query is remembered for every token alike
            try:
                principal.require_environment(query.selector.environment)
            except SemregError as exc:
                await error_response(exc)(scope, receive, send)
                return
        try:  # past a budget, shed, or out of time: the error's own answer (outside the router's handlers here)
            topic = self.coordinator.hub.fresh(query.key) or await self.coordinator.discover(query)
        except SemregError as exc:
            await error_response(exc)(scope, receive, send)
            return
        body = topic.body or b""  # the hub renders every topic it hands out
        if warnings:
            body = body[:-1] + warnings + b"}"
        headers = [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json"),
                   (b"x-semreg-index", str(topic.index).encode())]
        missing = topic.payload.missing
        if missing:
            headers.append((b"x-semreg-partial", ",".join(missing).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})
