"""The replica's copy and its wear: what a rebuilt copy holds, when a copy counts as worn, and that a copy on
disk taking instances with bulk loads holds what one taking them in transactions holds."""
from __future__ import annotations

import pyoxigraph as ox
from hypothesis import given, settings
from hypothesis import strategies as st

from semreg.sparql import replica
from semreg.storage.vocabulary import instance_nquads

G = ox.NamedNode("urn:semreg:registry")


def instance(k: int, value: str) -> ox.Quad:
    return ox.Quad(ox.NamedNode(f"urn:semreg:instance:i{k}"), ox.NamedNode("urn:p"), ox.Literal(value), G)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.text(max_size=8)), max_size=40))
def test_a_rebuilt_copy_holds_exactly_what_the_worn_one_held(changes):
    store = ox.Store()
    shared = ox.BlankNode("shared")  # a blank node two graphs share stays one node in the copy
    store.add(ox.Quad(shared, ox.NamedNode("urn:p"), ox.Literal("x"), ox.NamedNode("urn:semreg:ontology:a")))
    store.add(ox.Quad(ox.NamedNode("urn:a"), ox.NamedNode("urn:q"), shared, ox.NamedNode("urn:semreg:inferred")))
    store.add(ox.Quad(ox.NamedNode("urn:d"), ox.NamedNode("urn:q"), ox.Literal("default"), ox.DefaultGraph()))
    for k, value in changes:  # replace instance k, as the feed does
        replica.apply(store, [replica.instances_change([f"urn:semreg:instance:i{k}"], [instance(k, value)])])
    fresh, size = replica.rebuilt(store)
    assert set(fresh) == set(store)
    assert size == len(replica.snapshot(store))


def test_weight_counts_the_rdf_a_change_carries_and_estimates_removals():
    added = replica.instances_change(["urn:semreg:instance:gone"], [instance(1, "v")])
    patch = replica.patch_change(G, [ox.Triple(ox.NamedNode("urn:a"), ox.NamedNode("urn:p"), ox.Literal("1"))], [])
    graph = replica.graph_change(G, None)
    assert replica.weight([added]) == len(added[2]) + replica.REMOVAL_BYTES
    assert replica.weight([patch]) == len(patch[2])
    assert replica.weight([graph]) == 0
    assert replica.weight([added, patch]) == replica.weight([added]) + replica.weight([patch])


def test_a_copy_is_worn_past_half_its_size_and_never_below_the_floor():
    big = replica.Wear(size=100 * replica.WEAR_FLOOR_BYTES)
    big.add(50 * replica.WEAR_FLOOR_BYTES)
    assert not big.worn
    big.add(1)
    assert big.worn
    small = replica.Wear(size=10)
    small.add(replica.WEAR_FLOOR_BYTES)
    assert not small.worn  # a small copy is not rebuilt at every change
    small.add(1)
    assert small.worn
    small.renew(size=20)
    assert not small.worn and small.changed == 0


def test_a_copy_is_settled_past_a_tenth_of_its_size_and_never_below_the_floor():
    big = replica.Wear(size=100 * replica.WEAR_FLOOR_BYTES)
    big.add(10 * replica.WEAR_FLOOR_BYTES)
    assert not big.settled
    big.add(1)
    assert big.settled and not big.worn  # rebuilt when the changes stop, not yet while they come
    small = replica.Wear(size=10)
    small.add(replica.WEAR_FLOOR_BYTES)
    assert not small.settled


def _view(k: int, port: int, tags: int) -> dict:
    return {"id": f"i{k}", "service": "s", "environment": "default", "address": "h", "port": port, "scheme": "http",
            "status": "up", "weight": 1, "ttl": 30.0, "deregister_after": 90.0, "meta": {"zone": "a"},
            "tags": [{"s": f"http://e/C{n}", "p": "http://e/p", "o": f"http://e/O{port}"} for n in range(tags)]}


@settings(max_examples=15, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 6), st.integers(1, 9), st.integers(0, 4)), max_size=5), max_size=6))
def test_a_copy_on_disk_taking_instances_with_bulk_loads_holds_what_one_taking_transactions_holds(tmp_path_factory,
                                                                                                  passes):
    stores = [ox.Store(str(tmp_path_factory.mktemp("d"))) for _ in range(2)]
    for views in passes:  # one feed pass each: its instances removed, then their quads added
        latest = {v["id"]: v for v in (_view(k, port, tags) for k, port, tags in views)}
        change = replica.instances_change([f"urn:semreg:instance:{i}" for i in latest],
                                          "".join(instance_nquads(v) for v in latest.values()))
        replica.apply(stores[0], [change])
        replica.apply(stores[1], [change], bulk_bytes=1)
    assert set(stores[1]) == set(stores[0])  # blank nodes keep their labels in both
