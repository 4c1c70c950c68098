"""Python clients of the semreg HTTP API: `Client` (blocking) and `AsyncClient` (asyncio).

    from semreg.client import Client

    with Client("http://10.0.0.1:8080,http://10.0.0.2:8080", token="...") as registry:
        with registry.register("livros-1", service="livros", address="10.0.0.7", port=9001,
                               tags=["ex:Livro ex:temUmGenero ex:Terror"], ttl=30) as reg:
            ...                                    # heartbeats every 10 s; deregistered on exit
        registry.discover("ex:Obra", "ex:temUmGenero", "ex:Terror")["instances"]
        registry.route("ex:Obra", path="/books")   # 'http://10.0.0.7:9001/books'
        for result in registry.watch("ex:Obra"):   # the current result, then one per change
            ...

Resilience: every call has a timeout; connection errors and 5xx answers are retried across the URLs
with exponential backoff and jitter (4xx never; a non-idempotent POST only when it was never sent);
each URL has a circuit breaker so a dead node is skipped quickly (`semreg.client.transport`).

Cache: `discover` answers are cached for 5 s ± 20 % (`cache_ttl_s`, `cache_jitter`), or kept current
by background watches with `watch_cache=True`. When no registry URL answers, `discover` returns the
last good answer for the same query with `"stale": True` added to the dict, and `route` picks in turn
among the instances of earlier answers and returns a `RouteURL` (a `str`) whose `.stale` is True.
Writes made through a client expire its cache, so it reads its own writes.

Errors (all `SemregClientError`): `ApiError` (status, message, body) for 4xx/5xx answers, with
`NotFound` (404) and `NoInstanceAvailable` (503 from routing, `retry_after`); `Unreachable` when
every URL failed. A registration or query that names a term no uploaded ontology knows succeeds with
an `UnknownTermWarning` (Python's `warnings`) per term, saying which known term is close.

The modules:
- `sync`: `Client`, the blocking client, on `httpx.Client`.
- `aio`: `AsyncClient`, the same operations as coroutines, on `httpx.AsyncClient`.
- `base`: the registry's routes written once for both, each a generator of calls (`operation`).
- `queries`: the saved-query routes and the `Saved` handle, written the same way.
- `calls`: a call's pieces that do not depend on the I/O: the request, bodies, answers into values or errors.
- `transport`: which URL to try next, when to wait, when to give up (pure, no I/O).
- `cache`: recent `discover`/`route` answers, fresh for a jittered time, kept after for the stale fallback.
- `heartbeat`: registration handles that keep an instance registered while open.
- `errors`: what the client raises.

Of semreg, the client imports only `semreg.rdf.media` (one table of RDF media types with the server and
the command line); it must not import any room of the server (a contract in pyproject.toml).
"""
from semreg.client.aio import AsyncClient
from semreg.client.cache import LookupCache
from semreg.client.calls import RouteURL
from semreg.client.errors import (
    ApiError,
    NoInstanceAvailable,
    NotFound,
    SemregClientError,
    UnknownTermWarning,
    Unreachable,
)
from semreg.client.heartbeat import AsyncRegistration, Registration
from semreg.client.sync import Client
from semreg.client.transport import CircuitBreaker, RetryPolicy

__all__ = [
           "ApiError",
           "AsyncClient",
           "AsyncRegistration",
           "CircuitBreaker",
           "Client",
           "LookupCache",
           "NoInstanceAvailable",
           "NotFound",
           "Registration",
           "RetryPolicy",
           "RouteURL",
           "SemregClientError",
           "UnknownTermWarning",
           "Unreachable",
]
