"""Kept JSON is what orjson writes, in an object of its own size: a kept instance view costs its length."""
from __future__ import annotations

import tracemalloc

import orjson
from hypothesis import given
from hypothesis import strategies as st

from semreg import kept_json
from semreg.rdf.terms import Tag
from semreg.registry.instances import Instance, Registration

JSON = st.recursive(st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                    max_leaves=20)


@given(JSON)
def test_the_bytes_are_orjsons(value):
    assert kept_json.dumps(value) == orjson.dumps(value)


def test_a_thousand_rendered_views_take_about_their_length():
    instances = [Instance(reg=Registration(id=f"i{n}", service="svc", address="10.0.0.1", port=80,
                                           tags=tuple(Tag(f"http://ex.org/C{n}-{k}", "http://ex.org/p", "http://ex.org/O")
                                                      for k in range(3))),
                          registered_at=0.0, last_heartbeat=0.0, expires_at=None, registered_at_wall=1.8e9,
                          expires_at_wall=None) for n in range(1000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        views = [inst.view_json() for inst in instances]
        taken = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    length = sum(len(v) for v in views)
    assert length > 400_000 and taken < 1.5 * length  # orjson's own objects took ~8 KB a view of ~700 bytes
