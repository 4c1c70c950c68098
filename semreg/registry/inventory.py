"""What a shard holds, as revisions: every instance's and every tombstone's (a tombstone's negated), the
currency of anti-entropy and of a restarted member's repair.

At a million records a whole inventory takes a Python loop of a fraction of a second, and the passes that
use it (planning who owns what, digests per arc) several seconds: `whole` copies the maps on the event
loop (a C-level copy, milliseconds) and reads them in a worker thread, so that the loop, and with it the
membership lease's keep-alive, goes on meanwhile. `of` answers for given ids only, in their number's time.
"""
from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any


def of(instances: Mapping[str, Any], tombstones: Mapping[str, tuple[int, float]],
       ids: Iterable[str] | None = None) -> dict[str, int]:
    """id → revision of these ids (all when None) that are held, instance or tombstone."""
    if ids is None:
        out = {iid: inst.revision for iid, inst in instances.items()}
        out.update({iid: -rev for iid, (rev, _) in tombstones.items()})
        return out
    found: dict[str, int] = {}
    for iid in ids:
        inst = instances.get(iid)
        if inst is not None:
            found[iid] = inst.revision
        elif (tomb := tombstones.get(iid)) is not None:
            found[iid] = -tomb[0]
    return found


async def whole(instances: dict[str, Any], tombstones: dict[str, tuple[int, float]]) -> dict[str, int]:
    """Every id held with its revision, read off the event loop from copies taken now."""
    return await asyncio.to_thread(of, dict(instances), dict(tombstones))
