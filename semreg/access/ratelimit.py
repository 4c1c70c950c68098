"""Token buckets per caller: `rate_per_s` sustained, `burst` at once. Pure, on an injected clock."""
from __future__ import annotations

import math
from collections import OrderedDict


class RateLimiter:
    MAX_KEYS = 100_000

    def __init__(self, rate_per_s: float, burst: float) -> None:
        self.rate = rate_per_s
        self.burst = max(1.0, burst)
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key → (tokens, updated at)

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def wait(self, key: str, now: float) -> float:
        """The seconds until `key` has a token (0: it has one now), taking none."""
        if not self.enabled:
            return 0.0
        tokens, at = self._buckets.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def take(self, key: str, now: float) -> float:
        """Take one token; returns 0 when allowed, else the seconds until one is available."""
        if not self.enabled:
            return 0.0
        tokens, at = self._buckets.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            self._buckets.move_to_end(key)
            if len(self._buckets) > self.MAX_KEYS:
                self._buckets.popitem(last=False)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / self.rate


def retry_after_s(wait_s: float) -> int:
    return max(1, math.ceil(wait_s))
