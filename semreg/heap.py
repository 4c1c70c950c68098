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
  registry makes almost none (a full `settle()` after each upload clears what there is).
"""
from __future__ import annotations

import gc

SETTLE_EVERY = 5_000  # tags registered between two freezes (a 1,000-tag instance makes ~10,000 objects)


def settle() -> None:
    """A full collection, then the survivors frozen."""
    gc.collect()
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
