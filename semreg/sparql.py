"""`/sparql`: the SPARQL 1.1 Protocol query operation over the registry's pyoxigraph store.

The endpoint is a request handler, `await endpoint(request) -> Response` (also `endpoint.handle`).
Mount the bound method, as Starlette treats a callable instance as an ASGI app:

    endpoint = SparqlEndpoint(store, time_limit_s=10.0, result_limit=100_000)
    Route("/sparql", endpoint.handle, methods=["GET", "POST"])
    ...
    endpoint.close()                                              # at shutdown

Errors are raised as `semreg.errors` and mapped to JSON by the app. The parts:

    sparql_protocol     the request → `QueryRequest` (query, protocol dataset) or a 4xx
    sparql_formats      the offered media types and `Accept` negotiation
    sparql_scan         SERVICE refused, FROM honoured (a lexical scan before evaluation)
    sparql_runner       evaluation and serialisation in a worker, under the deadline and the cap
    sparql_description  the service description, for a request without a query

Dataset: without protocol graphs and without FROM, the default graph is the union of every graph and
every graph is available to GRAPH. `default-graph-uri` / `named-graph-uri` replace the dataset,
including the query's own FROM / FROM NAMED (SPARQL 1.1 Protocol 2.1.4); naming only named graphs
leaves an empty default graph, as FROM NAMED alone does.

Time limit (`time_limit_s`, measured from the request's arrival, queueing included): queries run in a
fixed pool of `workers` threads, never on the event loop; past the limit the client gets 503 with
Retry-After at once. pyoxigraph cannot cancel a query, so the worker checks the deadline while results
stream (see `sparql_runner`) and stops soon after it; work that streams nothing (an aggregate over a
huge join) runs to its end, and the fixed pool is what bounds it: at most `workers` such queries burn
CPU at a time, and queries queued behind them time out with 503 instead of piling up threads. The rest
of the server does not use this pool, so the registry keeps answering.

Result cache: with a `generation` callable (a number that changes whenever the store does), answers
are kept in memory, keyed by the query, its dataset and the negotiated format, and served again while
the generation is unchanged: a read-mostly registry answers repeated queries without evaluating them.
An answer is stored under the generation read before evaluation, so one computed while a write
landed is never served. Entries over `CACHE_ENTRY_MAX_BYTES` are not kept; the whole cache is bounded
by `cache_bytes`, least recently used first out.

Learned inline evaluation: handing a query to the pool costs ~115 µs of thread wake-up, five times
what a one-pattern query costs to evaluate. A query text whose last evaluation in the pool took under
`INLINE_MAX_MS` runs on the event loop next time; one that then takes over `INLINE_DEMOTE_MS` goes back
to the pool for good (its cost is re-learned only if it leaves the bounded table). A query that was
cheap on small data and is slow on large data can therefore hold the loop once, for that one run.

Result cap (`result_limit`): a query with more solutions or triples than the cap fails with 400 naming
the cap and suggesting LIMIT/OFFSET; results are never silently truncated, since a client cannot tell a
truncated answer from a complete one. `None` removes the cap.
"""
from __future__ import annotations

import asyncio
import functools
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

import pyoxigraph
from starlette.requests import Request
from starlette.responses import Response

from semreg.errors import BadRequest
from semreg.sparql_description import describe
from semreg.sparql_formats import GRAPH, require, require_some
from semreg.sparql_protocol import QueryRequest, read_query_request
from semreg.sparql_runner import Clock, Limits, Output, run_query, time_limit_error

MiB = 1024 * 1024
CACHE_ENTRY_MAX_BYTES = 1 * MiB
INLINE_MAX_MS = 1.0
INLINE_DEMOTE_MS = 5.0
COSTS_KEPT = 4096


