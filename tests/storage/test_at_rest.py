"""The data directory as RDF (`AtRest`), on a real on-disk store: registrations written as the registry
vocabulary behind their records, replaced and removed; graphs skipped when current; and start-up
repairing whatever a crash or an older version left, markers first."""
from __future__ import annotations

import gc
import logging
import sys
import tracemalloc

import orjson
import pyoxigraph as ox
import pytest

from semreg import kept_json
from semreg.clock import FakeClock
from semreg.storage import at_rest as at_rest_module
from semreg.storage import documents, rdf_writes
from semreg.storage.at_rest import FLUSH_EVERY_S, REOPEN_GROWTH, REOPEN_MIN_S, AtRest
from semreg.storage.rdf_writes import REVISION
from semreg.storage.registrations import Reader
from semreg.storage.store import INFERRED, INSTANCE_PREFIX, RECORDS, REGISTRY, Store, instance_node, ontology_graph
from semreg.storage.vocabulary import instance_nquads, record_view

EX = "http://ex.org/"


def opened(path, small_transactions: bool = True, bulk: bool = False) -> tuple[Store, AtRest]:
    gc.collect()  # a store and its writer refer to each other: the one closed before is gone only then
    store = Store(path)
    store.load_records()
    at_rest = AtRest(store)
    if small_transactions:  # a registration takes several transactions
        at_rest.writes.chunk_lines, at_rest.writes.chunk_tags = 7, 3
    if bulk:  # every group of registrations goes in with a bulk load, its markers after
        at_rest.writes.bulk_quads = 1
    store.on_written = at_rest.records_written
    at_rest.start()
    assert at_rest.wait(60)
    return store, at_rest


def registrations(store: Store, markers: bool = True) -> dict[str, tuple[dict, int]]:
    """What the registry graph holds, read back (a store renames blank nodes: tags in the order of what they say);
    `markers` False: without the revisions and owners (all read as revision 0)."""
    reader = Reader()
    reader.extend(store.ox.quads_for_pattern(None, None, None, REGISTRY))
    if markers:
        reader.extend(store.ox.quads_for_pattern(None, None, None, RECORDS))
    records, problems = reader.records()
    assert problems == []
    return {r["id"]: (r, rev) for r, rev in records}


def rec(iid: str, port: int = 80, tags: int = 2, **extra) -> dict:
    return {"id": iid, "service": "svc", "address": "10.0.0.1", "port": port, "scheme": "http",
            "tags": sorted([f"{EX}C{k}", f"{EX}p", f"{EX}O{port}"] for k in range(tags)), "weight": 1,
            "capacity": None, "ttl": 30.0, "deregister_after": 90.0, "check": None, "meta": {"zone": "a"},
            "owner": None, "environment": "default", "registered_at": 1764580000.5, **extra}


@pytest.mark.parametrize("bulk", [False, True], ids=["loads", "bulk load"])
def test_registrations_follow_their_records(tmp_path, bulk):
    store, at_rest = opened(tmp_path / "d", bulk=bulk)
    store.save_records([(rec("a", 1), 1), (rec("b", 2, tags=30), 2)])
    assert at_rest.wait(60)
    assert registrations(store) == {"a": (rec("a", 1), 1), "b": (rec("b", 2, tags=30), 2)}
    store.save_records([(rec("a", 3, tags=1, admin_status="draining", owner="t"), 3)])
    store.save_records([({"id": "b", "deleted": True, "deleted_at": 1.0}, 4)])
    assert at_rest.wait(60)
    assert registrations(store) == {"a": (rec("a", 3, tags=1, admin_status="draining", owner="t"), 3)}
    store.delete_record("a")
    assert at_rest.wait(60)
    assert list(store.ox.quads_for_pattern(None, None, None, REGISTRY)) == []
    assert list(store.ox.quads_for_pattern(instance_node("a"), None, None, RECORDS)) == []
    at_rest.stop()


def test_a_record_waits_as_it_was_written_and_not_as_the_callers_dict(tmp_path):
    """A backlog of records waiting to be written is one JSON text each: the writer keeps no reference to the
    dicts it was handed (their small objects would outlive the backlog as holes among the registry's), and a
    dict changed afterwards changes nothing at rest."""
    store, at_rest = opened(tmp_path / "d", bulk=True)
    written = rec("a", 1, tags=3)
    tags = written["tags"]
    before = sys.getrefcount(written), sys.getrefcount(tags)
    store.save_records([(written, 1)])
    assert (sys.getrefcount(written), sys.getrefcount(tags)) == before
    tags.append([f"{EX}Changed", f"{EX}p", f"{EX}Later"])
    written["port"] = 9
    assert at_rest.wait(60)
    assert registrations(store) == {"a": (rec("a", 1, tags=3), 1)}
    at_rest.stop()


