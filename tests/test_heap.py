"""The collector kept out of the way: what piles up is frozen before a full collection has to walk it."""
from __future__ import annotations

import gc

from semreg.heap import HeapSettler


def test_objects_made_by_registrations_are_frozen_once_enough_piled_up():
    settler = HeapSettler(every=1000)
    kept = [[n] for n in range(500)]  # long-lived, tracked by the collector
    frozen = gc.get_freeze_count()
    settler.note(600)
    assert settler.freezes == 0 and gc.get_freeze_count() == frozen
    kept += [[n] for n in range(500)]
    settler.note(600)
    assert settler.freezes == 1
    assert gc.get_freeze_count() >= frozen + len(kept)  # a full collection no longer walks them
    settler.note(600)
    assert settler.freezes == 1  # counting starts again after a freeze
    settler.settled()
    settler.note(999)
    assert settler.freezes == 1