class SparqlEndpoint:
    """The query operation of the SPARQL 1.1 Protocol, with a service description and no update."""

    def __init__(self, store: pyoxigraph.Store, *, time_limit_s: float = 10.0, result_limit: int | None = 100_000,
                 prefixes: Callable[[], dict[str, str]] | None = None,
                 before_query: Callable[[], Awaitable[None]] | None = None,
                 endpoint_url: str | None = None, max_body_bytes: int = 1 * MiB, workers: int = 4,
                 clock: Clock = time.monotonic, generation: Callable[[], int] | None = None,
                 cache_bytes: int = 64 * MiB,
                 visible_graphs: Callable[[], list[pyoxigraph.NamedNode] | None] | None = None) -> None:
        """`prefixes` are known to every query without PREFIX (a query's own PREFIX wins) and used in
        Turtle output; `before_query` is awaited before each query (a write barrier); `endpoint_url`
        is the `sd:endpoint` of the description (default: the request's URL)."""
        if time_limit_s <= 0 or workers < 1 or max_body_bytes < 1:
            raise ValueError("time_limit_s, workers and max_body_bytes must be positive")
        self.store = store
        self.time_limit_s = time_limit_s
        self.result_limit = result_limit
        self.prefixes = prefixes
        self.before_query = before_query
        self.endpoint_url = endpoint_url
        self.max_body_bytes = max_body_bytes
        self.clock = clock
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="semreg-sparql")
        self.generation = generation
        self.visible_graphs = visible_graphs
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[tuple, tuple[int, Output]] = OrderedDict()
        self._cached_bytes = 0
        self.cache_hits = 0
        self._costs_ms: OrderedDict[tuple, float] = OrderedDict()  # query key → last evaluation time
        self.inline_runs = 0

    async def __call__(self, request: Request) -> Response:
        return await self.handle(request)

    async def handle(self, request: Request) -> Response:
        """Answer one protocol request; raises `semreg.errors.SemregError` for the app to map."""
        operation = await read_query_request(request, self.max_body_bytes)
        accept = request.headers.get("accept")
        if operation.query is None:
            return self._describe(request, accept)
        require_some(accept)
        if self.before_query is not None:
            await self.before_query()
        base_iri = _valid_iri(self._url(request))
        key = (operation.query, operation.default_graphs, operation.named_graphs, accept, base_iri)
        generation = self.generation() if self.generation is not None else None
        hit = self._cache.get(key) if generation is not None else None
        if hit is not None and hit[0] == generation:
            self._cache.move_to_end(key)
            self.cache_hits += 1
            output = hit[1]
        else:
            output = await self.run(operation, accept, base_iri=base_iri, key=key)
            if generation is not None:
                self._remember(key, generation, output)
        return Response(output.body, headers={"content-type": output.content_type, "vary": "accept"})

    def _remember(self, key: tuple, generation: int, output: Output) -> None:
        size = len(output.body)
        if size > CACHE_ENTRY_MAX_BYTES:
            return
        old = self._cache.pop(key, None)
        if old is not None:
            self._cached_bytes -= len(old[1].body)
        self._cache[key] = (generation, output)
        self._cached_bytes += size
        while self._cached_bytes > self.cache_bytes and self._cache:
            _, (_, dropped) = self._cache.popitem(last=False)
            self._cached_bytes -= len(dropped.body)

    async def run(self, operation: QueryRequest, accept: str | None, base_iri: str | None = None,
                  key: tuple | None = None) -> Output:
        """Evaluate inline when this query is known to be cheap, else in the pool; 503 once the time limit
        has passed, whether the worker stopped or not."""
        limits = Limits(self.clock() + self.time_limit_s, self.time_limit_s, self.result_limit, self.clock)
        prefixes = self.prefixes() if self.prefixes is not None else None
        visible = self.visible_graphs() if self.visible_graphs is not None else None
        job = functools.partial(self._timed, key, run_query, self.store, operation, accept=accept, limits=limits,
                                prefixes=prefixes, base_iri=base_iri, visible=visible)
        cost = self._costs_ms.get(key) if key is not None else None
        if cost is not None and cost < INLINE_MAX_MS:
            self.inline_runs += 1
            return job()
        future = asyncio.get_running_loop().run_in_executor(self._pool, job)
        try:
            # On timeout wait_for cancels the future: a queued job never starts, a running one stops at its next check.
            return await asyncio.wait_for(future, self.time_limit_s)
        except TimeoutError:
            raise time_limit_error(self.time_limit_s) from None

    def _timed(self, key: tuple | None, fn: Callable[..., Output], *args, **kwargs) -> Output:
        """Run `fn` and learn how long this query takes (successful runs only)."""
        started = time.perf_counter()
        output = fn(*args, **kwargs)
        if key is not None:
            ms = (time.perf_counter() - started) * 1000
            if ms > INLINE_DEMOTE_MS:
                ms = float("inf")  # slow once: always in the pool from now on
            self._costs_ms[key] = ms
            if len(self._costs_ms) > COSTS_KEPT:
                self._costs_ms.popitem(last=False)
        return output

    def _describe(self, request: Request, accept: str | None) -> Response:
        offer = require(accept, GRAPH, "the service description")
        url = _valid_iri(self._url(request))
        if url is None:
            raise BadRequest("the request's Host and path do not make a valid IRI for the endpoint; fix the Host header.")
        return Response(describe(url, offer), headers={"content-type": offer.content_type, "vary": "accept"})

    def _url(self, request: Request) -> str:
        """The endpoint's URL: configured, or rebuilt from the request (the base IRI of its queries)."""
        if self.endpoint_url is not None:
            return self.endpoint_url
        scope = request.scope
        host = request.headers.get("host") or "{}:{}".format(*scope.get("server") or ("localhost", 80))
        return f"{scope.get('scheme', 'http')}://{host}{scope.get('root_path', '')}{scope['path']}"

    def close(self, wait: bool = False) -> None:
        """Stop taking queries; queued ones are dropped and running ones finish (awaited if `wait`)."""
        self._pool.shutdown(wait=wait, cancel_futures=True)


@functools.lru_cache(maxsize=64)
def _valid_iri(url: str) -> str | None:
    try:
        pyoxigraph.NamedNode(url)
    except ValueError:
        return None
    return url