@pytest.mark.parametrize("given", [True, False], ids=["the store's document", "serialised here"])
def test_a_waiting_record_costs_about_the_length_of_its_json(tmp_path, given):
    """orjson's output keeps the whole buffer it wrote into (~4 KB); a backlog of a million records held so made
    the server 9 GB. What waits is sized to its text (the writer not started here: every record waits): the
    document the store wrote, or made here when the caller has none (a record read back at start-up)."""
    at_rest = AtRest(Store(tmp_path / "d"))
    records = [rec(f"i{k}", k, tags=3) for k in range(2000)]
    text = sum(len(orjson.dumps(r)) for r in records)
    tracemalloc.start()
    try:
        at_rest.records_written([(r["id"], r, 1, documents.serialised(r, 1) if given else None, True) for r in records])
        # what the writer's module (and the JSON it makes) holds, not what other threads allocate meanwhile
        mine = [tracemalloc.Filter(True, at_rest_module.__file__), tracemalloc.Filter(True, kept_json.__file__)]
        held = sum(t.size for t in tracemalloc.take_snapshot().filter_traces(mine).traces)
    finally:
        tracemalloc.stop()
    assert at_rest.pending == len(records)
    assert held < 2 * text, (held, text)  # the text, and a tuple and an entry each (4 KB each as orjson gave it)


def test_a_directory_of_records_only_is_migrated_once(tmp_path, caplog):
    store = Store(tmp_path / "d")  # as an earlier version wrote it: records, no RDF
    store.save_records([(rec(f"i{n}", n), n + 1) for n in range(20)] + [({"id": "gone", "deleted": True,
                                                                           "deleted_at": 1.0}, 99)])
    del store
    with caplog.at_level(logging.INFO, logger="semreg.at_rest"):
        store, at_rest = opened(tmp_path / "d")
    assert len(registrations(store)) == 20
    [line] = [r for r in caplog.records if "migrated once" in r.getMessage()]
    assert (line.write, line.remove) == (20, 0)
    at_rest.stop()
    del store, at_rest
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="semreg.at_rest"):
        store, at_rest = opened(tmp_path / "d")  # nothing left to write
    assert not [r for r in caplog.records if "start-up" in r.getMessage()]
    at_rest.stop()


@pytest.mark.parametrize("crash", ["marker removed", "stale triples kept", "removed, not yet rewritten",
                                   "record removed"])
def test_start_up_repairs_what_a_crash_left(tmp_path, crash):
    store, at_rest = opened(tmp_path / "d")
    store.save_records([(rec("a", 1, tags=10), 1), (rec("b", 2), 2)])
    assert at_rest.wait(60)
    at_rest.stop()
    node = instance_node("a")
    [marker] = store.ox.quads_for_pattern(node, REVISION, None, RECORDS)
    tag_quads = [q for t in store.ox.quads_for_pattern(node, None, None, REGISTRY) if isinstance(t.object, ox.BlankNode)
                 for q in store.ox.quads_for_pattern(t.object, None, None, REGISTRY)]
    if crash == "marker removed":  # the next revision's record was durable, its RDF not begun
        store.ox.remove(marker)
        store.save_records([(rec("a", 5, tags=3), 3)])
    elif crash == "stale triples kept":  # the marker went, the old triples not yet
        store.ox.remove(marker)
        store.ox.add(ox.Quad(node, ox.NamedNode("https://w3id.org/semreg#port"), ox.Literal("9"), REGISTRY))
    elif crash == "removed, not yet rewritten":  # the group's old triples went, the new ones not yet in
        for q in [*store.ox.quads_for_pattern(node, None, None, None), *tag_quads]:
            store.ox.remove(q)
    else:  # the record was removed (a deletion), the triples not yet
        store.delete_record("a")
    expected = {rid: found for rid in ("a", "b") if (found := store.read_record(rid)) is not None}
    del store, at_rest
    store, at_rest = opened(tmp_path / "d", small_transactions=False)
    assert registrations(store) == expected
    at_rest.stop()


