"""Record layout and its crash consistency, on a real on-disk store."""
from __future__ import annotations

import pyoxigraph as ox
import pytest

from semreg.errors import StopAsked
from semreg.storage import documents
from semreg.storage.store import JSON, RECORD_OF, RECORDS, REVISION, OntologyMeta, Store, instance_node


def rec(iid, port=1):
    return {"id": iid, "service": "s", "address": "h", "port": port}


def test_newest_revision_wins_and_leftovers_are_removed(tmp_path):
    store = Store(tmp_path / "d")
    store.save_records([(rec("a", 1), 1), (rec("b"), 2)])
    # a crash between adding revision 3 and removing revision 1 leaves both
    node = ox.NamedNode("urn:semreg:record:a:3")
    store.ox.extend([ox.Quad(node, RECORD_OF, instance_node("a"), RECORDS),
                     ox.Quad(node, REVISION, ox.Literal("3"), RECORDS),
                     ox.Quad(node, JSON, ox.Literal('{"id": "a", "service": "s", "address": "h", "port": 3}'), RECORDS)])
    # a crash in the middle of a deletion leaves a partial record
    store.ox.remove(ox.Quad(ox.NamedNode("urn:semreg:record:b:2"), RECORD_OF, instance_node("b"), RECORDS))
    del store
    store = Store(tmp_path / "d")
    loaded = {r["id"]: (r["port"], rev) for r, rev in store.load_records()}
    assert loaded == {"a": (3, 3)}
    assert len(list(store.ox.quads_for_pattern(None, None, None, RECORDS))) == 3


def test_whole_records_are_read_without_listing_the_links(tmp_path, monkeypatch):
    """As many links as documents (no removal was cut short): the records are read without the list of
    linked records, which only a partial record needs."""
    store = Store(tmp_path / "d")
    store.save_records([(rec("a", 1), 1), (rec("b", 2), 2), (rec("a", 3), 3)])
    del store
    store = Store(tmp_path / "d")

    def listed(*_):
        raise AssertionError("the linked records were listed")

    monkeypatch.setattr(documents, "linked", listed)
    assert sorted((r["id"], r["port"], rev) for r, rev in store.load_records()) == [("a", 3, 3), ("b", 2, 2)]


def test_a_record_left_partial_among_whole_ones_is_found(tmp_path):
    """One partial record among many is enough for the links to be listed, and it alone goes."""
    store = Store(tmp_path / "d")
    store.save_records([(rec(f"i{k}", k), k + 1) for k in range(50)])
    store.ox.remove(ox.Quad(ox.NamedNode("urn:semreg:record:i7:8"), RECORD_OF, instance_node("i7"), RECORDS))
    del store
    store = Store(tmp_path / "d")
    loaded = {r["id"] for r, _ in store.load_records()}
    assert loaded == {f"i{k}" for k in range(50)} - {"i7"}
    assert not list(store.ox.quads_for_pattern(ox.NamedNode("urn:semreg:record:i7:8"), None, None, RECORDS))


def test_reading_the_records_gives_up_when_a_stop_is_asked_and_removes_nothing(tmp_path, monkeypatch):
    """A stop asked during the read (a million records take 15-40 s) ends it at the next look, every
    `STOP_EVERY` documents; the partial record a full read would remove is still there for the next one."""
    store = Store(tmp_path / "d")
    store.save_records([(rec(f"i{k}", k), k + 1) for k in range(10)])
    partial = ox.Quad(ox.NamedNode("urn:semreg:record:i7:8"), RECORD_OF, instance_node("i7"), RECORDS)
    store.ox.remove(partial)
    monkeypatch.setattr(documents, "STOP_EVERY", 4)
    looks: list[int] = []

    def stopped() -> bool:
        looks.append(len(looks))
        return len(looks) == 2  # asked between the first look (before document 0) and the second (before 4)

    with pytest.raises(StopAsked, match="stopped after 4"):
        store.load_records(stopped)
    assert len(looks) == 2
    assert list(store.ox.quads_for_pattern(ox.NamedNode("urn:semreg:record:i7:8"), None, None, RECORDS))
    assert {r["id"] for r, _ in store.load_records()} == {f"i{k}" for k in range(10)} - {"i7"}
    assert not list(store.ox.quads_for_pattern(ox.NamedNode("urn:semreg:record:i7:8"), None, None, RECORDS))


def test_replacing_and_deleting_records(tmp_path):
    store = Store(tmp_path / "d")
    store.save_records([(rec("a", 1), 1)])
    store.save_records([(rec("a", 2), 2)])
    assert [(r["port"], rev) for r, rev in store.load_records()] == [(2, 2)]
    store.delete_record("a")
    assert store.load_records() == []
    assert len(list(store.ox.quads_for_pattern(None, None, None, RECORDS))) == 0


def test_ontology_records_keep_the_document(tmp_path):
    store = Store(tmp_path / "d")
    meta = OntologyMeta("o", 1, 0, "2026-01-01T00:00:00Z", "text/turtle", {"x": "http://x/"}, "abc")
    store.save_ontology(meta, "<http://x/a> <http://x/b> <http://x/c> .")
    store.save_ontology(OntologyMeta("o", 2, 0, "2026-01-02T00:00:00Z", "text/turtle", {}, "def"), "v2")
    del store
    store = Store(tmp_path / "d")
    [(loaded, source)] = store.load_ontologies()
    assert (loaded.triples, loaded.sha256, source) == (2, "def", "v2")
    store.delete_ontology("o")
    assert store.load_ontologies() == []


def test_prefixes(tmp_path):
    store = Store(tmp_path / "d")
    store.set_prefix("ex", "http://example.org/")
    store.set_prefix("ex", "http://example.org/2/")
    store.set_prefix("y", "http://y/")
    store.delete_prefix("y")
    assert store.load_prefixes() == {"ex": "http://example.org/2/"}
