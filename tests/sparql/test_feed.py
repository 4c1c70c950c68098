"""The replica feed: its closure graph whole, then patched, and its instance passes applied one by one or merged;
what the query processes apply equals the snapshot."""
from __future__ import annotations

import sys
import threading

import pyoxigraph as ox
from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_a_pass_is_let_go_of_before_the_feed_waits():
    """What a pass took (the instances' views, the ontologies' triples) is not held while the thread waits."""
    feed = ReplicaFeed()
    feed.on_replica = lambda item: None
    feed.start()
    try:
        for k in range(20):
            feed.put_instance({"id": f"i{k}", "service": "svc", "address": "10.0.0.1", "port": 80, "tags": []})
        feed.put_ontology("o", [t("s", "p")])
        assert feed.wait(timeout_s=30) and feed.passes >= 1
        frame = sys._current_frames()[feed._thread.ident]
        while frame is not None and frame.f_code.co_name != "_run":
            frame = frame.f_back
        assert frame is not None
        assert not {"instances", "ontologies", "inferred", "patches"} & set(frame.f_locals)
    finally:
        feed.stop()


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


def _view(k: int, port: int, tags: int) -> dict:
    return {"id": f"i{k}", "service": "s", "environment": "default", "address": "h", "port": port, "scheme": "http",
            "status": "up", "weight": 1, "ttl": 30.0, "deregister_after": 90.0, "meta": {"zone": "a"},
            "tags": [{"s": f"http://e/C{n}", "p": "http://e/p", "o": f"http://e/O{port}"} for n in range(tags)]}


# a pass: instances put (id, port, tags) or removed (id, None, 0)
PASSES = st.lists(st.lists(st.tuples(st.integers(0, 6), st.one_of(st.none(), st.integers(1, 9)), st.integers(0, 3)),
                           min_size=1, max_size=5), max_size=8)


@settings(max_examples=25, deadline=None)
@given(PASSES)
def test_the_feeds_passes_merged_into_bulk_loads_hold_what_they_hold_applied_one_by_one(tmp_path_factory, passes):
    """What the feed publishes for passes of puts and removals: applied pass by pass in transactions, or merged
    (`replica.merged`) and applied on disk with bulk loads, as the template takes a burst, a copy holds the same
    quads as one loaded from the feed's snapshot after them."""
    published: list[list[replica.Change]] = []
    snapshots: list[bytes] = []
    feed = ReplicaFeed()
    feed.on_replica = lambda item: (published.append(item[1]) if item[0] == "changes"
                                    else snapshots.append(item[1]) if item[0] == "snapshot" else None)
    feed.start()
    try:
        for views in passes:
            with feed._cond:  # one pass: everything asked for while the feed's thread cannot take any of it
                for k, port, tags in views:
                    if port is None:
                        feed.remove_instance(f"i{k}")
                    else:
                        feed.put_instance(_view(k, port, tags))
            feed.wait()
        feed.request_snapshot()
        feed.put_ontology("o", [t("o", "p")])
        feed.wait()
    finally:
        feed.stop()
    one_by_one, bulk, truth = ox.Store(), ox.Store(str(tmp_path_factory.mktemp("d"))), ox.Store()
    for changes in published[:-1]:  # the last is the ontology, which the snapshot holds too
        replica.apply(one_by_one, changes)
    merged = replica.merged(published[:-1])
    replica.apply(bulk, merged, bulk_bytes=1)
    replica.apply(one_by_one, published[-1])
    replica.apply(bulk, published[-1])
    replica.load(truth, snapshots[-1])
    assert set(one_by_one) == set(truth)
    assert set(bulk) == set(truth)
    assert len(merged) <= len(published[:-1])


def test_consecutive_instance_changes_are_merged_unless_one_touches_an_instance_of_another():
    def change(removed: list[str], put: list[str]) -> replica.Change:
        quads = [ox.Quad(ox.NamedNode(f"urn:semreg:instance:{i}"), ox.NamedNode(EX + "p"), ox.Literal("x"),
                         ox.NamedNode("urn:semreg:registry")) for i in put]
        return replica.instances_change([f"urn:semreg:instance:{i}" for i in removed], quads,
                                        [f"urn:semreg:instance:{i}" for i in put])

    graph = replica.graph_change(ox.NamedNode(EX + "g"), [t("a", "b")])
    unsaid = replica.instances_change([], "")  # which instances it puts is not said: never merged
    merged = replica.merged([[change([], ["a", "b"])], [change([], ["c"]), change(["d"], [])], [graph],
                             [change([], ["e"])], [change(["e"], ["e"])], [unsaid], [change([], ["f"])]])
    kinds = [(c[0], c[1], c[3]) if c[0] == "instances" else (c[0],) for c in merged]
    iri = "urn:semreg:instance:".__add__
    assert kinds == [("instances", [iri("d")], [iri("a"), iri("b"), iri("c")]), ("graph",),
                     ("instances", [], [iri("e")]), ("instances", [iri("e")], [iri("e")]),
                     ("instances", [], None), ("instances", [], [iri("f")])]
    assert merged[0][2].count(b"\n") == 3
