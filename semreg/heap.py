"""Keeping the collector out of the way of requests.

The registry holds hundreds of thousands of long-lived objects (hierarchy, tag indexes, views). A full
collection walks every one of them and, with 10,000 instances registered, stalled every request of a
node for 200-300 ms while collecting nothing (measured with a `gc.callbacks` probe during 1,000-tag
registrations through a ring). Frozen objects are skipped by every later collection, so:

- `settle()` after start-up and after large changes (an upload): a full collection, then freeze what
  survived;
- `HeapSettler.note(n)` as objects that will live on are created (a registration's tags): once enough
  have piled up, collect the young generations (cheap) and freeze, so the next full collection finds
  little to walk. Cyclic garbage that already reached the oldest generation at that moment stays; the
  registry makes almost none (a full `settle()` after each upload clears what there is);
- `making(n)` around request work that makes many objects that live on (a batch, a restore's part): paused,
  then frozen;
- `paused()` around a restore that makes millions of objects which all live on: with the collector on,
  each of its full collections walked everything made so far, for nothing. Reading 100,000 instance
  records took 5.0 s with it and 3.5 without, sorting them out 2.5 s and 0.7 (and a million, 104 s in
  all, grew faster than the count). A `settle()` before it and a `freeze()` after it: the restore's
  objects are never walked.
"""
from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

SETTLE_EVERY = 5_000  # tags registered between two freezes (a 1,000-tag instance makes ~10,000 objects)


def settle() -> None:
    """A full collection, then the survivors frozen."""
    gc.collect()
    gc.freeze()


_pauses = 0  # restores in progress (nodes of one process may open together)
_pauses_lock = threading.Lock()
_was_enabled = True


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No automatic collection inside (process-wide; the collector's earlier state comes back after the
    last of overlapping pauses)."""
    global _pauses, _was_enabled
    with _pauses_lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pauses_lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()


MAKING_AT_ONCE = 1_000  # registrations in one piece of work from which `making` pauses the collector


@contextlib.contextmanager
def making(count: int) -> Iterator[None]:
    """Around work that makes `count` registrations' worth of objects that live on (a batch, a restore's part, a
    hand-off): from `MAKING_AT_ONCE`, no automatic collection inside, and what it made frozen at its end. A batch
    of 10,000 made ~180,000 tracked objects that its own allocations pushed into the oldest generation, and each
    full collection walked them all for nothing (50-300 ms with Python's lock held, several a batch, measured
    with `gc.callbacks`). Small pieces change nothing."""
    if count < MAKING_AT_ONCE:
        yield
        return
    with paused():
        yield
    gc.freeze()


def freeze() -> None:
    """What is there frozen without a collection: after a restore under `paused()`, whose objects all live
    on (a full collection of a million instances' objects took ~3.6 s, to find nothing)."""
    gc.freeze()


class HeapSettler:
    def __init__(self, every: int = SETTLE_EVERY) -> None:
        self.every = every
        self._pending = 0
        self.freezes = 0

    def note(self, created: int) -> None:
        """`created` more long-lived things (tags, instances) were made."""
        self._pending += created
        if self._pending >= self.every:
            self._pending = 0
            gc.collect(1)
            gc.freeze()
            self.freezes += 1

    def settled(self) -> None:
        """A full `settle()` just ran: nothing is pending."""
        self._pending = 0
