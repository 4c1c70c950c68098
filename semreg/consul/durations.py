"""Go's duration strings, as Consul writes its checks' `TTL`, `Interval`, `Timeout` and
`DeregisterCriticalServiceAfter` and its blocking reads' `wait` (`10s`, `1m30s`, `500ms`, `120000ms`)."""
from __future__ import annotations

import math
import re

_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
MAX_TEXT = 64


def seconds(text: str) -> float:
    """A Go duration (a sequence of number-unit parts) in seconds; ValueError on anything else, a sign included
    (no Consul duration semreg reads may be negative)."""
    if not isinstance(text, str) or not text or len(text) > MAX_TEXT:
        raise ValueError(f"not a duration: {str(text)[:MAX_TEXT]!r}")
    if text == "0":
        return 0.0
    total, at = 0.0, 0
    for part in _PART.finditer(text):
        if part.start() != at:
            break
        total += float(part.group(1)) * _UNITS[part.group(2)]
        at = part.end()
    if at != len(text) or not math.isfinite(total):
        raise ValueError(f"not a duration: {text!r}")
    return total
