"""Each route declared once: method, path, handler, scope, parameters, body and replies.

From the declarations come the three things that used to be written by hand and drift apart: the
router's table (`routes`), the access rules (`ScopeTable`, which scope a request needs), and the paths
of `/openapi.json` (`openapi_paths`). A handler is declared with the decorator of an `Endpoints`:

    API = Endpoints()

    @API.route("GET", "/v1/tags", scope=READ, summary="every registered tag", params=WATCH,
               replies=[Reply(200, TagsView, headers=INDEX_HEADER)])
    async def tags(request): ...

The router's table joins such collections in the order it tries them (`Endpoints.joined`).

A request may carry only the query parameters its route declares: any other is a 400 naming it (as an
unknown JSON field is), so a misspelt parameter never goes silently unused. A route that takes a family
of parameters declares it once by its prefix, `Param("meta.", prefix=True)` for `meta.KEY=VALUE`; a
new parameter is one more declaration, and the check follows. `open_query=True` opts a route out: the
SPARQL protocol's clients send parameters of their own (SPARQLWrapper's `format=json`), which SPARQL
endpoints ignore.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, compile_path

from semreg.access.tokens import ADMIN, READ
from semreg.errors import BadRequest

Handler = Callable[[Request], Awaitable[Response]]
REF = "#/components/schemas/"
_CONVERTER = re.compile(r"\{(\w+):\w+\}")  # Starlette's {name:path} is OpenAPI's {name}


@dataclass(frozen=True)
class Param:
    """A declared parameter; with `prefix`, every query parameter whose name starts with `name` (`meta.`
    for `meta.zone=eu`), documented as one parameter named `{name}{KEY}`."""

    name: str
    where: str = "query"  # query | path
    required: bool = False
    schema: dict[str, Any] = field(default_factory=lambda: {"type": "string"})
    description: str = ""
    prefix: bool = False  # a family: every query parameter whose name starts with `name` (`meta.`)

    @property
    def shown(self) -> str:
        return self.name + "KEY" if self.prefix else self.name


@dataclass(frozen=True)
class Reply:
    """One documented answer: a JSON body of `model` (a pydantic model or a JSON schema), or `content` for
    other media types, or nothing."""

    status: int
    model: type[BaseModel] | dict[str, Any] | None = None
    description: str = ""
    headers: dict[str, Any] | None = None
    content: dict[str, Any] | None = None


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    handler: Handler
    scope: str | None  # read | write | admin; None: open to anyone
    summary: str
    params: tuple[Param, ...] = ()
    body: type[BaseModel] | dict[str, Any] | None = None  # a JSON model, or {"media/type": schema, ...}
    body_required: bool = True
    replies: tuple[Reply, ...] = ()
    errors: tuple[int, ...] = ()  # error statuses beyond 400, 401, 403 and 429
    documented: bool = True
    open_query: bool = False  # takes query parameters beyond those declared
    every_environment: bool = False  # answers from every environment's instances: not for a bound token

    @functools.cached_property
    def query_params(self) -> frozenset[str]:
        return frozenset(p.name for p in self.params if p.where == "query" and not p.prefix)

    @functools.cached_property
    def query_prefixes(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if p.where == "query" and p.prefix)

    def check_query(self, names: Iterable[str]) -> None:
        """A 400 naming the query parameters this route does not declare (none for an `open_query` route)."""
        if self.open_query:
            return
        known, prefixes = self.query_params, self.query_prefixes
        unknown = [n for n in dict.fromkeys(names) if n not in known and not (prefixes and n.startswith(prefixes))]
        if not unknown:
            return
        shown = [f"'{n[:60]}'" for n in unknown[:5]] + ([f"{len(unknown) - 5} more"] if len(unknown) > 5 else [])
        taken = [p.shown for p in self.params if p.where == "query"]
        takes = f"takes {', '.join(taken)}" if taken else "takes no query parameters"
        what = "is not a query parameter" if len(unknown) == 1 else "are not query parameters"
        path = _CONVERTER.sub(r"{\1}", self.path)
        raise BadRequest(f"{_and(shown)} {what} of {self.method} {path}; it {takes}.",
                         field=unknown[0][:60], parameters=[n[:60] for n in unknown[:20]])

    def checked(self) -> Handler:
        """The handler behind the check of the query's parameter names."""
        if self.open_query:
            return self.handler
        handler, check = self.handler, self.check_query

        async def checked(request: Request) -> Response:
            check(request.query_params.keys())
            return await handler(request)
        return checked


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


