"""The replica's copy and its wear: what a rebuilt copy holds, and when a copy counts as worn."""
from __future__ import annotations

import pyoxigraph as ox
from hypothesis import given, settings
from hypothesis import strategies as st

from semreg.sparql import replica

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
