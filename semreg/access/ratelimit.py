"""Token buckets per caller: `rate_per_s` sustained, `burst` at once. Pure, on an injected clock. At most
`max_keys` callers are kept, the least recently charged forgotten first (a forgotten caller has its whole burst
again)."""
from __future__ import annotations

import math
from collections import OrderedDict


class RateLimiter:
    MAX_KEYS = 100_000

    def __init__(self, rate_per_s: float, burst: float, max_keys: int = MAX_KEYS) -> None:
        self.rate = rate_per_s
        self.burst = max(1.0, burst)
        self.max_keys = max(1, max_keys)
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key → (tokens, updated at)

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def __len__(self) -> int:
        """The callers kept."""
        return len(self._buckets)

    def level(self, key: str, now: float) -> float:
        """The tokens `key` has now (`burst` when it has them all), taking none."""
        tokens, at = self._buckets.get(key, (self.burst, now))
        return min(self.burst, tokens + max(0.0, now - at) * self.rate)

    def wait(self, key: str, now: float) -> float:
        """The seconds until `key` has a token (0: it has one now), taking none."""
        if not self.enabled:
            return 0.0
        tokens = self.level(key, now)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def take(self, key: str, now: float) -> float:
        """Take one token; returns 0 when allowed, else the seconds until one is available."""
        if not self.enabled:
            return 0.0
        tokens = self.level(key, now)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            self._buckets.move_to_end(key)
            if len(self._buckets) > self.max_keys:
                self._buckets.popitem(last=False)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / self.rate


def retry_after_s(wait_s: float) -> int:
    return max(1, math.ceil(wait_s))
