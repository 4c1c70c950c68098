"""The data directory as a plain RDF dataset: what the records say, written as RDF behind them.

A registration is acknowledged once its record is durable (`Store.save_records`: the registration as
accepted, three quads in one transaction). Its triples in the registry vocabulary (`record_nquads`, five
quads a tag) follow on this module's thread, together with the uploaded ontologies' graphs and the
closure (`urn:semreg:ontology:{name}`, `urn:semreg:inferred`), so that a stopped node's directory,
opened by any triple store, holds the registry. Why behind and not in the same transaction: pyoxigraph's
on-disk store takes 10-20 µs a quad here, so a 1,000-tag registration written as RDF costs 50-120 ms,
and its record 0.5 ms; and reading 100,000 registrations back from their triples takes ~24 s, from their
records ~1 s, so the records stay what start-up reads.

Keeping up: registrations are written in groups of about `GROUP_QUADS` quads, each group with one bulk
load (`RdfWrites.registrations`: RocksDB's tables written directly and taken in whole), ~180-250 µs of CPU
an instance of 3 tags against ~600 for loads of 150 lines, and tables written once, not rewritten by
compactions; under a steady stream a pass starts at most every `GATHER_S`, so groups stay large. The thread
runs at nice 10, below the event loop: heartbeats first. Nearer the loop's priority its bulk loads compete with
the loop when writes pile up: after the noisy-neighbour bench's forced restore of 100,000 instances, heartbeats
answered at p99 150 ms with the writer at nice 5 against 33 ms at nice 10; and five nodes of a ring on two
cores fell behind on their loops' own work (the fault test's seed 702 failed 4 runs in 6 at nice 0, none in 4
at 5 or 10). The price is lag at rest on a saturated node: at 2,000 registrations a second for 30 s, p99 11.0 s
after acknowledgement at nice 10 against 4.9 s at nice 0; on a busy machine it starves (registrations
acknowledged at 1,500 a second were at rest 74-88 s later). Its work is mostly inside pyoxigraph, without
Python's lock.

Crash safety: each registration's triples carry a marker, `?i sr:revision ?n` in `urn:semreg:records`,
written last (after a group's bulk load, in a second one) and removed first; a graph carries
`sr:sha256` (an ontology) or `sr:state` (the closure) the same way. Start-up (`reconcile`) rewrites whatever
the markers say is missing or stale, and removes what no record holds any more; a registration is rewritten
only after whatever of it is at rest was removed, so triples a kill left without their markers are never
doubled; once it did, a registration of an id that had no record is known to have none at rest, and is written
without asking (`records_written`). A clean stop writes what is pending first (`stop`).

The thread writes without the store's lock (pyoxigraph serialises conflicting transactions itself), each
transaction started in a gap between record writes (`RdfWrites.quiet`), so records keep their pace.

Memory: RocksDB keeps what is written in its memtables until it flushes them, and with pyoxigraph's
settings that was most of a node's memory: 50,000 registrations written as RDF left the server at 1,608 MB
RSS, 489 MB once `flush()` had written the memtables out. So the thread flushes the store after every
`FLUSH_QUADS` quads it writes or `FLUSH_RECORDS` records the store saved (a group's bulk load makes tables
without a memtable: in a burst the records fill them), and at most `FLUSH_EVERY_S` after any write, and gives
the freed memory back (`semreg.malloc`): under steady churn (ten registrations and removals a second) the count alone let the
memtables grow by ~12 MB a minute for twelve minutes at a time, the server's memory a saw with no plateau.
RocksDB's block caches fill up to 160 MiB as strings are read back, and only closing the store empties
them (`semreg.storage.handle`): after a flush, once the C heap has grown by `REOPEN_GROWTH` since the store
was opened, and at most once every `REOPEN_MIN_S`, the thread opens it again.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyoxigraph as ox

from semreg import malloc
from semreg.rdf.terms import SR
from semreg.storage import documents
from semreg.storage.rdf_writes import RdfWrites
from semreg.storage.store import INFERRED, ONTOLOGY_PREFIX, Store, Written, ontology_graph

log = logging.getLogger("semreg.at_rest")

NICE = 10  # the thread's CPU priority, below the event loop's: heartbeats first (see the module's notes)
GROUP_QUADS = 200_000  # registrations are written in groups of about this many quads (one bulk load each)
GATHER_S = 2.0  # under a steady stream, a pass starts at most this often, unless a group's worth is pending
GROUP_S = 30.0  # the longest a stop waits for the group being written
FLUSH_QUADS = 200_000  # quads written between two flushes of the store's memtables (about 140 MB of them)
FLUSH_RECORDS = 20_000  # ... or records saved (`Store.save_records`: ~3 KB of memtables each, measured)
FLUSH_EVERY_S = 60.0  # ... and the longest what was written waits for a flush (checked as the thread writes)
RELEASE_AFTER = 10_000  # registrations in a pass after which freed memory goes back to the system at its end
REOPEN_GROWTH = 16 << 20  # bytes of C heap grown since the store was opened that have it opened again
REOPEN_MIN_S = 60.0  # ... and the least time between two openings (at a flush)
SHA256 = ox.NamedNode(SR + "sha256")
STATE = ox.NamedNode(SR + "state")

# a registration waiting: its record as JSON (None: removed), revision, quads, and whether none of its triples can be
# at rest (`records_written`)
Pending = tuple[bytes | None, int, int, bool]

class AtRest:
    """One background thread writing the RDF form of records and graphs; `wait()` for what is asked."""

    def __init__(self, store: Store, monotonic: Callable[[], float] = time.monotonic,
                 heap: Callable[[], int | None] = lambda: getattr(malloc.usage(), "in_use", None)) -> None:
        """`heap`: the bytes of C heap in use (None where unknown: the store is then never reopened)."""
        self.store = store
        self._monotonic = monotonic
        self._heap = heap
        self.writes = RdfWrites(store, stopping=lambda: self._abandon)
        self._cond = threading.Condition()
        self._instances: dict[str, Pending] = {}
        self._quads = 0  # about how many quads the registrations in `_instances` are
        self._last_pass = -GATHER_S  # (time.monotonic) when the last pass took what was pending
        self._ontologies: dict[str, tuple[list[ox.Triple], str] | None] = {}
        self._closure: tuple[list[ox.Triple], str] | None = None
        self._patches: list[tuple[Iterable[ox.Triple], Iterable[ox.Triple], str]] = []  # closure, in order
        self._busy = False
        self._stopping = False
        self._abandon = False  # stop now: what is left is written at the next start
        self._trusted = False  # whether a new id's registration is known to have no triples (`records_written`)
        self._thread = threading.Thread(target=self._run, name="semreg-at-rest", daemon=True)
        self.written = 0  # registrations written or removed as RDF since start
        self.cpu_s = 0.0  # CPU seconds this thread spent writing (its own, not RocksDB's background threads')
        self.flushes = 0
        self._unflushed = 0  # quads written since the store's memtables were last flushed
        self._records_unflushed = 0  # records saved since then (by the store, whose thread counts them here)
        self._flushed_at = monotonic()
        self.reopens = 0  # times the store was closed and opened again
        self._opened_at = monotonic()
        self._heap_at_open: int | None = None  # the C heap after the first flush or the last reopening
        self.last_error: Exception | None = None

    def start(self) -> None:
        """Start the thread: it first compares the RDF on disk with the records (`_reconcile`)."""
        self._busy = True  # until the comparison is done, so that `wait()` waits for it
        self._thread.start()

    # -- what changed (from any thread) -----------------------------------------------------------
    def records_written(self, items: Iterable[Written]) -> None:
        """Records just made durable (`Written`), each waiting as its document's text (`_waiting`). An id with no
        record before has no triples at rest once start-up compared them with the records, while every pass
        succeeds and no removal of it waits: it is written without asking the store which of its group have
        triples (`RdfWrites.registrations`; at ~700,000 instances that query took half of the writer's time)."""
        waiting = [(iid, _waiting(rec, revision, text), new) for iid, rec, revision, text, new in items]
        with self._cond:
            for iid, (doc, revision, quads, _), new in waiting:  # (the right side first: whether it waited before)
                self._instances[iid] = (doc, revision, quads, new and self._trusted and iid not in self._instances)
                self._quads += quads
            self._records_unflushed += len(waiting)
            self._cond.notify_all()

    def put_ontology(self, name: str, triples: list[ox.Triple], sha256: str = "") -> int:
        self._ask(lambda: self._ontologies.__setitem__(name, (triples, sha256)))
        return 0

    def remove_ontology(self, name: str) -> int:
        self._ask(lambda: self._ontologies.__setitem__(name, None))
        return 0

    def put_inferred(self, triples: list[ox.Triple], state: str = "") -> int:
        def change() -> None:
            self._closure = (triples, state)
            self._patches = []
        self._ask(change)
        return 0

    def patch_inferred(self, added: Iterable[ox.Triple], removed: Iterable[ox.Triple], state: str = "") -> int:
        """A change to the closure; the triples are read on this module's thread."""
        self._ask(lambda: self._patches.append((added, removed, state)))
        return 0

    def _ask(self, change: Callable[[], None]) -> None:
        with self._cond:
            change()
            self._cond.notify_all()

    @property
    def pending(self) -> int:
        with self._cond:
            return self._pending_locked()

    def _pending_locked(self) -> int:
        return (len(self._instances) + len(self._ontologies) + (self._closure is not None)
                + bool(self._patches) + self._busy)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until nothing is pending; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending_locked() == 0 or not self._thread.is_alive(), timeout_s)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Write what is pending (for at most `timeout_s`; the rest is written at the next start), then stop."""
        if self._thread.is_alive() and not self.wait(timeout_s):
            log.warning("stopping with registrations not yet written as RDF; they are written at the next start",
                        extra={"pending": self.pending})
            self._abandon = True
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(GROUP_S)  # the group of registrations being written, then it stops

    # -- start-up -----------------------------------------------------------------------------------
    def _reconcile(self) -> None:
        """The thread's first job: queue every registration whose triples are missing or stale, and the
        removal of triples no record holds. Writes made meanwhile are queued already and win."""
        started = time.perf_counter()
        markers = self.writes.markers()
        typed = self.writes.typed()
        revisions = self.store.revisions()
        queued: dict[str, Pending] = {}
        for iid, rev in revisions.items():
            if markers.get(iid) == rev:
                continue
            found = self.store.read_record(iid)
            if found is None or found[0].get("deleted"):
                if iid in markers or iid in typed:
                    queued[iid] = _waiting(None, 0)
            else:
                queued[iid] = _waiting(*found)
        for iid in (set(markers) | typed) - set(revisions):
            queued[iid] = _waiting(None, 0)
        with self._cond:
            for iid, item in queued.items():
                self._instances.setdefault(iid, item)
        writes = sum(1 for doc, *_ in queued.values() if doc is not None)
        if queued:
            log.info("registrations to write as RDF at start-up" + (" (a directory of records only, from an "
                     "earlier version: migrated once)" if not markers and not typed else ""),
                     extra={"write": writes, "remove": len(queued) - writes,
                            "ms": round((time.perf_counter() - started) * 1000)})

    def keep_ontologies(self, names: Iterable[str]) -> None:
        """Remove the graphs of ontologies no longer recorded (after a crash, or an older version's)."""
        keep = {ontology_graph(n) for n in names}
        with self.store.reading() as store:
            graphs = list(store.named_graphs())
        for graph in graphs:
            if isinstance(graph, ox.NamedNode) and graph.value.startswith(ONTOLOGY_PREFIX) and graph not in keep:
                self.remove_ontology(graph.value[len(ONTOLOGY_PREFIX):])

    # -- the thread ---------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
        except (AttributeError, OSError):  # not Linux, or not allowed: the same priority as the rest
            pass
        try:
            self._reconcile()
            with self._cond:
                self._trusted = True
        except Exception as exc:
            self.last_error = exc
            log.exception("comparing the RDF on disk with the records failed; registrations written from now on "
                          "are still written")
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending_locked() > 0 or self._stopping)
                self._cond.wait_for(lambda: self._stopping or self._quads >= GROUP_QUADS,
                                    self._last_pass + GATHER_S - time.monotonic())
                if self._abandon or (self._stopping and self._pending_locked() == 0):
                    return
                self._last_pass = time.monotonic()
                instances, self._instances, self._quads = self._instances, {}, 0
                ontologies, self._ontologies = self._ontologies, {}
                closure, self._closure = self._closure, None
                patches, self._patches = self._patches, []
                self._busy = True
            cpu = time.thread_time()
            try:
                self._pass(instances, ontologies, closure, patches)
            except Exception as exc:  # the thread lives on; start-up rewrites what the markers say is stale
                self.last_error = exc
                with self._cond:
                    self._trusted = False  # what the failed pass left at rest is not known
                log.exception("writing registrations as RDF failed; the next start rewrites them")
            self.cpu_s += time.thread_time() - cpu
            # let the pass go before waiting: a backlog's pass is every record that piled up (at a million
            # registered faster than written, hundreds of thousands of them), and give what it held back at once
            # rather than at the node's next release, up to a minute later
            large = len(instances) >= RELEASE_AFTER
            del instances, ontologies, closure, patches
            if large:
                malloc.release()
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def _pass(self, instances: dict[str, Pending], ontologies: dict[str, tuple[list[ox.Triple], str] | None],
              closure: tuple[list[ox.Triple], str] | None,
              patches: list[tuple[Iterable[ox.Triple], Iterable[ox.Triple], str]]) -> None:
        started = last = time.perf_counter()
        done = 0
        for group, quads in _groups(list(instances.items())):
            if self._abandon:
                return
            self.writes.registrations([(iid, _record(doc), revision, new) for iid, (doc, revision, _, new) in group])
            done += len(group)
            self.written += len(group)
            self._wrote(quads)
            if time.perf_counter() - last > 5:  # a long pass (a migration, a large batch) says how far it is
                last = time.perf_counter()
                log.info("writing registrations as RDF", extra={"done": done, "of": len(instances)})
        for name, graph in ontologies.items():
            self.writes.graph(ontology_graph(name), SHA256, graph)
            self._wrote(len(graph[0]) if graph is not None else 0)
        if closure is not None:
            self.writes.graph(INFERRED, STATE, closure)
            self._wrote(len(closure[0]))
        if patches:
            added, removed, state = _fold(patches)
            self.writes.patch(INFERRED, STATE, added, removed, state)
            self._wrote(len(added) + len(removed))
        log.debug("registrations written as RDF", extra={"instances": len(instances), "ontologies": len(ontologies),
                                                         "closure": closure is not None,
                                                         "ms": round((time.perf_counter() - started) * 1000, 1)})


    def _wrote(self, quads: int) -> None:
        """`quads` more were written: past `FLUSH_QUADS`, or `FLUSH_RECORDS` records saved meanwhile, or
        `FLUSH_EVERY_S` after the last flush, the memtables go to disk and their memory back. The records count:
        registrations go in with bulk loads, which make tables without a memtable, so what fills the memtables
        during a burst is the records themselves (at a million registered at ~4,000 a second, the heap grew by
        ~2.5 GB a minute when only the writer's own quads were counted)."""
        self._unflushed += quads
        with self._cond:
            records = self._records_unflushed
        now = self._monotonic()
        due = (self._unflushed >= FLUSH_QUADS or records >= FLUSH_RECORDS
               or ((self._unflushed > 0 or records > 0) and now - self._flushed_at >= FLUSH_EVERY_S))
        if due and not self._abandon:
            started = time.perf_counter()
            self.store.flush()
            malloc.release()
            self.flushes += 1
            log.debug("store flushed", extra={"quads": self._unflushed,
                                              "ms": round((time.perf_counter() - started) * 1000)})
            self._unflushed = 0
            with self._cond:
                self._records_unflushed -= records
            self._flushed_at = now
            self._reopen_if_grown(now)

    def _reopen_if_grown(self, now: float) -> None:
        heap = self._heap()
        if heap is None or self._heap_at_open is None:
            self._heap_at_open = heap
            return
        if heap - self._heap_at_open < REOPEN_GROWTH or now - self._opened_at < REOPEN_MIN_S:
            return
        started = time.perf_counter()
        if not self.store.reopen():
            log.debug("store not reopened now (a reader, or little free disk); tried again at the next flush")
            return
        malloc.release()
        after = self._heap()
        self.reopens += 1
        self._opened_at = now
        self._heap_at_open = after
        log.info("store reopened, RocksDB's block caches given back",
                 extra={"heap_mib_before": round(heap / 2**20, 1), "heap_mib_after": round((after or 0) / 2**20, 1),
                        "ms": round((time.perf_counter() - started) * 1000)})


