"""One query, evaluated and serialised in a worker thread, within a deadline and a result cap.

pyoxigraph evaluates lazily and releases the GIL while it does, but it cannot cancel a query. The
worker therefore checks the deadline and the cap while results stream out of the evaluator:

- SELECT: pyoxigraph writes the solutions as TSV into a `_Sink`. TSV puts one solution per line (it
  escapes newlines inside literals), so the sink counts solutions exactly with `bytes.count`, and it
  checks the clock on each write (pyoxigraph buffers about 8 KB per write). For another format,
  pyoxigraph re-reads the TSV and writes that format: TSV carries full RDF terms, so the round trip is
  lossless, and it costs a few microseconds on small results and about a third more on large ones.
- CONSTRUCT / DESCRIBE: pyoxigraph serialises from a generator that counts triples and checks the
  clock on each.
- ASK: pyoxigraph evaluates it inside `Store.query`; nothing can interrupt it.

A stop raises out of the serializer and the worker is free. What the checks cannot reach is work done
between two outputs: an aggregate or ORDER BY over a large join produces nothing until it has seen
everything. `semreg.http.sparql` bounds that with a fixed pool of workers.
"""
from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Iterator
from typing import IO, Any, NamedTuple, cast

import pyoxigraph
from pyoxigraph import QueryBoolean, QueryResultsFormat, QuerySolutions, Triple

from semreg.errors import BadRequest, SemregError, Unavailable
from semreg.sparql.formats import GRAPH, SOLUTIONS, Offer, require
from semreg.sparql.protocol import QueryRequest
from semreg.sparql.scan import scan

log = logging.getLogger("semreg.sparql")

Clock = Callable[[], float]


class Output(NamedTuple):
    content_type: str
    body: bytes


class Limits(NamedTuple):
    deadline: float  # on `clock`
    time_limit_s: float  # for messages
    result_limit: int | None
    clock: Clock = time.monotonic


def time_limit_error(time_limit_s: float) -> Unavailable:
    return Unavailable(f"the query ran past this endpoint's time limit of {time_limit_s:g} s; narrow it, add LIMIT, "
                       f"or try again when the server is less busy.", retry_after_s=math.ceil(time_limit_s),
                       time_limit_s=time_limit_s)


def result_limit_error(result_limit: int) -> BadRequest:
    return BadRequest(f"the query has more than {result_limit} results, this endpoint's limit; page through them with "
                      f"LIMIT and OFFSET, or aggregate them.", result_limit=result_limit)


class _Guard:
    """The deadline and the result cap; `tripped` keeps the error so it survives pyoxigraph's wrapping."""

    __slots__ = ("limits", "tripped")

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.tripped: SemregError | None = None

    def check(self, count: int) -> None:
        limits = self.limits
        if limits.result_limit is not None and count > limits.result_limit:
            self.tripped = result_limit_error(limits.result_limit)
        elif limits.clock() > limits.deadline:
            self.tripped = time_limit_error(limits.time_limit_s)
        if self.tripped is not None:
            raise self.tripped


class _Sink:
    """A binary file pyoxigraph writes TSV into: keeps the chunks, counts lines, checks the guard."""

    __slots__ = ("chunks", "guard", "lines")

    def __init__(self, guard: _Guard) -> None:
        self.chunks: list[bytes] = []
        self.lines = 0
        self.guard = guard

    def write(self, data: bytes) -> int:
        self.lines += data.count(b"\n")
        self.guard.check(self.lines - 1)  # the first line is the header
        self.chunks.append(data)
        return len(data)

    def flush(self) -> None:
        """Nothing to flush: chunks are kept in memory as they arrive."""


def run_query(store: pyoxigraph.Store, request: QueryRequest, *, accept: str | None, limits: Limits,
              prefixes: dict[str, str] | None = None, base_iri: str | None = None,
              visible: list[pyoxigraph.NamedNode] | None = None) -> Output:
    """Evaluate `request.query` and serialise it as `accept` prefers; raise `semreg.errors` on failure.

    `base_iri` resolves the query's relative IRIs (the protocol lets it be the endpoint's URL).
    Call it in the thread that is to evaluate: pyoxigraph's result iterators must not leave it.
    """
    guard = _Guard(limits)
    try:
        return _run(store, request, accept, prefixes, base_iri, guard, visible)
    except Exception as exc:
        error = guard.tripped or _translate(exc)
    # The error goes to the event loop's thread: it must not keep the frames (and so the result iterators,
    # which pyoxigraph forbids dropping outside this thread) alive through its traceback or context.
    error.__traceback__ = error.__context__ = error.__cause__ = None
    raise error


def _run(store: pyoxigraph.Store, request: QueryRequest, accept: str | None, prefixes: dict[str, str] | None,
         base_iri: str | None, guard: _Guard, visible: list[pyoxigraph.NamedNode] | None = None) -> Output:
    guard.check(0)
    results = _evaluate(store, request, prefixes, base_iri, visible)
    if isinstance(results, QuerySolutions):
        offer = require(accept, SOLUTIONS, "a SELECT result")
        if _within_cap(request.query or "", guard.limits.result_limit) and offer.format != QueryResultsFormat.CSV:
            body = cast(bytes, results.serialize(format=_results_format(offer)))
            guard.check(_solutions_in(body, offer, guard.limits.result_limit))
            return Output(offer.content_type, body)
        return Output(offer.content_type, _serialize_solutions(results, offer, guard))
    if isinstance(results, QueryBoolean):
        offer = require(accept, SOLUTIONS, "an ASK result")
        return Output(offer.content_type, cast(bytes, results.serialize(format=_results_format(offer))))
    offer = require(accept, GRAPH, "a CONSTRUCT or DESCRIBE result")
    graph_format = cast(pyoxigraph.RdfFormat, offer.format)
    return Output(offer.content_type,
                  cast(bytes, pyoxigraph.serialize(_guarded(results, guard), format=graph_format, prefixes=prefixes)))


