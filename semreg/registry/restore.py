"""A shard's instances brought back from their records at start-up, in batches, with progress in the log.

The records are read in one pass (`semreg.storage.store.Store.load_records`) and sorted out here: live
registrations, tombstones still kept, tombstones past their keep. The registrations then go into the
registry `BATCH` at a time, the event loop turning between batches (so its timers and the replies of worker
threads are not held up for the whole of a million instances), and a line goes to the log at most every
`PROGRESS_S` seconds. (`semreg serve` listens only once the node is open: `/readyz` says when.)
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from semreg.registry.instances import Registration
from semreg.registry.registry import Registry

log = logging.getLogger("semreg.shard")

BATCH = 20_000  # registrations put into the registry in one turn of the event loop (~0.3 s)
PROGRESS_S = 2.0  # the longest between two progress lines


@dataclass
class Recorded:
    """What the records hold, sorted out: the registrations with their revision, recorded admin status and
    first registration (wall seconds), the tombstones to keep (id → revision, removal time), and the ids of
    tombstones past their keep (whose records go)."""

    regs: list[Registration] = field(default_factory=list)
    revisions: list[int] = field(default_factory=list)
    statuses: list[str | None] = field(default_factory=list)
    walls: list[float | None] = field(default_factory=list)
    tombstones: dict[str, tuple[int, float]] = field(default_factory=dict)
    expired: list[str] = field(default_factory=list)


def sort_out(records: Iterable[tuple[dict[str, Any], int]], keep_after: float) -> Recorded:
    """`records` (record, revision) sorted out; a tombstone removed before `keep_after` (wall) is expired, an
    unreadable record is skipped with a warning."""
    out = Recorded()
    terms: dict[str, str] = {}  # one string a term, service and scheme: the records' own are let go at once
    for rec, rev in records:
        if rec.get("deleted"):
            at = float(rec.get("deleted_at") or 0)
            if at < keep_after:
                out.expired.append(rec["id"])
            else:
                out.tombstones[rec["id"]] = (rev, at)
            continue
        try:
            out.regs.append(Registration.from_record(rec, terms))
        except (KeyError, TypeError, ValueError):
            log.warning("ignored an unreadable instance record", extra={"record": str(rec)[:200]})
            continue
        out.revisions.append(rev)
        status = rec.get("admin_status")
        out.statuses.append(status if status in ("blocked", "draining") else None)
        first = rec.get("registered_at")
        out.walls.append(float(first) if isinstance(first, (int, float)) else None)
    return out


async def put_back(registry: Registry, recorded: Recorded) -> None:
    """The recorded registrations into `registry`, `BATCH` at a time, saying how far it got."""
    total = len(recorded.regs)
    started = last = time.perf_counter()
    for first in range(0, total, BATCH):
        end = first + BATCH
        registry.put_many(recorded.regs[first:end], recorded.revisions[first:end],
                          admin_statuses=recorded.statuses[first:end], registered_at_wall=recorded.walls[first:end])
        now = time.perf_counter()
        if end < total and now - last >= PROGRESS_S:
            last = now
            log.info("restoring instances", extra={"done": end, "of": total, "ms": round((now - started) * 1000)})
        await asyncio.sleep(0)
