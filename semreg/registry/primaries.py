"""Which instances' leases and checks a shard runs, after a ring change: those it is the first live owner of.

Deciding takes a ring lookup a record (~2 µs): 1.3 s at 667,000 records on an idle machine, several
seconds on a loaded one, and every member decides on every ring change, so one lapsed lease moved every
member's event loop past its own keep-alive. Up to `AT_ONCE` records it is decided at once, on the event
loop; past that in a worker thread, from a copy of the instance map, and only the instances whose answer
changed are touched back on the loop (a newer ring change meanwhile supersedes the older one).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

AT_ONCE = 20_000


def moved(instances: Mapping[str, Any], primary: Callable[[str], bool]) -> list[tuple[str, bool]]:
    """(id, leased here) of the instances whose `leased` is not what `primary` says now."""
    out = []
    for iid, inst in instances.items():
        leased = primary(iid)
        if inst.leased != leased:
            out.append((iid, leased))
    return out
