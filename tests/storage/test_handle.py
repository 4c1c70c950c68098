"""Closing the on-disk store and opening it again (`Store.reopen`): what RocksDB's block caches held comes
back, what the store holds stays, and a reader or a stray reference makes it wait for a later try."""
from __future__ import annotations

import shutil
import threading

import pyoxigraph as ox
import pytest

from semreg import malloc
from semreg.storage.store import RECORDS, Store

G = ox.NamedNode("urn:test:g")
P = ox.NamedNode("urn:test:p")
MIB = 1 << 20


def literals(store: Store, count: int) -> None:
    for start in range(0, count, 10_000):
        store.ox.extend([ox.Quad(ox.NamedNode(f"urn:test:s{i}"), P, ox.Literal("x" * 300 + str(i)), G)
                         for i in range(start, min(count, start + 10_000))])
    store.flush()


@pytest.mark.slow  # 19 MB of strings written and read back, so the caches' growth stands out of the heap's noise
@pytest.mark.skipif(malloc.usage() is None, reason="the C heap is measured through glibc's mallinfo2")
def test_reading_strings_back_fills_the_block_caches_and_a_reopening_empties_them(tmp_path):
    store = Store(tmp_path / "d")
    literals(store, 60_000)  # ~19 MB of strings, on disk after the flush
    malloc.release()
    before = malloc.usage().in_use
    assert sum(1 for _ in store.ox.quads_for_pattern(None, P, None, G)) == 60_000
    filled = malloc.usage().in_use
    assert filled - before > 12 * MIB  # the blocks read stay in RocksDB's caches
    assert store.reopen()
    malloc.release()
    assert malloc.usage().in_use < filled - 12 * MIB
    assert sum(1 for _ in store.ox.quads_for_pattern(None, P, None, G)) == 60_000


def test_a_reopened_store_holds_what_it_held_and_takes_writes(tmp_path):
    store = Store(tmp_path / "d")
    store.load_records()
    store.save_records([({"id": "a", "port": 1}, 1), ({"id": "b", "port": 2}, 2)])
    assert store.reopen()
    store.save_records([({"id": "a", "port": 3}, 3)])
    store.delete_record("b")
    assert store.read_record("a") == ({"id": "a", "port": 3}, 3)
    assert store.read_record("b") is None
    assert store.reopen()
    assert Store.load_records(store) == [({"id": "a", "port": 3}, 3)]


class Watched:
    """The store, saying when it is flushed and when its last reference goes (RocksDB closes then)."""

    def __init__(self, real: ox.Store, events: list[str]) -> None:
        self.real, self.events = real, events

    def flush(self) -> None:
        self.events.append("flushed")
        self.real.flush()

    def __getattr__(self, name: str):
        return getattr(self.real, name)

    def __del__(self) -> None:
        self.events.append("closed")


def test_a_reopening_flushes_before_the_last_reference_goes(tmp_path):
    """The store's destructor writes what the memtables hold with Python's lock held, so every thread of
    the server stood still meanwhile (long enough for a ring member's lease to lapse): the reopening
    flushes first, with the lock let go, and leaves the destructor nothing to write."""
    store = Store(tmp_path / "d")
    literals(store, 1_000)
    store.save_records([({"id": "a"}, 1)])  # in the memtables, not flushed
    events: list[str] = []
    store._handle.ox = store.ox = Watched(store._handle.ox, events)  # type: ignore[assignment]
    assert store.reopen()
    assert events == ["flushed", "closed"]
    assert store.read_record("a") == ({"id": "a"}, 1)
    assert sum(1 for _ in store.ox.quads_for_pattern(None, P, None, G)) == 1_000


def test_a_store_in_memory_is_never_closed(tmp_path):
    store = Store(None)
    store.save_records([({"id": "a"}, 1)])
    assert not store.reopen()
    assert store.read_record("a") == ({"id": "a"}, 1)


def test_a_reader_holds_the_store_open_and_the_reopening_is_skipped(tmp_path):
    store = Store(tmp_path / "d")
    literals(store, 10)
    with store.reading() as reading:
        quads = reading.quads_for_pattern(None, None, None, G)
        assert not store.reopen()
        assert sum(1 for _ in quads) == 10
    del quads, reading
    assert store.reopen()


def test_a_generator_of_foreign_quads_half_read_is_a_reader_until_closed(tmp_path):
    store = Store(tmp_path / "d")
    literals(store, 3)
    quads = store.foreign_quads()
    next(iter(quads))
    assert not store.reopen()
    quads.close()
    assert store.reopen()
    assert len(list(store.foreign_quads())) == 3


def test_a_stray_reference_to_the_store_is_noticed_and_the_store_kept(tmp_path):
    store = Store(tmp_path / "d")
    literals(store, 3)
    held = store.ox  # closing would not close it, and opening again would find the directory locked
    assert not store.reopen()
    assert store.ox is held
    del held
    assert store.reopen()
    assert len(store.ox) == 3


def test_a_reader_arriving_during_a_reopening_waits_for_the_new_store(tmp_path, monkeypatch):
    store = Store(tmp_path / "d")
    store.save_records([({"id": "a"}, 1)])
    opening = threading.Event()
    go_on = threading.Event()
    real = ox.Store

    def slow_open(*args):
        opening.set()
        assert go_on.wait(30)
        return real(*args)

    monkeypatch.setattr("semreg.storage.handle.ox.Store", slow_open)
    reopening = threading.Thread(target=store.reopen)
    reopening.start()
    assert opening.wait(30)
    got: list = []
    reader = threading.Thread(target=lambda: got.append(store.read_record("a")))
    reader.start()
    pause = threading.Event()
    for _ in range(3000):  # until the reader waits at the gate (not before: its read would be no test)
        if store._handle._gate._waiters:  # type: ignore[attr-defined]
            break
        pause.wait(0.01)
    assert store._handle._gate._waiters and got == []  # type: ignore[attr-defined]
    go_on.set()
    reopening.join(30)
    reader.join(30)
    assert got == [({"id": "a"}, 1)]
    assert len(list(store.ox.quads_for_pattern(None, None, None, RECORDS))) == 3


def test_a_store_that_cannot_be_opened_again_at_once_is_retried_until_it_opens(tmp_path, monkeypatch, caplog):
    store = Store(tmp_path / "d")
    store.save_records([({"id": "a"}, 1)])
    real = ox.Store
    failures = iter([OSError("IO error: lock hold by current process")] * 4 + [RuntimeError("IO error: Input/output error")])

    def flaky(*args):
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return real(*args)

    monkeypatch.setattr("semreg.storage.handle.OPEN_RETRY_S", 0.0)
    monkeypatch.setattr("semreg.storage.handle.ox.Store", flaky)
    assert store.reopen()
    assert store.read_record("a") == ({"id": "a"}, 1)
    said = [r for r in caplog.records if r.getMessage().startswith("the data directory's store could not be opened")]
    assert [r.attempt for r in said] == [4, 5]  # the first few are an iterator letting go; then each is told


def test_a_store_on_a_nearly_full_disk_is_not_closed(tmp_path, monkeypatch):
    store = Store(tmp_path / "d")
    store.save_records([({"id": "a"}, 1)])
    kept = store.ox
    monkeypatch.setattr("semreg.storage.handle.shutil.disk_usage", lambda path: shutil._ntuple_diskusage(100, 99, 1))
    assert not store.reopen()  # opening writes new files: a full disk would leave it closed
    assert store.ox is kept
    del kept
    monkeypatch.undo()
    assert store.reopen()
