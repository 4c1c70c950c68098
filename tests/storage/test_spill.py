"""Items put aside (`semreg.storage.spill`): read back in order, as often as needed, and past a few MiB kept on
disk, not in memory."""
from __future__ import annotations

import gc
import tracemalloc

from semreg.storage.spill import Spill


def test_items_come_back_in_order_as_often_as_asked_and_more_may_follow():
    spill = Spill(tuple)
    for k in range(5):
        spill.add([k, f"v{k}", {"k": k}])
    assert list(spill) == list(spill) == [(k, f"v{k}", {"k": k}) for k in range(5)] and len(spill) == 5
    spill.add([5, "v5", {}])
    assert [item[0] for item in spill] == [0, 1, 2, 3, 4, 5]
    spill.close()
    assert len(spill) == 6


def test_past_its_memory_the_items_are_on_disk():
    item = {"id": "x" * 1000, "tags": [["http://e/A", "http://e/p", "http://e/B"]] * 10}
    gc.collect()
    tracemalloc.start()
    try:
        spill = Spill(dict, memory_bytes=256 * 1024)
        for _ in range(20_000):  # ~30 MB of JSON lines
            spill.add(item)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024, peak
    assert sum(1 for _ in spill) == 20_000
    spill.close()