def _evaluate(store: pyoxigraph.Store, request: QueryRequest, prefixes: dict[str, str] | None,
              base_iri: str | None, visible: list[pyoxigraph.NamedNode] | None = None) -> Any:
    """`visible`: the graphs that make up the default dataset (None: every graph, as a union)."""
    query = request.query or ""
    keywords = scan(query)
    if keywords.service:
        raise BadRequest("SERVICE (federated query) is not available on this endpoint; query the other endpoint "
                         "yourself and pass its results in with VALUES.")
    dataset: dict[str, Any] = {}
    if request.has_dataset:
        # The protocol's dataset replaces the query's FROM/FROM NAMED; an empty list is an empty default graph.
        dataset = {"default_graph": list(request.default_graphs), "named_graphs": list(request.named_graphs)}
    elif not keywords.dataset:
        dataset = ({"use_default_graph_as_union": True} if visible is None
                   else {"default_graph": list(visible), "named_graphs": list(visible)})
    known = _prefixes_used(query, prefixes)
    try:
        try:
            return store.query(query, base_iri=base_iri, prefixes=known, **dataset)
        except SyntaxError:
            if known == prefixes:
                raise
            return store.query(query, base_iri=base_iri, prefixes=prefixes, **dataset)  # every one, to be sure
    except SyntaxError as exc:
        raise BadRequest(f"the query is not valid SPARQL: {exc}", syntax_error=str(exc)) from exc


_IRI = re.compile(r"<[^<>\s]*>")
_PREFIXED = re.compile(r"([\w.\-]*):")


def _prefixes_used(query: str, prefixes: dict[str, str] | None) -> dict[str, str] | None:
    """The server's prefixes a query may name: pyoxigraph converts the whole map on every query (about
    1 µs a prefix), and most queries name none of them (full IRIs, or their own PREFIX). A prefix this
    lexical guess misses makes a syntax error, and the query is parsed again with every prefix."""
    if not prefixes:
        return None
    rest = _IRI.sub("", query) if "<" in query else query
    if ":" not in rest:
        return None
    return {name: prefixes[name] for name in set(_PREFIXED.findall(rest)) if name in prefixes} or None


def _within_cap(query: str, result_limit: int | None) -> bool:
    """True when a SELECT should not have more solutions than the cap: it ends with `LIMIT n` (a query's
    own trailing LIMIT is its outermost one; VALUES would come after it), n within the cap. Such a result
    is serialised by pyoxigraph in one go, without the TSV pass that counts solutions (a fifth of a small
    query's time); `_solutions_in` then counts what was produced."""
    if result_limit is None:
        return False
    limit = scan(query).limit
    return limit is not None and limit <= result_limit


def _solutions_in(body: bytes, offer: Offer, result_limit: int | None) -> int:
    """How many solutions a serialised result holds, or 0 when it is too short to hold more than the cap
    (every format spends at least a byte on a solution)."""
    if result_limit is None or len(body) <= result_limit:
        return 0
    if offer.format == QueryResultsFormat.TSV:
        return body.count(b"\n") - 1
    return sum(1 for _ in cast(QuerySolutions, pyoxigraph.parse_query_results(body, _results_format(offer))))


def _serialize_solutions(results: QuerySolutions, offer: Offer, guard: _Guard) -> bytes:
    sink = _Sink(guard)
    results.serialize(cast(IO[bytes], sink), QueryResultsFormat.TSV)
    tsv = b"".join(sink.chunks)
    if offer.format == QueryResultsFormat.TSV:
        return tsv
    parsed = pyoxigraph.parse_query_results(tsv, QueryResultsFormat.TSV)
    return cast(bytes, parsed.serialize(format=_results_format(offer)))


def _results_format(offer: Offer) -> QueryResultsFormat:
    return cast(QueryResultsFormat, offer.format)


def _guarded(triples: Iterator[Triple], guard: _Guard) -> Iterator[Triple]:
    for count, triple in enumerate(triples, 1):
        guard.check(count)
        yield triple


def _translate(exc: Exception) -> SemregError:
    """A pyoxigraph error as the status it deserves: the client's query (4xx) or the server (503)."""
    if isinstance(exc, SemregError):
        return exc
    if isinstance(exc, (ValueError, RuntimeError, TypeError)):
        # pyoxigraph raises these for what the query asks (an invalid IRI, an unsupported feature).
        return BadRequest(f"the query cannot be evaluated: {exc}.")
    if isinstance(exc, PermissionError):
        # Only the query processes' sandbox refuses pyoxigraph anything: the query asked for the network.
        log.warning("sparql query tried to open a connection and was refused", extra={"error": str(exc)})
        return BadRequest("the query cannot be evaluated: it asks for a network connection, which this "
                          "endpoint never makes (SERVICE is not available).")
    if isinstance(exc, (OSError, MemoryError)):
        log.warning("sparql query failed in the store: %s", exc)
        return Unavailable(f"the store could not answer the query ({exc}); try again.")
    log.exception("sparql query failed unexpectedly")
    return Unavailable(f"the query failed unexpectedly ({type(exc).__name__}); try again.")
