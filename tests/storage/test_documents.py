"""Instance records' documents as this version writes them (with their revision) and as earlier ones did,
read back together at start-up, on a real on-disk store."""
from __future__ import annotations

import orjson
import pyoxigraph as ox
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semreg.storage import documents
from semreg.storage.documents import DOCUMENT, OLD_DOCUMENT
from semreg.storage.store import RECORD_OF, RECORDS, REVISION, Store, instance_node


def rec(iid, port=1):
    return {"id": iid, "service": "s", "address": "h", "port": port}


def document(record, rev):
    """The document literal the store writes for `record` at `rev`."""
    return ox.Literal(documents.serialised(record, rev).decode())


def old_record(store, iid, rev, text=None):
    """A record as an earlier version wrote it: the revision only in its IRI."""
    node = ox.NamedNode(f"urn:semreg:record:{iid}:{rev}")
    store.ox.extend([ox.Quad(node, RECORD_OF, instance_node(iid), RECORDS),
                     ox.Quad(node, REVISION, ox.Literal(str(rev)), RECORDS),
                     ox.Quad(node, OLD_DOCUMENT, ox.Literal(text or orjson.dumps(rec(iid, rev)).decode()), RECORDS)])


def test_a_document_says_its_revision_and_reads_back_without_it(tmp_path):
    store = Store(tmp_path / "d")
    store.save_records([(rec("a", 7), 7)])
    (q,) = store.ox.quads_for_pattern(None, DOCUMENT, None, RECORDS)
    assert q.subject.value == "urn:semreg:record:a:7"
    assert orjson.loads(q.object.value)["revision"] == 7
    del store
    store = Store(tmp_path / "d")
    assert store.load_records() == [(rec("a", 7), 7)]
    assert store.read_record("a") == (rec("a", 7), 7)


def test_records_of_an_earlier_version_and_of_this_one_are_read_together(tmp_path):
    store = Store(tmp_path / "d")
    old_record(store, "a", 3)
    old_record(store, "b", 9)
    store.save_records([(rec("b", 10), 10), (rec("c", 11), 11)])  # b superseded by this version
    del store
    store = Store(tmp_path / "d")
    loaded = sorted((r["id"], r["port"], rev) for r, rev in store.load_records())
    assert loaded == [("a", 3, 3), ("b", 10, 10), ("c", 11, 11)]
    assert store.read_record("a") == (rec("a", 3), 3)
    # ... and the earlier version's records are in this one's form from then on
    assert not list(store.ox.quads_for_pattern(None, OLD_DOCUMENT, None, RECORDS))
    assert {q.subject.value for q in store.ox.quads_for_pattern(None, DOCUMENT, None, RECORDS)} == {
        "urn:semreg:record:a:3", "urn:semreg:record:b:10", "urn:semreg:record:c:11"}
    del store
    store = Store(tmp_path / "d")
    assert sorted((r["id"], r["port"], rev) for r, rev in store.load_records()) == loaded


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.text(max_size=8), st.text(max_size=20), max_size=4))
def test_an_earlier_record_rewritten_keeps_every_character(tmp_path_factory, meta):
    """Quotes, backslashes, line breaks, any code point: the rewrite goes through a SPARQL update's text."""
    path = tmp_path_factory.mktemp("d")
    store = Store(path)
    old_record(store, "a", 3, orjson.dumps({**rec("a", 3), "meta": meta}).decode())
    assert store.load_records() == [({**rec("a", 3), "meta": meta}, 3)]
    del store
    store = Store(path)
    assert store.load_records() == [({**rec("a", 3), "meta": meta}, 3)]
    assert not list(store.ox.quads_for_pattern(None, OLD_DOCUMENT, None, RECORDS))


def test_a_record_rewritten_halfway_has_both_forms_and_is_read_once(tmp_path):
    store = Store(tmp_path / "d")
    old_record(store, "a", 3)
    node = ox.NamedNode("urn:semreg:record:a:3")
    store.ox.add(ox.Quad(node, DOCUMENT, document(rec("a", 3), 3), RECORDS))  # a crash came next
    del store
    store = Store(tmp_path / "d")
    assert store.load_records() == [(rec("a", 3), 3)]
    assert {q.predicate for q in store.ox.quads_for_pattern(node, None, None, RECORDS)} == {RECORD_OF, REVISION,
                                                                                               DOCUMENT}


@pytest.mark.parametrize("written_by", ["this version", "an earlier version"])
def test_a_record_half_removed_is_garbage_and_the_older_linked_one_stays(tmp_path, written_by):
    """A crash after revision 5 was written and before the revision 4 it superseded went, then another in
    the middle of removing 5 (its link goes first): 4 is what the directory says."""
    store = Store(tmp_path / "d")
    store.save_records([(rec("a", 4), 4)])
    if written_by == "this version":
        store.ox.extend([ox.Quad(ox.NamedNode("urn:semreg:record:a:5"), DOCUMENT, document(rec("a", 5), 5),
                                 RECORDS)])
    else:
        old_record(store, "a", 5)
        store.ox.remove(ox.Quad(ox.NamedNode("urn:semreg:record:a:5"), RECORD_OF, instance_node("a"), RECORDS))
    del store
    store = Store(tmp_path / "d")
    assert store.load_records() == [(rec("a", 4), 4)]
    assert {q.subject.value for q in store.ox.quads_for_pattern(None, None, None, RECORDS)} == {"urn:semreg:record:a:4"}


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"id": "a"}', '{"id": "a", "revision": "2"}',
                                  '{"id": "a", "revision": true}', '{"revision": 2}'])
def test_an_unreadable_document_is_garbage(tmp_path, text):
    store = Store(tmp_path / "d")
    store.save_records([(rec("b"), 1)])
    node = ox.NamedNode("urn:semreg:record:a:2")
    store.ox.extend([ox.Quad(node, RECORD_OF, instance_node("a"), RECORDS), ox.Quad(node, DOCUMENT, ox.Literal(text), RECORDS)])
    del store
    store = Store(tmp_path / "d")
    assert store.load_records() == [(rec("b"), 1)]
    assert not list(store.ox.quads_for_pattern(node, None, None, RECORDS))


@pytest.mark.slow  # a store on disk opened twice an example
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 30), st.booleans(), st.booleans()), max_size=12))
def test_the_newest_linked_record_of_each_instance_wins_whoever_wrote_it(tmp_path_factory, written):
    """Records of either version, some with their link removed (a removal cut short): each instance's
    newest linked record is read, every other record goes."""
    path = tmp_path_factory.mktemp("d")
    store = Store(path)
    kept: dict[str, int] = {}
    for iid, rev, old, linked in {(i, r): (i, r, o, k) for i, r, o, k in written}.values():
        node = ox.NamedNode(f"urn:semreg:record:{iid}:{rev}")
        if old:
            old_record(store, iid, rev)
        else:
            store.ox.extend([ox.Quad(node, RECORD_OF, instance_node(iid), RECORDS),
                             ox.Quad(node, DOCUMENT, document(rec(iid, rev), rev), RECORDS)])
        if not linked:
            store.ox.remove(ox.Quad(node, RECORD_OF, instance_node(iid), RECORDS))
        elif rev > kept.get(iid, 0):
            kept[iid] = rev
    del store
    store = Store(path)
    assert {r["id"]: (r["port"], rev) for r, rev in store.load_records()} == {i: (r, r) for i, r in kept.items()}
    left = {q.subject.value for q in store.ox.quads_for_pattern(None, None, None, RECORDS)}
    assert left == {f"urn:semreg:record:{i}:{r}" for i, r in kept.items()}
