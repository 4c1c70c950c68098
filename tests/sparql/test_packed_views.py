"""The views the replica feed keeps for its snapshots: packed, and given back exactly as they were put."""

from __future__ import annotations

import tracemalloc

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from semreg.bench.dataset import Dataset
from semreg.sparql.packed_views import SAMPLE, PackedViews

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
VIEW = st.fixed_dictionaries({"id": st.text(min_size=1, max_size=12)}, optional={"tags": JSON, "meta": JSON, "port": JSON})


@settings(max_examples=200)
@given(st.lists(VIEW, max_size=3 * SAMPLE), st.lists(st.integers(0, 3 * SAMPLE), max_size=SAMPLE))
def test_every_view_comes_back_exactly_before_and_after_the_dictionary_is_chosen(views, removed):
    packed = PackedViews()
    expected: dict[str, dict] = {}
    for view in views:
        packed.put(view["id"], view)
        expected[view["id"]] = view
    ids = list(expected)
    for i in removed:
        if i < len(ids):
            packed.pop(ids[i])
            expected.pop(ids[i], None)
    packed.pop("never put")
    assert len(packed) == len(expected)
    assert {view["id"]: view for view in packed.values()} == expected
    for iid, view in expected.items():
        assert iid in packed and packed.get(iid) == view
    assert packed.get("never put") is None


def test_a_view_unlike_the_first_ones_still_comes_back():
    packed = PackedViews()
    for i in range(SAMPLE):
        packed.put(f"i{i}", {"id": f"i{i}", "service": "books", "tags": [{"s": "ex:Livro", "p": "ex:g", "o": "ex:Terror"}]})
    odd = {"id": "odd", "meta": {"ünïcode": "\u2603" * 500, "big": list(range(1000))}, "tags": []}
    packed.put("odd", odd)
    assert packed.get("odd") == odd


def test_a_view_of_three_tags_is_kept_in_a_fraction_of_its_json():
    dataset = Dataset(instances=2_000)
    views = [dataset.instance(i) for i in range(dataset.instances)]
    packed = PackedViews()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for view in views:
            packed.put(view["id"], view)
        taken = (tracemalloc.get_traced_memory()[0] - before) / len(views)
    finally:
        tracemalloc.stop()
    text = sum(len(orjson.dumps(v)) for v in views) / len(views)
    # the packed text, its bytes object and its share of the table: under a third of the JSON alone
    assert taken < text / 3, (taken, text)
    assert [v for v in packed.values()] == views