class Endpoints:
    """An ordered collection of declared endpoints (the router tries them in this order)."""

    def __init__(self) -> None:
        self.endpoints: list[Endpoint] = []

    @classmethod
    def joined(cls, *parts: Endpoints, first: Sequence[tuple[str, str]] = ()) -> Endpoints:
        """One table of these, in their order, but for the routes `first` names by (method, path): they lead,
        in that order."""
        every = [e for part in parts for e in part.endpoints]
        lead = [next(e for e in every if (e.method, e.path) == key) for key in first]
        table = cls()
        table.endpoints = lead + [e for e in every if (e.method, e.path) not in first]
        return table

    def route(self, method: str, path: str, *, scope: str | None, summary: str, params: Sequence[Param] = (),
              body: type[BaseModel] | dict[str, Any] | None = None, body_required: bool = True,
              replies: Sequence[Reply] = (), errors: Sequence[int] = (), documented: bool = True,
              open_query: bool = False, every_environment: bool = False) -> Callable[[Handler], Handler]:
        def declare(handler: Handler) -> Handler:
            self.add(Endpoint(method, path, handler, scope, summary, tuple(params), body, body_required,
                              tuple(replies), tuple(errors), documented, open_query, every_environment))
            return handler
        return declare

    def add(self, endpoint: Endpoint) -> Endpoint:
        self.endpoints.append(endpoint)
        return endpoint

    def find(self, method: str, path: str) -> Endpoint:
        return next(e for e in self.endpoints if e.method == method and e.path == path)

    def routes(self) -> list[Route]:
        return [Route(e.path, e.checked(), methods=[e.method]) for e in self.endpoints]


class ScopeTable:
    """Which scope a request needs, from the declarations: static paths by lookup, templated ones by
    their patterns. A path nobody declared needs `read` to be read and `admin` otherwise, so an
    unknown route tells an anonymous caller nothing."""

    def __init__(self, endpoints: Iterable[Endpoint], open_prefixes: tuple[str, ...] = (),
                 open_paths: tuple[str, ...] = ()) -> None:
        self._static: dict[tuple[str, str], str | None] = {(m, p): None for p in open_paths for m in ("GET", "HEAD")}
        self._every_environment: set[tuple[str, str]] = set()
        self._templated: list[tuple[str, re.Pattern[str], str | None]] = []
        self.open_prefixes = open_prefixes
        for e in endpoints:
            methods = (e.method, "HEAD") if e.method == "GET" else (e.method,)
            for method in methods:
                if e.every_environment:
                    assert "{" not in e.path, "a route reading every environment has a static path"
                    self._every_environment.add((method, e.path))
                if "{" in e.path:
                    self._templated.append((method, compile_path(e.path)[0], e.scope))
                else:
                    self._static.setdefault((method, e.path), e.scope)

    def required(self, method: str, path: str) -> str | None:
        key = (method, path)
        if key in self._static:
            return self._static[key]
        for m, pattern, scope in self._templated:
            if m == method and pattern.match(path):
                return scope
        if path.startswith(self.open_prefixes):
            return None
        return READ if method in ("GET", "HEAD") else ADMIN

    def every_environment(self, method: str, path: str) -> bool:
        """Whether the route answers from every environment's instances (a bound token is refused)."""
        return (method, path) in self._every_environment


def openapi_paths(endpoints: Iterable[Endpoint], error_reply: Callable[[int], dict[str, Any]]) -> dict[str, Any]:
    """The `paths` object of the OpenAPI document; `error_reply(status)` documents an error answer."""
    paths: dict[str, Any] = {}
    for e in endpoints:
        if not e.documented:
            continue
        op: dict[str, Any] = {"summary": e.summary, "responses": {}}
        for reply in e.replies:
            op["responses"][str(reply.status)] = _reply(reply)
        for status in (400, 401, 403, 429, *e.errors):
            op["responses"].setdefault(str(status), error_reply(status))
        if e.params:
            op["parameters"] = [_param(p) for p in e.params]
        if e.body is not None:
            content = ({"application/json": {"schema": _schema(e.body)}}
                       if isinstance(e.body, type) else {t: {"schema": s} for t, s in e.body.items()})
            op["requestBody"] = {"required": e.body_required, "content": content}
        if e.scope is None:
            op["security"] = [{}]
        paths.setdefault(_CONVERTER.sub(r"{\1}", e.path), {})[e.method.lower()] = op
    return paths


def _schema(model: type[BaseModel] | dict[str, Any]) -> dict[str, Any]:
    return {"$ref": REF + model.__name__} if isinstance(model, type) else model


def _reply(reply: Reply) -> dict[str, Any]:
    out: dict[str, Any] = {"description": reply.description or "ok"}
    if reply.model is not None:
        out["content"] = {"application/json": {"schema": _schema(reply.model)}}
    elif reply.content is not None:
        out["content"] = reply.content
    if reply.headers:
        out["headers"] = reply.headers
    return out


def _param(p: Param) -> dict[str, Any]:
    out = {"name": p.name + "{KEY}" if p.prefix else p.name, "in": p.where,
           "required": p.required or p.where == "path", "schema": p.schema, "description": p.description}
    if p.prefix:
        out["x-semreg-prefix"] = p.name  # any number of parameters named prefix + KEY
    return out
