"""The client's lookup cache: recent `discover`/`route` answers, fresh for a jittered time, kept after.

Each entry is fresh for `ttl_s` scaled by a random factor in [1 - jitter, 1 + jitter] (5 s ± 20 % by
default), so thousands of clients that started together do not all refresh at the same instant. A
pinned entry (kept current by a background watch) stays fresh until unpinned. Expired entries are not
dropped: they are the last good answer, served (marked stale) when no registry URL answers. The
oldest entries go first past `max_entries`. Times come from an injected clock (seconds).
"""
from __future__ import annotations

import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any


@dataclass
class Entry:
    value: Any
    stored_at: float
    fresh_until: float
    pinned: bool = False


class LookupCache:
    def __init__(self, ttl_s: float = 5.0, jitter: float = 0.2, clock: Callable[[], float] = time.monotonic,
                 rng: random.Random | None = None, max_entries: int = 1024) -> None:
        if not 0 <= jitter < 1:
            raise ValueError("jitter is a fraction in [0, 1)")
        self.ttl_s = ttl_s
        self.jitter = jitter
        self.clock = clock
        self.rng = rng or random.Random()
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, Entry] = OrderedDict()
        self._lock = threading.Lock()

    def lifetime_s(self) -> float:
        """How long a new entry stays fresh: the base ttl, jittered."""
        return self.ttl_s * (1 + self.jitter * (2 * self.rng.random() - 1))

    def fresh(self, key: Hashable) -> Any | None:
        """The cached value if it is still fresh, else None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or not (entry.pinned or self.clock() < entry.fresh_until):
                return None
            return entry.value

    def last(self, key: Hashable) -> Entry | None:
        """The last good answer for `key`, however old (for serving stale when the registry is down)."""
        with self._lock:
            return self._entries.get(key)

    def put(self, key: Hashable, value: Any, pinned: bool | None = None) -> bool:
        """Store a fresh answer; True if `key` was not cached before. `pinned=None` keeps the pin as it was."""
        now = self.clock()
        with self._lock:
            old = self._entries.pop(key, None)
            keep_pin = old.pinned if (old is not None and pinned is None) else bool(pinned)
            self._entries[key] = Entry(value, now, now + self.lifetime_s(), keep_pin)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
            return old is None

    def unpin(self, key: Hashable) -> None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                entry.pinned = False

    def expire(self) -> None:
        """Make every entry stale (after this client changed the registry); values stay for fallback."""
        with self._lock:
            for entry in self._entries.values():
                entry.fresh_until = float("-inf")
                entry.pinned = False

    def __len__(self) -> int:
        return len(self._entries)
