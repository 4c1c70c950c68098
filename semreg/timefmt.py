"""Timestamps as semreg writes them: RFC 3339 in UTC, to the millisecond, `Z` for the zone
(`2026-12-01T05:30:10.123Z`), in instance views, ontology records and logs alike."""
from __future__ import annotations

import datetime as dt
import time
from typing import overload


@overload
def rfc3339(ts: float) -> str: ...
@overload
def rfc3339(ts: None) -> None: ...
def rfc3339(ts: float | None) -> str | None:
    """Seconds since the epoch as RFC 3339; None stays None (no deadline, never happened)."""
    if ts is None:
        return None
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now_rfc3339() -> str:
    return rfc3339(time.time())
