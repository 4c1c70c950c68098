"""The replica feed's closure graph: whole, then patched; what the query processes apply equals the snapshot."""
from __future__ import annotations

import threading

import pyoxigraph as ox

from semreg.sparql import replica
from semreg.sparql.feed import ReplicaFeed
from semreg.storage.store import INFERRED

EX = "http://ex.org/"


def t(s: str, o: str) -> ox.Triple:
    subject = ox.BlankNode(s[2:]) if s.startswith("_:") else ox.NamedNode(EX + s)
    return ox.Triple(subject, ox.NamedNode(EX + "p"), ox.NamedNode(EX + o))


def closure_graph(store: ox.Store) -> set[ox.Triple]:
    return {ox.Triple(q.subject, q.predicate, q.object) for q in store.quads_for_pattern(None, None, None, INFERRED)}


def test_patches_reach_the_replica_folded_and_a_snapshot_holds_the_patched_graph():
    published: list[tuple] = []
    first_published, go_on = threading.Event(), threading.Event()

    def publish(item: tuple) -> None:  # the feed's thread stops after its first pass until both patches wait
        if item[0] == "ticket":
            return
        published.append(item)
        if len(published) == 1:
            first_published.set()
            go_on.wait(10)

    feed = ReplicaFeed()
    feed.on_replica = publish
    feed.start()
    try:
        feed.put_inferred([t("a", "b"), t("_:d1x0", "c")])
        assert first_published.wait(10)
        # lazily read iterables, as the reasoner hands them over; the second patch takes back part of the first
        feed.patch_inferred(iter([t("x", "y"), t("y", "z")]), iter([t("a", "b")]))
        feed.patch_inferred(iter([t("a", "b")]), iter([t("y", "z"), t("_:d1x0", "c")]))
        go_on.set()
        feed.wait()
        feed.request_snapshot()
        feed.wait()
        feed.put_ontology("o", [t("o", "p")])  # a pass without a closure change publishes no patch
        feed.wait()
    finally:
        feed.stop()
    kinds = [[change[0] for change in item[1]] if item[0] == "changes" else item[0] for item in published]
    assert kinds[:2] == [["graph"], ["patch"]] and sorted(map(str, kinds[2:])) == ["['graph']", "snapshot"]
    _, iri, removed, added = published[1][1][0]
    assert iri == INFERRED.value
    assert set(ox.parse(removed, format=ox.RdfFormat.N_TRIPLES)) == {ox.Quad(ox.BlankNode("d1x0"), ox.NamedNode(EX + "p"),
                                                                             ox.NamedNode(EX + "c"))}
    assert [q.subject for q in ox.parse(added, format=ox.RdfFormat.N_TRIPLES)] == [ox.NamedNode(EX + "x")]

    applied = ox.Store()
    snapshot = None
    for kind, payload in published:
        if kind == "changes":
            replica.apply(applied, payload)
        elif snapshot is None:
            snapshot = ox.Store()
            replica.load(snapshot, payload)
    want = {t("a", "b"), t("x", "y")}
    assert closure_graph(applied) == want
    assert snapshot is not None and closure_graph(snapshot) == want


def test_each_pass_ends_with_the_ticket_of_every_change_it_published():
    stream: list[tuple] = []
    tickets: list[int] = []
    feed = ReplicaFeed()
    feed.on_replica = stream.append
    feed.on_requested = tickets.append
    feed.start()
    try:
        for k in range(5):
            feed.put_ontology(f"o{k}", [t(f"s{k}", "p")])
        feed.wait()
        feed.put_ontology("late", [t("late", "p")])
        feed.wait()
    finally:
        feed.stop()
    assert tickets == [1, 2, 3, 4, 5, 6]  # asked for in order, before anything was published
    assert stream[-1] == ("ticket", 6)
    seen = 0
    graphs: set[str] = set()
    for item in stream:  # a ticket follows every change asked for up to it
        if item[0] == "changes":
            graphs |= {change[1] for change in item[1]}
        else:
            assert item[0] == "ticket" and item[1] > seen
            seen = item[1]
    assert len(graphs) == 6


def test_a_whole_graph_replaces_the_patches_before_it():
    published: list[tuple] = []
    feed = ReplicaFeed()
    feed.on_replica = lambda item: item[0] != "ticket" and published.append(item)
    feed.put_inferred([t("a", "b")])
    feed.patch_inferred([t("c", "d")], [])
    feed.put_inferred([t("e", "f")])  # e.g. a change computed from scratch
    feed.patch_inferred([t("g", "h")], [t("e", "f")])
    feed.start()
    try:
        feed.wait()
    finally:
        feed.stop()
    store = ox.Store()
    for _, changes in published:
        replica.apply(store, changes)
    assert [change[0] for _, changes in published for change in changes] == ["graph"]
    assert closure_graph(store) == {t("g", "h")}
