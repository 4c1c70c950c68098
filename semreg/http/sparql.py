"""`/sparql`: the SPARQL 1.1 Protocol query operation, evaluated in processes the server can kill.

The endpoint is a request handler, `await endpoint(request) -> Response` (also `endpoint.handle`).
Mount the bound method, as Starlette treats a callable instance as an ASGI app:

    pool = QueryPool.over_store(store)           # or fed by the node's replica feed
    endpoint = SparqlEndpoint(pool, time_limit_s=10.0, result_limit=100_000)
    Route("/sparql", endpoint.handle, methods=["GET", "POST"])
    ...
    await pool.close()                           # at shutdown

Errors are raised as `semreg.errors` and mapped to JSON by the app. The parts:

    sparql.protocol     the request → `QueryRequest` (query, protocol dataset) or a 4xx
    sparql.formats      the offered media types, chosen by `Accept` (`semreg.rdf.negotiation`)
    sparql.scan         SERVICE refused, FROM honoured (a lexical scan before evaluation)
    sparql.pool         the replica and the pool of query processes (the time limit is kept there)
    sparql.worker       a query process: evaluation and serialisation (`sparql.runner`)
    sparql.description  the service description, for a request without a query

Dataset: without protocol graphs and without FROM, the default graph is the union of every graph of
the replica and every graph is available to GRAPH. `default-graph-uri` / `named-graph-uri` replace the
dataset, including the query's own FROM / FROM NAMED (SPARQL 1.1 Protocol 2.1.4); naming only named
graphs leaves an empty default graph, as FROM NAMED alone does.

Time limit (`time_limit_s`, measured from the request's arrival, queueing included): past it the
client gets 503 with Retry-After at once, and the query stops: the process evaluating it is killed
(`semreg.sparql.pool`). The rest of the server never evaluates SPARQL, so the registry keeps answering.

Result cache (`semreg.sparql.cache`): answers are served again while the replica's generation (bumped
by every change) is unchanged, so a read-mostly registry answers repeated queries without evaluating
them.

This is the endpoint as an ASGI route. `semreg serve` hands a plain-HTTP connection whose first request
is for `/sparql` to the query processes, which answer it by the same rules without the server's event
loop (`semreg.sparql.connections`); this route serves everything else: in-process apps, and requests
the processes cannot take.

Result cap (`result_limit`): a query with more solutions or triples than the cap fails with 400 naming
the cap and suggesting LIMIT/OFFSET; results are never silently truncated, since a client cannot tell a
truncated answer from a complete one. `None` removes the cap.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope, Send

from semreg.errors import SemregError
from semreg.http.requests import read_body
from semreg.http.responses import error_response
from semreg.sparql.cache import ResultCache, cache_key
from semreg.sparql.description import describe_output, valid_iri
from semreg.sparql.formats import require_some
from semreg.sparql.job import Job
from semreg.sparql.pool import QueryPool
from semreg.sparql.protocol import QueryRequest, from_params, parse_params, query_request
from semreg.sparql.runner import Output


class Prefixes(Protocol):
    """Prefixes every query knows without PREFIX (`semreg.rdf.terms.PrefixMap` is one)."""

    version: int

    def as_dict(self) -> dict[str, str]: ...


log = logging.getLogger("semreg.app")


async def read_query_request(request: Request, max_body_bytes: int) -> QueryRequest:
    """Parse a GET or POST into a `QueryRequest`; protocol errors raise the `semreg.errors` they map to."""
    body = await read_body(request, max_body_bytes) if request.method == "POST" else b""
    return query_request(request.method, request.scope.get("query_string", b""),
                         request.headers.get("content-type", ""), body)


MiB = 1024 * 1024
MAX_BODY_BYTES = 1 * MiB  # a POST's body (the query, or the form)


class SparqlEndpoint:
    """The query operation of the SPARQL 1.1 Protocol, with a service description and no update."""

    def __init__(self, pool: QueryPool, *, time_limit_s: float = 10.0, result_limit: int | None = 100_000,
                 prefixes: Prefixes | None = None, before_query: Callable[[], Awaitable[None]] | None = None,
                 endpoint_url: str | None = None, max_body_bytes: int = MAX_BODY_BYTES, cache_bytes: int = 64 * MiB) -> None:
        """`prefixes` are known to every query without PREFIX (a query's own PREFIX wins) and used in
        Turtle output; `before_query` is awaited before each query (a write barrier); `endpoint_url`
        is the `sd:endpoint` of the description (default: the request's URL)."""
        if time_limit_s <= 0 or max_body_bytes < 1:
            raise ValueError("time_limit_s and max_body_bytes must be positive")
        self.pool = pool
        self.time_limit_s = time_limit_s
        self.result_limit = result_limit
        self.prefixes = prefixes
        self.before_query = before_query
        self.endpoint_url = endpoint_url
        self.max_body_bytes = max_body_bytes
        self.cache = ResultCache(cache_bytes)
        self._prefixes: tuple[int, dict[str, str] | None] = (-1, None)

    async def __call__(self, request: Request) -> Response:
        return await self.handle(request)

    async def handle(self, request: Request) -> Response:
        """Answer one protocol request; raises `semreg.errors.SemregError` for the app to map."""
        deadline = time.monotonic() + self.time_limit_s
        operation = await read_query_request(request, self.max_body_bytes)
        return await self.respond(operation, request.headers.get("accept"),
                                  self._url(request.scope, request.headers.get("host")), deadline)

    async def respond(self, operation: QueryRequest, accept: str | None, url: str, deadline: float) -> Response:
        """The answer to a parsed request at the endpoint URL `url`: the service description without a query."""
        if operation.query is None:
            return self._describe(url, accept)
        output = await self.answer(operation, accept, url, deadline)
        return Response(output.body, headers={"content-type": output.content_type, "vary": "accept"})

    async def asgi_get(self, scope: Scope, send: Send) -> None:
        """A GET, answered straight from the ASGI scope: what `handle` answers, without a router, request
        or response object (on a small result they were half of the server's time)."""
        deadline = time.monotonic() + self.time_limit_s
        accept = host = None
        for name, value in scope["headers"]:
            if name == b"accept":
                accept = value.decode("latin-1")
            elif name == b"host":
                host = value.decode("latin-1")
        try:
            operation = from_params(parse_params(scope.get("query_string", b""), "the URL"))
            url = self._url(scope, host)
            if operation.query is None:
                response: Response = self._describe(url, accept)
            else:
                output = await self.answer(operation, accept, url, deadline)
                await send({"type": "http.response.start", "status": 200, "headers": [
                    (b"content-length", str(len(output.body)).encode()), (b"content-type", output.content_type.encode()),
                    (b"vary", b"accept")]})
                await send({"type": "http.response.body", "body": output.body})
                return
        except SemregError as exc:
            if exc.status >= 500:
                log.warning("request refused", extra={"path": scope["path"], "status": exc.status, "error": exc.message})
            response = error_response(exc)
        await response({"type": "http"}, _no_body, send)

    async def answer(self, operation: QueryRequest, accept: str | None, url: str, deadline: float) -> Output:
        """The answer to a query: from the cache while the replica is unchanged, else evaluated."""
        require_some(accept)
        if self.before_query is not None:
            await self.before_query()
        base_iri = valid_iri(url)
        key = cache_key(operation, accept, base_iri)
        self.pool.drain()  # every change published before this query, before its cache lookup
        generation = self.pool.generation
        hit = self.cache.get(key, generation)
        if hit is not None:
            return hit
        output = await self.run(operation, accept, deadline, base_iri=base_iri)
        self.cache.put(key, generation, output)
        return output

    async def run(self, operation: QueryRequest, accept: str | None, deadline: float,
                  base_iri: str | None = None) -> Output:
        """Evaluate in a query process; 503 at `deadline` (on `time.monotonic()`), and the query is stopped."""
        version, prefixes = self._current_prefixes()
        job = Job(operation.query or "", tuple(g.value for g in operation.default_graphs),
                  tuple(g.value for g in operation.named_graphs), accept, base_iri, prefixes,
                  self.time_limit_s, self.time_limit_s, self.result_limit)
        return await self.pool.evaluate(job, version, deadline)

    def _current_prefixes(self) -> tuple[int, dict[str, str] | None]:
        if self.prefixes is None:
            return 0, None
        version = self.prefixes.version
        if self._prefixes[0] != version:
            self._prefixes = (version, self.prefixes.as_dict())
        return self._prefixes

    def _describe(self, url: str, accept: str | None) -> Response:
        output = describe_output(url, accept)
        return Response(output.body, headers={"content-type": output.content_type, "vary": "accept"})

    def _url(self, scope: Scope, host: str | None) -> str:
        """The endpoint's URL: configured, or rebuilt from the request (the base IRI of its queries)."""
        return self.endpoint_url if self.endpoint_url is not None else request_url(scope, host)


def request_url(scope: Scope, host: str | None) -> str:
    """The URL a request was sent to, rebuilt from its scope and `Host`."""
    host = host or "{}:{}".format(*scope.get("server") or ("localhost", 80))
    return f"{scope.get('scheme', 'http')}://{host}{scope.get('root_path', '')}{scope['path']}"


async def _no_body() -> dict:
    return {"type": "http.disconnect"}
