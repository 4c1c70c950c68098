"""The data directory's RDF transactions (`RdfWrites`): N-Quads cut only where no blank node is split
from its link, and each transaction started in a gap between record writes, or after waiting its most."""
from __future__ import annotations

import re

import pyoxigraph as ox
from hypothesis import given, settings
from hypothesis import strategies as st

from semreg.storage import rdf_writes
from semreg.storage.rdf_writes import MAX_WAIT_S, POLL_S, RdfWrites
from semreg.storage.store import RECORDS, REGISTRY, Store, instance_node
from semreg.storage.vocabulary import record_nquads

LABEL = re.compile(r"_:[A-Za-z0-9]+")


def rec(iid: str, tags: int, meta: int) -> dict:
    return {"id": iid, "service": "s", "address": "h", "port": 1, "tags": [[f"http://e/C{k}", "http://e/p", "http://e/o"]
                                                                          for k in range(tags)],
            "meta": {f"k{k}": "v" for k in range(meta)}, "ttl": 30.0, "deregister_after": 90.0, "scheme": "http",
            "weight": 1, "environment": "default"}


@settings(max_examples=80, deadline=None)
@given(shapes=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 4)), min_size=1, max_size=6),
       size=st.integers(1, 60))
def test_no_blank_node_is_split_across_two_loads(shapes, size):
    text = "".join(record_nquads(rec(f"i{n}", tags, meta), 1) for n, (tags, meta) in enumerate(shapes))
    chunks = [c.decode() for c in rdf_writes._chunks(text, size)]
    assert "".join(chunks) == text
    seen: dict[str, int] = {}
    for n, chunk in enumerate(chunks):
        for label in set(LABEL.findall(chunk)):
            assert seen.setdefault(label, n) == n, f"{label} in loads {seen[label]} and {n}"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


def test_a_transaction_waits_while_a_record_write_is_queued_or_running():
    clock = Clock()
    store = Store(None)
    writes = RdfWrites(store, clock=lambda: clock.now, sleep=clock.sleep)
    writes.quiet()  # nothing queued: at once
    assert clock.slept == []
    busy_until = clock.now + 0.0105
    store.foreground = lambda: clock.now < busy_until
    writes.quiet()
    assert clock.now >= busy_until and sum(clock.slept) < 0.0105 + 2 * POLL_S


def test_a_node_that_never_pauses_still_gets_its_rdf_written():
    clock = Clock()
    store = Store(None)
    store.foreground = lambda: True
    writes = RdfWrites(store, clock=lambda: clock.now, sleep=clock.sleep)
    writes.quiet()
    assert MAX_WAIT_S <= sum(clock.slept) < MAX_WAIT_S + 2 * POLL_S


def _iri_safe(iid: str) -> bool:
    try:
        ox.NamedNode("urn:semreg:instance:" + iid)
    except ValueError:
        return False
    return True


IDS = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp"), blacklist_characters='<>"{}|^`\\'),
              min_size=1, max_size=12).filter(_iri_safe)


@settings(max_examples=40, deadline=None)
@given(marked=st.dictionaries(IDS, st.one_of(st.integers(1, 10**12), st.just("x")), max_size=6),
       typed=st.sets(IDS, max_size=6))
def test_markers_and_typed_registrations_read_through_the_stores_tsv_as_quad_by_quad(tmp_path_factory, marked, typed):
    """Any id an IRI can hold (non-ASCII, percent signs, colons), an unreadable marker as -1, and the
    record nodes' own revisions (not markers) left out."""
    store = Store(tmp_path_factory.mktemp("d"))
    for iid, rev in marked.items():
        value = ox.Literal(str(rev), datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#integer")) \
            if isinstance(rev, int) else ox.Literal(rev)
        store.ox.add(ox.Quad(instance_node(iid), rdf_writes.REVISION, value, RECORDS))
        store.ox.add(ox.Quad(ox.NamedNode(f"urn:semreg:record:{iid}:7"), rdf_writes.REVISION, value, RECORDS))
    for iid in typed:
        store.ox.add(ox.Quad(instance_node(iid), ox.NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type"),
                             ox.NamedNode(rdf_writes.SR + "Instance"), REGISTRY))
    writes = RdfWrites(store)
    assert writes.markers() == {iid: rev if isinstance(rev, int) else -1 for iid, rev in marked.items()}
    assert writes.typed() == typed
