"""The registry's snapshot file, on a real on-disk store: read back only while the store's records are what it
was taken from, whole, and of this version; removed once read or found unusable."""
from __future__ import annotations

import logging
import marshal

import pyoxigraph as ox

from semreg.storage import snapshot
from semreg.storage.store import RECORDS, REVISION, Store

PAYLOAD = {"live": [("a", 1, None), ("b", 2, "draining")], "tombstones": [("c", 3, 1.5)]}


def rec(iid: str, port: int = 1) -> dict:
    return {"id": iid, "service": "s", "address": "h", "port": port}


def saved(tmp_path, records=((rec("a"), 1), (rec("b"), 2))) -> Store:
    store = Store(tmp_path / "d")
    store.save_records(list(records))
    assert snapshot.save(store, PAYLOAD) > 0
    return store


def unused(store: Store, caplog) -> str:
    with caplog.at_level(logging.WARNING, logger="semreg.store"):
        assert snapshot.take(store) is None
    assert not (store.path / snapshot.FILE).exists()
    return caplog.records[-1].why


def test_a_snapshot_is_read_back_once_while_the_records_are_unchanged(tmp_path):
    store = saved(tmp_path)
    del store
    store = Store(tmp_path / "d")  # a restart
    assert snapshot.take(store) == PAYLOAD
    assert not (store.path / snapshot.FILE).exists() and snapshot.take(store) is None


def test_any_change_of_the_records_since_makes_it_unusable(tmp_path, caplog):
    changes = [lambda s: s.save_records([(rec("new"), 9)]),  # one more
               lambda s: s.save_records([(rec("a", 2), 7)]),  # a replacement: as many records as before
               lambda s: s.delete_record("b"),
               lambda s: s.save_records([({"id": "b", "deleted": True, "deleted_at": 1.0}, 8)])]  # a tombstone
    for n, change in enumerate(changes):
        store = saved(tmp_path / str(n))
        change(store)
        assert unused(store, caplog) == "the instance records changed since it was written"


def test_the_fingerprint_is_exact_for_revisions_of_a_hybrid_clock(tmp_path):
    """Revisions are microseconds shifted by ten bits (~2⁶¹): their sum overflows 64 bits at four records; two
    revisions one apart still give two fingerprints."""
    store = Store(tmp_path / "d")
    big = 1_836_000_000_000_000 << 10
    store.save_records([(rec(f"i{k}"), big + k) for k in range(10)])
    count, total = snapshot.fingerprint(store)
    whole, fraction = divmod(sum(big + k for k in range(10)), 10**9)
    assert (count, total) == (10, f"{whole}.{fraction:09d}") == (10, "18800640000.000000045")
    store.save_records([(rec("i3"), big + 10)])  # replaced by a revision one above the newest
    assert snapshot.fingerprint(store) != (count, total)


def test_a_damaged_cut_or_foreign_file_is_not_used(tmp_path, caplog):
    def damaged(data: bytes) -> bytes:
        return data[:-5] + bytes([data[-5] ^ 1]) + data[-4:]

    for n, (spoil, why) in enumerate([
            (damaged, "its content does not match its digest (cut short or damaged)"),
            (lambda data: data[:-10], "its content does not match its digest (cut short or damaged)"),
            (lambda data: b"hello" + data, "not a snapshot file"),
            (lambda data: data[:len(snapshot.MAGIC) + 3], "not a snapshot file")]):
        store = saved(tmp_path / str(n))
        path = store.path / snapshot.FILE
        path.write_bytes(spoil(path.read_bytes()))
        assert unused(store, caplog) == why


def test_a_snapshot_of_another_format_or_python_is_not_used(tmp_path, caplog, monkeypatch):
    store = saved(tmp_path / "format")
    monkeypatch.setattr(snapshot, "FORMAT", snapshot.FORMAT + 1)
    assert unused(store, caplog) == "written by another version"
    monkeypatch.undo()
    store = saved(tmp_path / "python")
    path = store.path / snapshot.FILE
    data = path.read_bytes()
    size = int.from_bytes(data[len(snapshot.MAGIC):len(snapshot.MAGIC) + 8], "big")
    head = marshal.loads(data[len(snapshot.MAGIC) + 8:len(snapshot.MAGIC) + 8 + size])
    other = marshal.dumps({**head, "python": [2, 7]})
    path.write_bytes(snapshot.MAGIC + len(other).to_bytes(8, "big") + other + data[len(snapshot.MAGIC) + 8 + size:])
    assert unused(store, caplog) == "written by another version"


def test_a_store_in_memory_keeps_no_snapshot():
    store = Store(None)
    assert snapshot.save(store, PAYLOAD) == 0 and snapshot.take(store) is None


def test_records_written_by_something_that_knows_nothing_of_it_make_it_unusable(tmp_path, caplog):
    """An earlier version started on the directory meanwhile writes records the way this one does, and
    leaves the file alone."""
    store = saved(tmp_path)
    node = ox.NamedNode("urn:semreg:record:z:5")
    store.ox.add(ox.Quad(node, REVISION, ox.Literal("5", datatype=ox.NamedNode(
        "http://www.w3.org/2001/XMLSchema#integer")), RECORDS))
    assert unused(store, caplog) == "the instance records changed since it was written"
