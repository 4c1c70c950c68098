"""A registration written at rest (`record_nquads`) and read back (`Reader`): the same record, in the
same order, from a file's text or from a store; what cannot be a registration is named, not raised."""
from __future__ import annotations

import pyoxigraph as ox
from hypothesis import given, settings
from hypothesis import strategies as st

from semreg.storage.registrations import Reader
from semreg.storage.store import RECORDS, REGISTRY
from semreg.storage.vocabulary import record_nquads

ANY = "https://w3id.org/semreg#Any"
REC = {"id": "a.b:1", "service": 's"x', "address": "10.0.0.1", "port": 80, "scheme": "https",
       "tags": [["http://e/Z", "http://e/p", ANY]] + [[f"http://e/C{k}", "http://e/p", "http://e/o"] for k in range(12)],
       "weight": 3, "capacity": 7, "ttl": 0.0, "deregister_after": 90.0,
       "check": {"http": "http://x/h", "tcp": None, "interval": 5.0, "timeout": 1.0},
       "meta": {"z": "1", "a": "é\n"}, "owner": "ops-token", "environment": "prod",
       "registered_at": 1764580000.123, "admin_status": "draining"}


def read(quads) -> tuple[list, list]:
    reader = Reader()
    reader.extend(quads)
    return reader.records()


def test_a_registration_reads_back_as_it_was_written():
    text = record_nquads(REC, 42)
    assert read(ox.parse(text.encode(), format=ox.RdfFormat.N_QUADS)) == ([(REC, 42)], [])


def test_the_bookkeeping_is_in_the_records_graph_and_the_rest_in_the_registry():
    quads = list(ox.parse(record_nquads(REC, 42).encode(), format=ox.RdfFormat.N_QUADS))
    books = {(q.predicate.value, q.object.value) for q in quads if q.graph_name == RECORDS}
    assert books == {("https://w3id.org/semreg#revision", "42"), ("https://w3id.org/semreg#owner", "ops-token")}
    status = [q.object.value for q in quads if q.predicate.value == "https://w3id.org/semreg#status"]
    assert status == ["draining"] and {q.graph_name for q in quads} == {RECORDS, REGISTRY}


def test_from_a_store_which_renames_blank_nodes_the_tags_come_in_the_order_of_what_they_say():
    store = ox.Store()
    store.load(record_nquads(REC, 42).encode(), format=ox.RdfFormat.N_QUADS)
    (rec, revision), = read(store.quads_for_pattern(None, None, None, None))[0]
    assert revision == 42 and sorted(rec["tags"]) == rec["tags"] == sorted(REC["tags"])
    assert {k: v for k, v in rec.items() if k != "tags"} == {k: v for k, v in REC.items() if k != "tags"}


def test_an_incomplete_registration_is_a_problem_naming_the_instance():
    text = record_nquads(REC, 42)
    broken = "\n".join(line for line in text.splitlines() if "#port>" not in line) + "\n"
    records, problems = read(ox.parse(broken.encode(), format=ox.RdfFormat.N_QUADS))
    assert records == [] and [str(p) for p in problems] == ["instance a.b:1: it has no port"]


def test_quads_about_anything_else_are_left_to_the_caller():
    reader = Reader()
    other = ox.Quad(ox.NamedNode("http://e/x"), ox.NamedNode("http://e/p"), ox.Literal("1"), ox.NamedNode("urn:other"))
    assert reader.add(other) is False and reader.records() == ([], [])


texts = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)


@settings(max_examples=60, deadline=None)
@given(service=texts, meta=st.dictionaries(texts, st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
                                         max_size=4),
       owner=st.none() | texts, ntags=st.integers(0, 15))
def test_any_text_round_trips(service, meta, owner, ntags):
    rec = {**REC, "service": service, "meta": meta, "owner": owner,
           "tags": [[f"http://e/C{k}", "http://e/p", "http://e/o"] for k in range(ntags)]}
    assert read(ox.parse(record_nquads(rec, 1).encode(), format=ox.RdfFormat.N_QUADS)) == ([(rec, 1)], [])
