"""`/sparql` as a query process answers it on a connection it serves itself: the endpoint's rules
(`semreg.http.sparql`), evaluated in this process.

The server sends each process a `Gate`: what the route needs of a caller (the tokens, the scope) and
the endpoint's limits. What needs the server's own state (a rate limit, a cluster's read barrier) is
asked of it in one round trip (`Gate.ask`); a single node without a rate limit asks nothing. A valid
token is admitted here; a wrong one is handed to the server (`Failed`), which counts it with the public
port's failures and says whether to answer 429 instead of 401 (`semreg.access.failures`).

    QueryService(store, gate).respond(request, ...) -> Reply     (status, headers, body)
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import NamedTuple, Protocol

import orjson
import pyoxigraph as ox

from semreg.access.failures import Failure, FailureThrottle, checked
from semreg.access.tokens import Tokens
from semreg.errors import SemregError, Unavailable
from semreg.http1.forwarded import forwarded
from semreg.http1.server import RequestHead
from semreg.sparql.cache import ResultCache, cache_key
from semreg.sparql.description import describe_output, valid_iri
from semreg.sparql.formats import require_some
from semreg.sparql.protocol import query_request
from semreg.sparql.runner import Limits, Output, run_query, time_limit_error

log = logging.getLogger("semreg.sparql_service")

PATH = "/sparql"
METHODS = ("GET", "POST")
# A query stops itself this long before its deadline, so that the server rarely has to kill its process.
EARLY_STOP_S = 0.05


class Gate(NamedTuple):
    """What the server tells its query processes about callers and limits (sent again when it changes)."""

    tokens: Tokens  # without a tokens file, it lets every caller in
    scope: str | None  # the scope /sparql needs
    every_environment: bool  # a token bound to environments may not read every one (SPARQL sees them all)
    ask: bool  # ask the server before each query (its rate limit, a cluster's read barrier)
    rate_limited: bool
    endpoint_url: str | None
    time_limit_s: float
    result_limit: int | None
    max_body_bytes: int
    cache_bytes: int
    forwarded_allow_ips: str = "127.0.0.1"  # uvicorn's --forwarded-allow-ips, as the route has it
    fingerprint_key: bytes = b""  # the server's throttle's key of the fingerprints of wrong credentials


class Reply(NamedTuple):
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes


class Replica(Protocol):
    """The process's copy of the graphs: `sync(deadline)` takes in every change acknowledged before now
    (`Unavailable` at the deadline); `generation` moves with every change taken in."""

    @property
    def generation(self) -> int: ...

    def sync(self, deadline: float) -> None: ...


# ask(rate-limit key or None, deadline) -> the error to answer instead (None: go on), after the server's
# read barrier when it has one
Ask = Callable[[str | None, float], SemregError | None]
# failed(a wrong credential, deadline) -> the 429 to answer instead of the 401, or None: the server's count
Failed = Callable[[Failure, float], SemregError | None]


def error_reply(exc: SemregError) -> Reply:
    """The JSON error the server's routes answer for `exc` (`semreg.http.responses.error_response`)."""
    headers = [(b"content-type", b"application/json")]
    headers += [(name.lower().encode("latin-1"), str(value).encode("latin-1")) for name, value in exc.headers.items()]
    if exc.status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="semreg"'))
    return Reply(exc.status, headers, orjson.dumps(exc.body()))


def stopped_reply(time_limit_s: float) -> Reply:
    """What a query killed at its time limit answers (written by the server once the process is gone)."""
    return error_reply(time_limit_error(time_limit_s))


class QueryService:
    def __init__(self, store: ox.Store, gate: Gate) -> None:
        self.store = store
        self.gate = gate
        self.cache = ResultCache(gate.cache_bytes)
        self.prefixes: dict[str, str] | None = None
        # failed authentications counted here when no server is asked (a service without a channel)
        self.failures = FailureThrottle()

    def set_gate(self, gate: Gate) -> None:
        if gate.cache_bytes != self.gate.cache_bytes:
            self.cache = ResultCache(gate.cache_bytes)
        self.gate = gate

    def admit(self, head: RequestHead, client: str, failed: Failed | None = None, deadline: float = 0.0
              ) -> str | None:
        """Check the caller (`semreg.http.gate`, for this one route); the key of its rate limit, when the
        server keeps one. A wrong credential goes to `failed` (the server), else to this service's count."""
        gate = self.gate
        if gate.scope is None:
            return None

        def count(failure: Failure) -> SemregError | None:
            return failed(failure, deadline) if failed is not None else self.failures.failed(failure, time.monotonic())

        principal = checked(gate.tokens, head.headers.get("authorization"), client, PATH, gate.fingerprint_key, count)
        principal.require(gate.scope)
        if principal.bound and gate.every_environment:
            principal.require_every_environment(PATH)
        if not gate.rate_limited:
            return None
        return principal.name if gate.tokens.enabled else client

    def respond(self, head: RequestHead, body: bytes, *, host: str, client: str, deadline: float,
                replica: Replica, ask: Ask | None, failed: Failed | None = None) -> Reply:
        """The answer to one `/sparql` request (GET or POST); `host` is the Host header or the address
        the connection reached, `client` the connection's peer (a trusted proxy names the caller and the
        scheme in X-Forwarded-For and X-Forwarded-Proto, as on the route)."""
        gate = self.gate
        scheme, client = forwarded(client, head.headers, gate.forwarded_allow_ips)
        try:
            key = self.admit(head, client, failed, deadline)
            if gate.ask and ask is not None:
                refused = ask(key, deadline)
                if refused is not None:
                    raise refused
            operation = query_request(head.method, head.query_string, head.headers.get("content-type", ""), body)
            accept = head.headers.get("accept")
            url = gate.endpoint_url or f"{scheme}://{host}{PATH}"
            if operation.query is None:
                return _ok(describe_output(url, accept))
            require_some(accept)
            replica.sync(deadline)
            base_iri = valid_iri(url)
            cache_id = cache_key(operation, accept, base_iri)
            generation = replica.generation
            hit = self.cache.get(cache_id, generation)
            if hit is not None:
                return _ok(hit)
            limits = Limits(deadline - EARLY_STOP_S, gate.time_limit_s, gate.result_limit)
            try:
                output = run_query(self.store, operation, accept=accept, limits=limits, prefixes=self.prefixes,
                                   base_iri=base_iri)
            except MemoryError:
                raise Unavailable("the query needs more memory than a query may use here; narrow it.") from None
            self.cache.put(cache_id, generation, output)
            return _ok(output)
        except SemregError as exc:
            if exc.status >= 500:
                log.warning("request refused", extra={"path": PATH, "status": exc.status, "error": exc.message})
            return error_reply(exc)


def _ok(output: Output) -> Reply:
    return Reply(200, [(b"content-type", output.content_type.encode("latin-1")), (b"vary", b"accept")], output.body)
