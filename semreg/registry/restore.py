"""A shard's instances brought back from their records at start-up, in batches, with progress in the log.

The records are read in one pass (`semreg.storage.store.Store.load_records`) and sorted out here: live
registrations, tombstones still kept, tombstones past their keep. The registrations then go into the
registry `BATCH` at a time, the event loop turning between batches (so its timers and the replies of worker
threads are not held up for the whole of a million instances), and a line goes to the log at most every
`PROGRESS_S` seconds. (`semreg serve` listens only once the node is open: `/readyz` says when.) A stop
asked meanwhile is honoured between batches (`semreg.errors.StopAsked`): the records stay as they were.

On a clean stop the registry is kept in a snapshot (`snapshot_of`, written by `semreg.storage.snapshot`), which
the next start-up reads instead of the records when they did not change meanwhile (`from_snapshot`): the
same registrations, revisions, statuses, first registration times and tombstones the records give.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from semreg import heap
from semreg.errors import StopAsked
from semreg.rdf.terms import Tag
from semreg.registry.instances import UP, Registration, _tag
from semreg.registry.registry import Registry
from semreg.storage import snapshot
from semreg.storage.store import Store

log = logging.getLogger("semreg.shard")

BATCH = 20_000  # registrations put into the registry in one turn of the event loop (~0.3 s)
PROGRESS_S = 2.0  # the longest between two progress lines
STOP_EVERY = 16_384  # records sorted out between two looks at whether the server was asked to stop


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
    newest: int = 0  # the newest revision of any record (the shard's next revision comes after it)


async def read(store: Store, write: Callable[..., Any], keep_after: float, stopped: Callable[[], bool] = lambda: False
               ) -> Recorded:
    """The recorded instances sorted out: from the snapshot of the last clean stop when the records are still
    what it was taken from, else from the records (`write(fn, *args)` runs `fn` on the store's writer thread)."""
    started = time.perf_counter()
    payload = await write(snapshot.take, store)
    try:
        restored = from_snapshot(payload, keep_after, stopped) if payload is not None else None
    except (KeyError, IndexError, TypeError, ValueError) as exc:  # whole and of this version, yet not as written
        log.warning("registry snapshot not used: the instance records are read instead", extra={"why": repr(exc)})
        restored = None
    if restored is not None:
        out, revisions = restored
        store.adopt_revisions(revisions)
        out.newest, source, read_at = max(revisions.values(), default=0), "snapshot", time.perf_counter()
    else:
        records = await write(store.load_records, stopped)
        read_at = time.perf_counter()
        out = sort_out(records, keep_after, stopped)
        out.newest, source = max((rev for _, rev in records), default=0), "records"
    log.info("instance records read", extra={"records": len(out.regs), "tombstones": len(out.tombstones), "from": source,
                                             "read_ms": round((read_at - started) * 1000),
                                             "ms": round((time.perf_counter() - started) * 1000)})
    return out


async def keep(registry: Registry, store: Store, write: Callable[..., Any]) -> None:
    """At a clean stop, once nothing writes a record any more: the registry's snapshot for the next start-up
    (`read`), when its instances and tombstones are exactly the store's records; else the log says why not."""
    started = time.perf_counter()
    revisions = await write(store.revisions)  # behind the store's lock, which a thread writing RDF may hold
    taken = time.perf_counter()
    with heap.paused():  # a million new rows: no collection walks them while they are made
        payload, why = snapshot_of(registry, revisions)
    built = time.perf_counter()
    try:
        size = await write(snapshot.save, store, payload) if payload is not None else 0
    except (OSError, ValueError) as exc:  # a full disk; something marshal cannot write (the stop goes on)
        payload, why = None, repr(exc)
    if payload is None:
        log.warning("registry snapshot not written: the next start-up reads the records", extra={"why": why})
        return
    now = time.perf_counter()
    log.info("registry snapshot written", extra={
        "instances": len(registry.instances), "bytes": size, "revisions_ms": round((taken - started) * 1000),
        "build_ms": round((built - taken) * 1000), "write_ms": round((now - built) * 1000),
        "ms": round((now - started) * 1000)})


def sort_out(records: Iterable[tuple[dict[str, Any], int]], keep_after: float,
             stopped: Callable[[], bool] = lambda: False) -> Recorded:
    """`records` (record, revision) sorted out; a tombstone removed before `keep_after` (wall) is expired, an
    unreadable record is skipped with a warning. `StopAsked` once `stopped()` says so."""
    out = Recorded()
    terms: dict[str, str] = {}  # one string a term, service and scheme: the records' own are let go at once
    for n, (rec, rev) in enumerate(records):
        if not n % STOP_EVERY and stopped():
            raise StopAsked(f"sorting the instance records out stopped after {n}")
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
        out.statuses.append(status if status in ("blocked", "draining", "critical") else None)
        first = rec.get("registered_at")
        out.walls.append(float(first) if isinstance(first, (int, float)) else None)
    return out


async def put_back(registry: Registry, recorded: Recorded, stopped: Callable[[], bool] = lambda: False) -> None:
    """The recorded registrations into `registry`, `BATCH` at a time, saying how far it got; `StopAsked`
    between two batches once `stopped()` says so."""
    total = len(recorded.regs)
    started = last = time.perf_counter()
    for first in range(0, total, BATCH):
        if stopped():
            raise StopAsked(f"putting the instances back stopped after {first} of {total}")
        end = first + BATCH
        registry.put_many(recorded.regs[first:end], recorded.revisions[first:end],
                          admin_statuses=recorded.statuses[first:end], registered_at_wall=recorded.walls[first:end])
        now = time.perf_counter()
        if end < total and now - last >= PROGRESS_S:
            last = now
            log.info("restoring instances", extra={"done": end, "of": total, "ms": round((now - started) * 1000)})
        await asyncio.sleep(0)
    log.info("instances restored", extra={"instances": total, "ms": round((time.perf_counter() - started) * 1000)})


FIELDS = [f.name for f in dataclasses.fields(Registration)]  # a snapshot's rows: these, then its revision,
TAGS = FIELDS.index("tags")  # admin status (None: up) and first registration; its tags an index in a table


def snapshot_of(registry: Registry, revisions: dict[str, int]) -> tuple[dict[str, Any] | None, str]:
    """What a snapshot keeps of `registry`, and "", when the store's instance records (`revisions`: id →
    revision) are exactly its instances and tombstones at their revisions; else None and why not."""
    tag_sets: list[tuple[tuple[str, ...], ...]] = []
    numbered: dict[tuple[Tag, ...], int] = {}  # a registration's tags → their row in `tag_sets`
    live = []
    for iid, inst in registry.instances.items():
        if revisions.get(iid) != inst.revision:
            return None, f"instance {iid} is at revision {inst.revision} here, {revisions.get(iid)} in the records"
        reg = inst.reg
        k = numbered.get(reg.tags)
        if k is None:
            k = numbered[reg.tags] = len(tag_sets)
            tag_sets.append(tuple(tuple(t) for t in reg.tags))
        row = [getattr(reg, name) for name in FIELDS]
        row[TAGS] = k
        live.append((*row, inst.revision, None if inst.admin_status == UP else inst.admin_status,
                     inst.registered_at_wall))
    tombstones = []
    for iid, revision in revisions.items():
        if iid in registry.instances:
            continue
        tomb = registry.tombstones.get(iid)
        if tomb is None or tomb[0] != revision:
            return None, f"the records hold {iid} at revision {revision}, which is neither an instance nor a tombstone here"
        tombstones.append((iid, revision, tomb[1]))
    return {"fields": FIELDS, "tag_sets": tag_sets, "live": live, "tombstones": tombstones}, ""


def from_snapshot(payload: Any, keep_after: float, stopped: Callable[[], bool] = lambda: False
                  ) -> tuple[Recorded, dict[str, int]] | None:
    """What `sort_out` gives from the records, and each record's revision, from a snapshot's payload; None when
    it is not one of this version (its registrations have other fields)."""
    if not isinstance(payload, dict) or payload.get("fields") != FIELDS:
        return None
    tag_sets = [tuple([_tag(Tag, t) for t in tags]) for tags in payload["tag_sets"]]
    out = Recorded()
    revisions: dict[str, int] = {}
    end = len(FIELDS)
    new: Callable[..., Registration] = Registration
    regs, revs, statuses, walls = out.regs, out.revisions, out.statuses, out.walls
    for n, row in enumerate(payload["live"]):
        if not n % STOP_EVERY and stopped():
            raise StopAsked(f"reading the registry snapshot stopped after {n}")
        regs.append(new(*row[:TAGS], tag_sets[row[TAGS]], *row[TAGS + 1:end]))
        revs.append(row[end])
        statuses.append(row[end + 1])
        walls.append(row[end + 2])
        revisions[row[0]] = row[end]
    for iid, revision, at in payload["tombstones"]:
        revisions[iid] = revision
        if at < keep_after:
            out.expired.append(iid)
        else:
            out.tombstones[iid] = (revision, at)
    return out, revisions