def test_a_kill_between_a_bulk_load_and_its_markers_is_repaired_at_start(tmp_path):
    store, at_rest = opened(tmp_path / "d", bulk=True)
    store.save_records([(rec("a", 1, tags=10), 1), (rec("b", 2), 2)])
    assert at_rest.wait(60)
    at_rest.stop()
    # a replacement of "a" and a new "c": records durable, the old triples of "a" removed and the new triples
    # of both bulk-loaded, the process killed before their markers went in
    store.save_records([(rec("a", 5, tags=3), 3), (rec("c", 7, tags=4), 4)])
    at_rest.writes._remove(f"<{instance_node('a').value}>")
    store.ox.bulk_load("".join(instance_nquads(record_view(r)) for r in (rec("a", 5, tags=3), rec("c", 7, tags=4))),
                       format=ox.RdfFormat.N_QUADS)
    assert set(registrations(store, markers=False)) == {"a", "b", "c"}
    del store, at_rest
    store, at_rest = opened(tmp_path / "d", bulk=True)
    assert registrations(store) == {"a": (rec("a", 5, tags=3), 3), "b": (rec("b", 2), 2), "c": (rec("c", 7, tags=4), 4)}
    at_rest.stop()


class PresenceAsked:
    """The ids the writer asked the store about (which have triples at rest) before writing them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ids: list[str] = []
        real = rdf_writes.instance_rows

        def rows(store, query):
            if query.startswith(rdf_writes._PRESENT.split("$V")[0]):
                self.ids += [iri[len(INSTANCE_PREFIX) + 1:-1] for iri in query.split("VALUES ?i {")[1].split("}")[0].split()]
            return real(store, query)
        monkeypatch.setattr(rdf_writes, "instance_rows", rows)


@pytest.mark.parametrize("bulk", [False, True], ids=["loads", "bulk load"])
def test_a_new_id_is_written_without_asking_which_triples_are_at_rest(tmp_path, monkeypatch, bulk):
    """Only an id that had a record, or whose removal still waits, may have triples at rest."""
    store, at_rest = opened(tmp_path / "d", bulk=bulk)
    asked = PresenceAsked(monkeypatch)
    store.save_records([(rec(f"n{k}", k, tags=3), k + 1) for k in range(50)])
    assert at_rest.wait(60)
    assert asked.ids == []
    store.save_records([(rec("n1", 99, tags=1), 60)])  # a new revision: its old triples are at rest
    assert at_rest.wait(60)
    assert asked.ids == ["n1"]
    assert registrations(store) == {f"n{k}": (rec(f"n{k}", k, tags=3), k + 1) for k in range(50)} | {
        "n1": (rec("n1", 99, tags=1), 60)}
    at_rest.stop()


def test_an_id_registered_again_while_its_removal_waits_is_not_doubled(tmp_path, monkeypatch):
    store, at_rest = opened(tmp_path / "d")
    store.save_records([(rec("a", 1, tags=4), 1)])
    assert at_rest.wait(60)
    asked = PresenceAsked(monkeypatch)
    with at_rest._cond:  # the writer busy meanwhile: both wait together
        store.delete_record("a")  # its record gone: "a" has no record, and its triples wait to be removed
        store.save_records([(rec("a", 2, tags=2), 2)])
    assert at_rest.wait(60)
    assert asked.ids == ["a"]
    assert registrations(store) == {"a": (rec("a", 2, tags=2), 2)}
    at_rest.stop()


def test_after_a_failed_pass_new_ids_are_asked_about(tmp_path, monkeypatch):
    """What a failed pass left at rest is not known (the next start compares it): from then on every id is asked
    about before it is written."""
    store, at_rest = opened(tmp_path / "d")
    real = at_rest.writes.registrations
    calls = []

    def failing_once(items):
        calls.append(items)
        if len(calls) == 1:
            raise OSError("the disk said no")
        return real(items)
    monkeypatch.setattr(at_rest.writes, "registrations", failing_once)
    store.save_records([(rec("a", 1), 1)])
    assert at_rest.wait(60) and isinstance(at_rest.last_error, OSError)
    asked = PresenceAsked(monkeypatch)
    store.save_records([(rec("b", 2), 2)])
    assert at_rest.wait(60)
    assert asked.ids == ["b"]
    assert registrations(store) == {"b": (rec("b", 2), 2)}
    at_rest.stop()


def test_registrations_made_while_start_up_compares_are_asked_about(tmp_path, monkeypatch):
    """A kill left triples of "a" whose record was removed: a registration of "a" made before start-up has
    compared the RDF with the records must not be taken as new."""
    store, at_rest = opened(tmp_path / "d")
    store.save_records([(rec("a", 1, tags=4), 1)])
    assert at_rest.wait(60)
    at_rest.stop()
    store.on_written = None
    store.delete_record("a")  # durable, its RDF removal lost to a kill
    del store, at_rest
    gc.collect()
    store = Store(tmp_path / "d")
    store.load_records()
    at_rest = AtRest(store)
    store.on_written = at_rest.records_written
    asked = PresenceAsked(monkeypatch)
    store.save_records([(rec("a", 2, tags=2), 2)])  # before the writer starts: start-up has not compared yet
    at_rest.start()
    assert at_rest.wait(60)
    assert "a" in asked.ids
    assert registrations(store) == {"a": (rec("a", 2, tags=2), 2)}
    at_rest.stop()


def test_graphs_are_rewritten_only_when_they_changed(tmp_path):
    store, at_rest = opened(tmp_path / "d")
    t = [ox.Triple(ox.NamedNode(f"{EX}A{n}"), ox.NamedNode(f"{EX}sub"), ox.NamedNode(f"{EX}B")) for n in range(20)]
    at_rest.put_ontology("o", t, "sha-1")
    at_rest.put_inferred(t[:5], "state-1")
    at_rest.patch_inferred(t[5:8], t[:2], "state-2")
    at_rest.patch_inferred(t[:1], [], "state-3")
    assert at_rest.wait(60)
    inferred = {ox.Triple(q.subject, q.predicate, q.object) for q in store.ox.quads_for_pattern(None, None, None, INFERRED)}
    assert inferred == {t[0], *t[2:8]}
    assert [q.object.value for q in store.ox.quads_for_pattern(INFERRED, None, None, RECORDS)] == ["state-3"]
    store.ox.add(ox.Quad(ox.NamedNode(f"{EX}mark"), ox.NamedNode(f"{EX}p"), ox.Literal("x"), ontology_graph("o")))
    at_rest.put_ontology("o", t, "sha-1")  # the same document: the graph on disk is current, left alone
    assert at_rest.wait(60)
    assert len(list(store.ox.quads_for_pattern(None, None, None, ontology_graph("o")))) == 21
    at_rest.put_ontology("o", t[:3], "sha-2")
    at_rest.keep_ontologies([])
    assert at_rest.wait(60)
    assert not store.ox.contains_named_graph(ontology_graph("o"))
    at_rest.stop()


@pytest.mark.slow  # enough records (3,000) that a stop finds work left
def test_a_stop_that_cannot_wait_leaves_the_rest_to_the_next_start(tmp_path):
    store, at_rest = opened(tmp_path / "d", small_transactions=False)
    store.save_records([(rec(f"i{n}", n, tags=5), n + 1) for n in range(3000)])
    at_rest.stop(timeout_s=0)  # asked to stop at once: the thread stops between two groups
    assert not at_rest._thread.is_alive()
    expected = {f"i{n}": (rec(f"i{n}", n, tags=5), n + 1) for n in range(3000)}
    del store, at_rest
    store, at_rest = opened(tmp_path / "d", small_transactions=False)
    assert registrations(store) == expected
    at_rest.stop()


def test_a_trickle_of_writes_is_flushed_once_a_minute(tmp_path):
    """Under steady churn the count of quads is reached only after many minutes: time flushes too."""
    clock = FakeClock()
    store = Store(tmp_path / "d")
    at_rest = AtRest(store, clock.monotonic)
    store.on_written = at_rest.records_written
    at_rest.start()
    assert at_rest.wait(60)
    store.save_records([(rec("i0", 0), 1)])
    assert at_rest.wait(60) and at_rest.flushes == 0  # a moment after the last flush: not yet
    clock.advance(FLUSH_EVERY_S)
    store.save_records([(rec("i1", 1), 2)])
    assert at_rest.wait(60) and at_rest.flushes == 1
    store.save_records([(rec("i2", 2), 3)])
    assert at_rest.wait(60) and at_rest.flushes == 1  # the minute starts again at the flush
    assert set(registrations(store)) == {"i0", "i1", "i2"}
    at_rest.stop()


def test_the_store_is_opened_again_after_a_flush_once_the_heap_grew(tmp_path):
    """RocksDB's block caches fill as strings are read back: past `REOPEN_GROWTH` of C heap since the store
    was opened, and no sooner than `REOPEN_MIN_S`, a flush is followed by closing and opening the store."""
    clock = FakeClock()
    heap = [100 << 20]
    store = Store(tmp_path / "d")
    store.load_records()
    at_rest = AtRest(store, clock.monotonic, heap=lambda: heap[0])
    store.on_written = at_rest.records_written
    at_rest.start()
    n = 0

    def minute_of_writes() -> None:
        nonlocal n
        clock.advance(FLUSH_EVERY_S)
        n += 1
        store.save_records([(rec(f"i{n}", n), n)])
        assert at_rest.wait(60)

    minute_of_writes()  # the first flush: the heap as it is now is the mark
    heap[0] += REOPEN_GROWTH - 1
    minute_of_writes()
    assert at_rest.flushes == 2 and at_rest.reopens == 0  # grown, but not enough
    heap[0] += 1
    minute_of_writes()
    assert at_rest.reopens == 1
    heap[0] += 2 * REOPEN_GROWTH  # the heap after the reopening is the new mark
    with store.reading():  # a reader is iterating: tried again at the next flush
        minute_of_writes()
    assert at_rest.reopens == 1
    if FLUSH_EVERY_S < REOPEN_MIN_S:
        clock.advance(REOPEN_MIN_S)
    minute_of_writes()
    assert at_rest.reopens == 2
    assert set(registrations(store)) == {f"i{k}" for k in range(1, n + 1)}
    assert {r["id"] for r, _ in store.load_records()} == {f"i{k}" for k in range(1, n + 1)}
    at_rest.stop()


def test_a_store_is_not_opened_again_where_the_heap_is_not_known(tmp_path):
    clock = FakeClock()
    store = Store(tmp_path / "d")
    at_rest = AtRest(store, clock.monotonic, heap=lambda: None)
    store.on_written = at_rest.records_written
    at_rest.start()
    for n in range(3):
        clock.advance(max(FLUSH_EVERY_S, REOPEN_MIN_S))
        store.save_records([(rec(f"i{n}", n), n + 1)])
        assert at_rest.wait(60)
    assert at_rest.flushes == 3 and at_rest.reopens == 0
    at_rest.stop()


@pytest.mark.parametrize("counted", ["quads written", "records saved"])
def test_the_store_is_flushed_as_rdf_piles_up_so_its_memtables_stay_small(tmp_path, monkeypatch, counted):
    """Flushed past so many quads written as RDF, or past so many records saved: with bulk loads, which make
    tables without a memtable, the records are what fills the memtables in a burst."""
    if counted == "quads written":
        monkeypatch.setattr("semreg.storage.at_rest.FLUSH_QUADS", 500)
    else:
        monkeypatch.setattr("semreg.storage.at_rest.FLUSH_QUADS", 10**9)
        monkeypatch.setattr("semreg.storage.at_rest.FLUSH_RECORDS", 30)
    path = tmp_path / "d"
    store, at_rest = opened(path, bulk=counted == "records saved")
    wrote = {f"i{k}": (rec(f"i{k}", k, tags=20), k + 1) for k in range(40)}  # 40 × 120 quads
    store.save_records(list(wrote.values()))
    assert at_rest.wait(60)
    assert at_rest.flushes >= 1
    assert table_bytes(path) > 0  # what was written went out of the memtables into tables
    assert registrations(store) == wrote
    at_rest.stop()


def test_a_pass_is_let_go_of_before_the_writer_waits(tmp_path):
    """A backlog's pass holds every record that piled up; kept while the thread waited, a million registered
    faster than written left hundreds of thousands of records in the server after the RDF had settled."""
    store, at_rest = opened(tmp_path / "d")
    store.save_records([(rec(f"i{k}", k), k + 1) for k in range(50)])
    assert at_rest.wait(60) and at_rest.written >= 50
    assert not {"instances", "ontologies", "closure", "patches"} & pass_locals(at_rest._thread)
    at_rest.stop()


def table_bytes(path) -> int:
    """The bytes of the store's tables: one a compaction deletes while they are listed counts nothing."""
    total = 0
    for table in path.glob("*.sst"):
        try:
            total += table.stat().st_size
        except FileNotFoundError:
            continue
    return total


def pass_locals(thread) -> set[str]:
    """The names bound in a background thread's `_run` frame, as it waits for what comes next."""
    frame = sys._current_frames()[thread.ident]
    while frame is not None and frame.f_code.co_name != "_run":
        frame = frame.f_back
    assert frame is not None, "the thread is not in its _run"
    return set(frame.f_locals)
