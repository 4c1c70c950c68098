"""How the data directory's RDF is written (`RdfWrites`, for `semreg.storage.at_rest`): in small
transactions, each run inside pyoxigraph, and in the gaps between the writes that acknowledge requests.

Measured on the development machine: a record's commit (three quads) beside the data directory's RDF
being written took 6 ms instead of 0.25 (RocksDB commits one after another, and a record waits for the
transaction in progress), which took a 1,000-tag registration from 18 to 35 ms. A transaction of the
store's own (a SPARQL update, an N-Quads load) runs without Python's lock, where quads built and diffed
in Python held it against the event loop. So: registrations go out with SPARQL updates of at most
`CHUNK_TAGS` tags and come in with loads of at most `CHUNK_LINES` lines (a few milliseconds each), each
started only while no record write is queued or running (`Store.foreground`), or after `MAX_WAIT_S`,
so that a node that never pauses still writes its RDF.

A group of registrations whose triples are at least `BULK_QUADS` goes in with one bulk load instead
(`Store.bulk_load`: RocksDB's tables written beside the store and taken in whole): ~250 µs of CPU an instance
of 3 tags against ~600 for the loads, and 4-8 KB on disk against ~26 before compaction. A bulk load is no
transaction: the group's markers go in with a second one once the first has returned (a transaction of
their own took twice as long), so a kill leaves triples without markers, never a marker early. Before a
group is written, what is at rest of its registrations is removed, but only for those that have any
(`_PRESENT`, one query for the group: a new registration has none), so a registration a kill left with
triples and no marker is not doubled.

Markers (`?i sr:revision ?n` in `urn:semreg:records`) go first and come back last, so a crash between
two transactions leaves a registration without its marker, which start-up writes again.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, cast

import pyoxigraph as ox

from semreg.rdf.terms import SR
from semreg.storage.store import INSTANCE_PREFIX, RECORDS, REGISTRY, Store, instance_node
from semreg.storage.vocabulary import instance_nquads, record_books, record_nquads, record_view

CHUNK_LINES = 150  # quads an N-Quads load writes in one transaction
CHUNK_TAGS = 30  # tags (five quads each) an update removes in one transaction
BULK_QUADS = 5_000  # a group of registrations with at least this many triples goes in with one bulk load
POLL_S = 0.001  # how often a transaction waiting for the records' writes looks again...
MAX_WAIT_S = 0.5  # ...until it has waited this long
REVISION = ox.NamedNode(SR + "revision")
_R, _C, _TAG = REGISTRY.value, RECORDS.value, SR + "tag"

_MARKERS = (f"DELETE {{ GRAPH <{_C}> {{ ?i <{REVISION.value}> ?n }} }} "
            f"WHERE {{ VALUES ?i {{ $V }} GRAPH <{_C}> {{ ?i <{REVISION.value}> ?n }} }}")
_TAGS = f"""DELETE {{ GRAPH <{_R}> {{ ?i <{_TAG}> ?b . ?b ?p ?o }} }}
WHERE {{ {{ SELECT ?i ?b WHERE {{ VALUES ?i {{ $V }} GRAPH <{_R}> {{ ?i <{_TAG}> ?b }} }} LIMIT $LIMIT }}
         GRAPH <{_R}> {{ ?b ?p ?o }} }}"""
_MARKED = (f"SELECT ?i ?n WHERE {{ GRAPH <{_C}> {{ ?i <{REVISION.value}> ?n }} "
           f"FILTER(STRSTARTS(STR(?i), \"{INSTANCE_PREFIX}\")) }}")
_TYPED = f"SELECT ?i WHERE {{ GRAPH <{_R}> {{ ?i a <{SR}Instance> }} }}"
_PRESENT = (f"SELECT DISTINCT ?i WHERE {{ VALUES ?i {{ $V }} {{ GRAPH <{_R}> {{ ?i ?p ?o }} }} "
            f"UNION {{ GRAPH <{_C}> {{ ?i ?p ?o }} }} }}")
_ANY_TAG = f"ASK {{ VALUES ?i {{ $V }} GRAPH <{_R}> {{ ?i <{_TAG}> ?b }} }}"
_REST = f"""DELETE {{ GRAPH <{_R}> {{ ?b ?bp ?bo }} }}
WHERE {{ VALUES ?i {{ $V }} GRAPH <{_R}> {{ ?i ?p ?b . ?b ?bp ?bo FILTER(isBlank(?b)) }} }} ;
DELETE {{ GRAPH <{_R}> {{ ?i ?p ?o }} }} WHERE {{ VALUES ?i {{ $V }} GRAPH <{_R}> {{ ?i ?p ?o }} }} ;
DELETE {{ GRAPH <{_C}> {{ ?i ?p ?o }} }} WHERE {{ VALUES ?i {{ $V }} GRAPH <{_C}> {{ ?i ?p ?o }} }}"""


class RdfWrites:
    """The transactions of the data directory's RDF; `stopping()` true makes a long write give up."""

    def __init__(self, store: Store, stopping: Callable[[], bool] = lambda: False,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self.store = store
        self.chunk_lines = CHUNK_LINES
        self.chunk_tags = CHUNK_TAGS
        self.bulk_quads = BULK_QUADS
        self.stopping = stopping
        self._clock = clock
        self._sleep = sleep

    def quiet(self) -> None:
        """Wait until no record write is queued or running (at most `MAX_WAIT_S`)."""
        deadline = self._clock() + MAX_WAIT_S
        while self.store.foreground() and not self.stopping() and self._clock() < deadline:
            self._sleep(POLL_S)

    def registrations(self, items: list[tuple[str, dict[str, Any] | None, int, bool]]) -> None:
        """Replace these registrations' triples by those of their records (None: removed): what is at rest
        of those that may have any (all but those said `new`: known to have none) is removed first (`_PRESENT`),
        then the new triples go in, with one bulk load when there are at least `bulk_quads` of them."""
        values = " ".join(f"<{instance_node(iid).value}>" for iid, _, _, new in items if not new)
        present = values and " ".join(f"<{INSTANCE_PREFIX}{iid}>" for iid, _ in instance_rows(
            self.store.ox, _PRESENT.replace("$V", values)))
        if present:
            self._remove(present)
        written = [(rec, revision) for _, rec, revision, _ in items if rec is not None]
        triples = "".join(instance_nquads(record_view(rec)) for rec, _ in written)
        if self.stopping() or not written:
            return
        if triples.count("\n") >= self.bulk_quads:  # its tables are made without holding up any transaction
            self.store.ox.bulk_load(triples.encode(), format=ox.RdfFormat.N_QUADS)
            if self.stopping():
                return
            # the markers once the triples are all in: a kill during this leaves some missing, never one early
            self.store.ox.bulk_load("".join(record_books(rec, revision) for rec, revision in written).encode(),
                                    format=ox.RdfFormat.N_QUADS)
            return
        for chunk in _chunks("".join(record_nquads(rec, revision) for rec, revision in written), self.chunk_lines):
            if self.stopping():
                return
            self.quiet()
            self.store.ox.load(chunk, format=ox.RdfFormat.N_QUADS)

    def _remove(self, values: str) -> None:
        """Remove the triples and markers at rest of the instances whose IRIs `values` lists: markers first."""
        self.store.ox.update(_MARKERS.replace("$V", values))
        while not self.stopping() and self.store.ox.query(_ANY_TAG.replace("$V", values)):
            self.quiet()
            self.store.ox.update(_TAGS.replace("$V", values).replace("$LIMIT", str(self.chunk_tags)))
        self.quiet()
        self.store.ox.update(_REST.replace("$V", values))

    def graph(self, graph: ox.NamedNode, marker: ox.NamedNode, content: tuple[list[ox.Triple], str] | None) -> None:
        """A whole graph with its marker (an ontology's, the closure): skipped when the marker says it is current."""
        ox_store = self.store.ox
        markers = list(ox_store.quads_for_pattern(graph, marker, None, RECORDS))
        if content is not None and content[1] and [_lexical(q.object) for q in markers] == [content[1]]:
            return
        self.remove(markers)
        self.quiet()
        ox_store.remove_graph(graph)
        if content is None:
            return
        triples, tag = content
        self.add(ox.Quad(t.subject, t.predicate, t.object, graph) for t in triples)
        if tag:
            ox_store.add(ox.Quad(graph, marker, ox.Literal(tag), RECORDS))

    def patch(self, graph: ox.NamedNode, marker: ox.NamedNode, added: set[ox.Triple], removed: set[ox.Triple],
              state: str) -> None:
        self.remove(self.store.ox.quads_for_pattern(graph, marker, None, RECORDS))
        self.remove(ox.Quad(t.subject, t.predicate, t.object, graph) for t in removed)
        self.add(ox.Quad(t.subject, t.predicate, t.object, graph) for t in added)
        if state:
            self.store.ox.add(ox.Quad(graph, marker, ox.Literal(state), RECORDS))

    def add(self, quads: Iterable[ox.Quad]) -> None:
        """Quads as they are (blank nodes keep their labels), `CHUNK_LINES` a transaction."""
        chunk: list[ox.Quad] = []
        for q in quads:
            chunk.append(q)
            if len(chunk) >= self.chunk_lines:
                self.quiet()
                self.store.ox.extend(chunk)
                chunk = []
        if chunk:
            self.quiet()
            self.store.ox.extend(chunk)

    def remove(self, quads: Iterable[ox.Quad]) -> None:
        # read whole first, and the name rebound: an iterator of the store (`QuadIter`) must be dropped on the
        # thread that made it, and one left bound here lived as long as this frame, which a stall's capture on
        # another thread could outlast
        quads = list(quads)
        for n, q in enumerate(quads):
            if n % self.chunk_lines == 0:
                self.quiet()
            self.store.ox.remove(q)

    def markers(self) -> dict[str, int]:
        """Each registration's marker: the revision its triples are of (-1 when unreadable)."""
        out = {}
        for iid, value in instance_rows(self.store.ox, _MARKED):
            try:
                out[iid] = int(value)
            except ValueError:
                out[iid] = -1
        return out

    def typed(self) -> set[str]:
        """The ids of the registrations with triples (`a sr:Instance`)."""
        return {iid for iid, _ in instance_rows(self.store.ox, _TYPED)}


def instance_rows(store: ox.Store, query: str) -> Iterator[tuple[str, bytes]]:
    """(instance id, the second column as written in SPARQL's TSV) for each row of `query`, whose first
    column is an instance's IRI. The query runs and its results are written inside pyoxigraph, without
    Python's lock: at 1,000,000 registrations, reading the markers quad by quad held it for ~48 s right
    after start-up, against the requests of a node that had just said it was ready."""
    tsv = cast(bytes, cast(ox.QuerySolutions, store.query(query)).serialize(format=ox.QueryResultsFormat.TSV))
    head = len(INSTANCE_PREFIX) + 1
    for line in tsv.split(b"\n")[1:]:
        first, _, rest = line.partition(b"\t")
        if first.startswith(b"<" + INSTANCE_PREFIX.encode()):
            yield first[head:-1].decode(), rest


def _lexical(term: ox.NamedNode | ox.BlankNode | ox.Literal | ox.Triple) -> str:
    return str(term) if isinstance(term, ox.Triple) else term.value


def _chunks(text: str, size: int) -> Iterator[bytes]:
    """N-Quads text in pieces of about `size` lines, cut only before a line about an instance, so a
    blank node (a tag, a meta entry) is never split from the line that links it: a load names blank nodes
    afresh."""
    lines = text.splitlines(keepends=True)
    start = 0
    while start < len(lines):
        end = min(start + size, len(lines))
        while end < len(lines) and not lines[end].startswith("<"):
            end += 1
        yield "".join(lines[start:end]).encode()
        start = end