def _waiting(rec: dict[str, Any] | None, revision: int, text: bytes | None = None) -> Pending:
    """A registration as it waits to be written, its record as the store's document (`text`, or made here):
    one bytes object of exactly its length. A backlog (~870,000 at a million registered in 413 s) of dicts,
    ~5 small objects each, left arenas half empty among the registry's once written (the server ~1.5 GB larger
    than after a restart); orjson's own output keeps its ~4 KB buffer (9 GB for that backlog)."""
    if rec is None or rec.get("deleted"):
        return None, revision, _quads(None), False
    return text if text is not None else documents.serialised(rec, revision), revision, _quads(rec), False


def _record(doc: bytes | None) -> dict[str, Any] | None:
    """A waiting registration's record, read from its document."""
    if doc is None:
        return None
    found = documents.read(doc)
    if found is None:  # never: the document was made from the record
        raise ValueError("a waiting record's document does not read back")
    return found[0]


def _groups(items: list[tuple[str, Pending]]) -> Iterator[tuple[list[tuple[str, Pending]], int]]:
    """Registrations in groups of about `GROUP_QUADS` quads (a tag is five), each with its quads."""
    group: list[tuple[str, Pending]] = []
    quads = 0
    for item in items:
        group.append(item)
        quads += item[1][2]
        if quads >= GROUP_QUADS:
            yield group, quads
            group, quads = [], 0
    if group:
        yield group, quads


def _quads(rec: dict[str, Any] | None) -> int:
    """About how many quads a registration is at rest (a tag is five)."""
    return 20 + 5 * len(rec.get("tags", ())) if rec is not None else 20


def _fold(patches: list[tuple[Iterable[ox.Triple], Iterable[ox.Triple], str]]
          ) -> tuple[set[ox.Triple], set[ox.Triple], str]:
    """Patches in order as one: the last change of each triple wins; the state is the last one's."""
    added: set[ox.Triple] = set()
    removed: set[ox.Triple] = set()
    for came, went, _ in patches:
        for t in went:
            added.discard(t)
            removed.add(t)
        for t in came:
            removed.discard(t)
            added.add(t)
    return added, removed, patches[-1][2]
