"""The shard of this process (`LocalShard`, the `semreg.registry.shard.OwnShard` of a node): the
registry (instances, leases, catalogue), its durable records, the lease timer and the active health
checks.

Writes follow one order: validate (before the shard), make durable (the records, on the node's writer
thread, so records land in the order requests asked), then apply in memory and report the changes. The
writes of one instance's record (a registration, an admin status, a copy handed over, a removal) go one at a
time: each reads what the one before made durable and applied, so none undoes another (`_writing_now`); writes
of other instances, and a heartbeat that brings no new status, wait for none of them.
Revisions (`semreg.registry.revisions`) order the writes of one instance, wherever they were made: a copy older
than what the shard holds is ignored, and a removal leaves a tombstone (kept `TOMBSTONE_KEEP_S`) so that
an older copy never brings the instance back.

In a cluster a shard holds the instances it owns on the ring, and runs the lease and the checks only of
those it is the first live owner of (`set_primary`); their status changes are reported with a state
version, for the other owners to take (`apply_states`). The overview's counts it answers (`counts`) are of
those same instances, so that the members' counts add up to each instance once.
"""
from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from typing import Any, Protocol, TypeVar

from semreg import heap
from semreg.clock import Cancellable, Clock
from semreg.rdf.terms import Tag
from semreg.registry import discovery, inventory, primaries, questions, restore
from semreg.registry.catalogue import Match
from semreg.registry.digests import Arcs, Digest, digests
from semreg.registry.environment_counts import Tally, tag_hashes
from semreg.registry.health import HealthChecker
from semreg.registry.instances import STATUSES, UP, Instance, Registration
from semreg.registry.registry import Change, Registry
from semreg.registry.removals import TOMBSTONE_KEEP_S, RecentRemovals
from semreg.registry.revisions import Revisions
from semreg.registry.selector import Selector
from semreg.registry.shard import Held, Listener, OwnShard, Record, Removed, State
from semreg.storage.store import Store
from semreg.work.lane import Lane, checkpoint

log = logging.getLogger("semreg.shard")

T = TypeVar("T")


class Write(Protocol):
    """Runs a store operation on the node's writer thread, in order: `await write(fn, *args)` is `fn(*args)`."""

    def __call__(self, fn: Callable[..., T], /, *args: Any) -> Awaitable[T]: ...


Submit = Callable[..., None]  # the same, for a write nobody waits for
INLINE_WRITES = 64  # writes of up to this many instances are applied at once; more, in slices on the lane
HASHED_AT_ONCE = 20_000  # tags an overview's counts hash at once; more, in a worker thread
TAG_HASHES_KEPT = 8  # the hashes last made, per environments asked


class LocalShard(OwnShard):
    """The registry of this process behind the `Shard` interface, with its records, leases and checks."""

    def __init__(self, clock: Clock, store: Store, write: Write, submit: Submit,
                 health: HealthChecker | None = None, node_id: str = "", lane: Lane | None = None) -> None:
        """`health`: the checker to use (tests give one with a fake probe); its reports come here. `lane`: where
        questions run, in slices within their budgets (`semreg.work.lane`)."""
        self.clock = clock
        self.lane = lane or Lane()
        self.store = store
        self._write = write
        self._submit = submit
        self.registry = Registry(clock, on_change=self._changed)
        self.health = health or HealthChecker(self._apply_check, clock)
        self.health.report = self._apply_check
        self.revisions = Revisions(clock, node_id)
        self.removals = RecentRemovals(self.registry.tombstones)  # enabled in a ring
        self._listeners: list[Listener] = []
        self._expiry: Cancellable | None = None
        self._expiry_when = 0.0
        self._check_gen: dict[str, int] = {}
        self.primary: Callable[[str], bool] = lambda instance_id: True
        # id → the revision of its record being made durable and applied right now, and when it is (done or failed):
        # only the ids being written are here (`_writing_now`)
        self._writing: dict[str, tuple[int, asyncio.Future[None]]] = {}
        self._deciding: asyncio.Task[None] | None = None  # the leases a ring change moved, decided off the loop
        self.ring: tuple[str, ...] = ()  # the members of the ring `primary` places on (none alone)
        # environments asked → (the tags version they were made at, the distinct tags' hashes)
        self._tag_hashes: dict[frozenset[str] | None, tuple[int, bytes]] = {}
        self._incarnation = os.urandom(6).hex()  # names this process's tag versions (`counts`)

    # -- life cycle --------------------------------------------------------------------------------
    async def open(self, post: Callable[[Callable[[], None]], None], stopped: Callable[[], bool] = lambda: False
                   ) -> int:
        """Restore the recorded instances (each with one fresh ttl) and tombstones, and start the checks
        and the lease timer. `post(fn)` runs `fn` on the node's event loop from another thread. `StopAsked`
        once `stopped()` says so (the records are left as they are)."""
        self.health.post = post
        recorded = await restore.read(self.store, self._write, self.clock.wall() - TOMBSTONE_KEEP_S, stopped)
        self.revisions.observe(recorded.newest)
        self.registry.tombstones.update(recorded.tombstones)
        for iid in recorded.expired:
            await self._write(self.store.delete_record, iid)
        self.health.start()
        await restore.put_back(self.registry, recorded, stopped)
        for reg in recorded.regs:
            if not self.primary(reg.id):
                self.registry.set_leased(reg.id, False)
        self._arm_expiry()
        return len(recorded.regs)

    async def keep(self) -> None:
        """At a clean stop, after the last write: the registry kept for the next start-up (`restore.keep`)."""
        await restore.keep(self.registry, self.store, self._write)

    async def close(self) -> None:
        for pending in (self._expiry, self._deciding):
            if pending is not None:
                pending.cancel()
        await asyncio.to_thread(self.health.stop)

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def _changed(self, changes: list[Change]) -> None:
        for c in changes:
            if c.reason in ("registered", "replaced"):
                self._check(c.id)
            elif c.removed and self._check_gen.pop(c.id, None) is not None:
                self.health.set(c.id, None)
        for listener in self._listeners:
            listener(changes)

    def _check(self, instance_id: str) -> None:
        """Probe this instance here if it has a check and this shard runs its lease; else not."""
        inst = self.registry.instances.get(instance_id)
        check = inst.reg.check if inst is not None and inst.leased else None
        if check:
            self._check_gen[instance_id] = self.health.set(instance_id, check)
        elif self._check_gen.pop(instance_id, None) is not None:
            self.health.set(instance_id, None)

    # -- writes ------------------------------------------------------------------------------------
    async def put_records(self, items: list[tuple[Registration, int]], views: bool = True
                          ) -> list[tuple[Instance | None, bool]]:
        """Copies of registrations with their revisions (from this node or another): the ones newer than
        what the shard holds are made durable (one transaction), then live; older ones are ignored
        (None). Each with the instance as stored (None without `views`) and whether it was new here. A large
        batch is prepared and applied as essential request work (`semreg.work.lane`: in slices, never shed:
        its admission was the request's)."""
        landed = asyncio.get_running_loop().create_future()
        try:
            fresh, records, later = await self._in_slices(len(items), self._fresh_records, items, landed)
            if records:
                await self._write(self.store.save_records, records)
            applied = await self._in_slices(len(fresh), self._apply, fresh)
        finally:
            self._landed((reg.id for reg, _ in items), landed)
        self._arm_expiry()
        if later:  # instances another write was writing: taken once it is done, from what it left
            await asyncio.wait({f for _, f in later})
            again = [item for item, _ in later]
            applied.update({reg.id: (inst, created) for (reg, _), (inst, created) in
                            zip(again, await self.put_records(again)) if inst is not None})
        stored: list[tuple[Instance | None, bool]] = [applied.get(reg.id, (None, False)) for reg, _ in items]
        return stored if views else [(None, created) for _, created in stored]

    async def _in_slices(self, size: int, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` at once when it is a few writes' work, else as essential work on the lane (the collector
        paused meanwhile for a large one: `semreg.heap.making`)."""
        if size <= INLINE_WRITES:
            return fn(*args)
        with heap.making(size):
            return await self.lane.run(fn, *args, what="this write", essential=True)

    def _fresh_records(self, items: list[tuple[Registration, int]], landed: asyncio.Future[None]
                       ) -> tuple[list[tuple[Registration, int]], list[tuple[dict[str, Any], int]],
                                  list[tuple[tuple[Registration, int], asyncio.Future[None]]]]:
        """The registrations newer than what is held, with their records (each id marked as being written, until
        `landed`), and those another write is writing right now, with when it is done (`_writing_now`)."""
        wall = self.clock.wall()
        fresh, records, later = [], [], []
        for k, (reg, revision) in enumerate(items):
            if k % 256 == 255:
                checkpoint()
            self.revisions.observe(revision)
            writing = self._writing.get(reg.id)
            if writing is not None and writing[1] is not landed:
                later.append(((reg, revision), writing[1]))
                continue
            if not self.registry.newer(reg.id, revision):
                continue
            self._writing[reg.id] = (revision, landed)
            old = self.registry.instances.get(reg.id)
            rec = reg.record()
            rec["registered_at"] = old.registered_at_wall if old is not None else wall
            if old is not None and old.admin_status != "up":
                rec["admin_status"] = old.admin_status
            records.append((rec, revision))
            fresh.append((reg, revision))
        return fresh, records, later

    def _apply(self, fresh: list[tuple[Registration, int]]) -> dict[str, tuple[Instance, bool]]:
        applied = {inst.id: (inst, created) for inst, created in
                   self.registry.put_many([r for r, _ in fresh], [v for _, v in fresh])}
        for reg, _ in fresh:
            if reg.id in applied and not self.primary(reg.id):
                self.registry.set_leased(reg.id, False)
                self._check(reg.id)
        return applied

    async def restore_records(self, items: list[Record]) -> int:
        """Copies handed over by another owner, in their durable form (with registration time and admin
        status); returns how many were newer than what this shard held. A copy that another write is storing
        right now (as new, or newer: another hand-off) is not stored twice, but waited for: once this returns, every
        copy given is held here or superseded, so a status sent next, made at that copy's revision, finds it
        (`apply_states`). One whose instance another write is writing at an older revision is taken once that
        write is done (`_writing_now`)."""
        wall = self.clock.wall()
        fresh: list[tuple[dict[str, Any], int]] = []
        tombs: list[tuple[str, int]] = []
        landing: set[asyncio.Future[None]] = set()
        later: list[Record] = []
        for rec, revision in items:
            self.revisions.observe(revision)
            writing = self._writing.get(rec["id"])
            if writing is not None:
                if writing[0] >= revision:
                    landing.add(writing[1])  # being stored right now, as this copy or newer
                else:
                    later.append((rec, revision))
                    landing.add(writing[1])
                continue
            if not self.registry.newer(rec["id"], revision):
                continue
            if rec.get("deleted"):
                tombs.append((rec["id"], revision))
            else:
                fresh.append((rec, revision))
        if fresh:
            landed = asyncio.get_running_loop().create_future()
            for rec, revision in fresh:
                self._writing[rec["id"]] = (revision, landed)
            try:
                await self._write(self.store.save_records, fresh)
                await self._in_slices(len(fresh), self._apply_restored, fresh, wall)
            finally:
                self._landed((rec["id"] for rec, _ in fresh), landed)
            self._arm_expiry()
        for iid, revision in tombs:
            await self.delete_record(iid, revision)
        if landing:
            await asyncio.wait(landing)
        taken = await self.restore_records(later) if later else 0
        return len(fresh) + len(tombs) + taken

    def _landed(self, ids: Iterable[str], landed: asyncio.Future[None]) -> None:
        """The writes of these ids' records done with `landed` are done (or failed): the next may go."""
        for iid in ids:
            writing = self._writing.get(iid)
            if writing is not None and writing[1] is landed:
                del self._writing[iid]
        landed.set_result(None)

    async def _writing_now(self, instance_id: str) -> Instance | None:
        """The instance as held once no write of its record is under way. One write of an instance's record at a
        time: each reads what the one before made durable and applied (a status write and a registration that
        met would otherwise each write its own reading, and the one that landed last undo the other), and marks
        the id as being written (`_writing`, only while it is) until it has applied its own."""
        while (writing := self._writing.get(instance_id)) is not None:
            await asyncio.wait({writing[1]})
        return self.registry.instances.get(instance_id)

    def _apply_restored(self, fresh: list[tuple[dict[str, Any], int]], wall: float) -> None:
        regs = [Registration.from_record(rec) for rec, _ in fresh]
        # a record is the whole of a copy: one without an admin status is up, whatever the copy here said
        statuses = [rec.get("admin_status", UP) for rec, _ in fresh]
        walls = [rec.get("registered_at") or wall for rec, _ in fresh]
        self.registry.put_many(regs, [rev for _, rev in fresh], admin_statuses=statuses, registered_at_wall=walls)
        for reg in regs:
            if not self.primary(reg.id):
                self.registry.set_leased(reg.id, False)
                self._check(reg.id)

    async def delete_record(self, instance_id: str, revision: int) -> bool:
        """A removal with its revision: a tombstone, durable, then the instance leaves. False when the
        shard already held something newer."""
        self.revisions.observe(revision)
        await self._writing_now(instance_id)
        if not self.registry.newer(instance_id, revision):
            return False
        tomb = {"id": instance_id, "deleted": True, "deleted_at": self.clock.wall()}
        await self._written(instance_id, tomb, revision, lambda: self.registry.delete(instance_id, revision=revision))
        self.removals.added(instance_id, revision)
        return True

    async def heartbeat(self, instance_id: str, load: float | None, status: str | None,
                        revision: int | None = None) -> Instance:
        """Renew the lease at once (the liveness path waits for nothing); a new admin status is written down first,
        after any write of the instance's record under way."""
        inst = self.registry.get(instance_id)
        if status is not None and status != inst.admin_status:
            inst = await self._writing_now(instance_id) or self.registry.get(instance_id)
        if status is not None and status != inst.admin_status:
            inst = await self._status_written(inst, status, revision, lambda at: self.registry.heartbeat(
                instance_id, load=load, status=status, revision=at, state_version=self.revisions.next()))
        else:
            inst = self.registry.heartbeat(instance_id, load=load, status=status,
                                           state_version=self.revisions.next())
        self._arm_expiry()
        return inst

    async def set_status(self, instance_id: str, status: str, replaces: Collection[str] | None = None,
                         revision: int | None = None) -> Instance:
        """The admin status alone, written down as a heartbeat's is, without renewing the lease; only in place of
        one of `replaces` when given (decided here, where the status is kept, so no other change slips between)."""
        inst = await self._writing_now(instance_id) or self.registry.get(instance_id)
        if status == inst.admin_status or (replaces is not None and inst.admin_status not in replaces):
            return inst
        return await self._status_written(inst, status, revision, lambda at: self.registry.set_status(
            instance_id, status, revision=at, state_version=self.revisions.next()))

    async def _status_written(self, inst: Instance, status: str, dated: int | None,
                              apply: Callable[[int], Instance]) -> Instance:
        """Write the instance down with this admin status (at `_status_revision`), then `apply(revision)`."""
        rec = inst.durable()
        rec["admin_status"] = status
        revision = self._status_revision(inst, dated)
        return await self._written(inst.id, rec, revision, lambda: apply(revision))

    async def _written(self, instance_id: str, rec: dict[str, Any], revision: int, apply: Callable[[], T]) -> T:
        """Make one instance's record durable at `revision`, then `apply()`; the id marked as being written
        meanwhile (`_writing_now`)."""
        landed = asyncio.get_running_loop().create_future()
        self._writing[instance_id] = (revision, landed)
        try:
            await self._write(self.store.save_records, [(rec, revision)])
            return apply()
        finally:
            self._landed((instance_id,), landed)

    def _status_revision(self, inst: Instance, dated: int | None) -> int:
        """The revision an admin status is written down at: the one its coordinator dated the request with, or
        (a newer registration came in between, and keeps its place) just after the one held."""
        if dated is None:
            return self.revisions.next()
        self.revisions.observe(dated)
        return dated if dated > inst.revision else self.revisions.after(inst.revision)

    async def record_route(self, instance_id: str) -> None:
        self.registry.record_route(instance_id)

    async def apply_states(self, states: Iterable[State]) -> int:
        """Statuses another owner reported: (id, revision, state version, admin status, expired, check
        passing). Returns how many were newer here."""
        applied = 0
        for iid, revision, version, admin_status, expired, passing in states:
            if self.registry.apply_state(iid, revision, version, admin_status, expired, passing) is not None:
                applied += 1
        return applied

    def state(self, instance_id: str) -> State | None:
        """The instance's status as the other owners take it (`apply_states`), if it is held here."""
        inst = self.registry.instances.get(instance_id)
        if inst is None:
            return None
        return (inst.id, inst.revision, inst.state_version, inst.admin_status, inst.expired, inst.check_passing)

    # -- ownership ---------------------------------------------------------------------------------
    def set_primary(self, primary: Callable[[str], bool], ring: tuple[str, ...] = ()) -> None:
        """Which instances this shard runs the lease and checks of (a ring change moves some), on the ring of
        members `ring`: decided at once on a small shard, else in a worker thread (`semreg.registry.primaries`);
        an instance written meanwhile is decided as it is stored."""
        self.primary = primary
        self.ring = ring
        self.registry.leases_here = primary
        if len(self.registry.instances) <= primaries.AT_ONCE:
            return self._lease_here(primaries.moved(self.registry.instances, primary))
        self._deciding = asyncio.get_running_loop().create_task(self._decide(primary, dict(self.registry.instances)))

    async def _decide(self, primary: Callable[[str], bool], instances: dict[str, Instance]) -> None:
        changed = await asyncio.to_thread(primaries.moved, instances, primary)
        if primary is self.primary:  # else a newer ring change decides
            self._lease_here(changed)

    def _lease_here(self, changed: list[tuple[str, bool]]) -> None:
        for iid, leased in changed:  # nothing for an instance gone meanwhile
            self.registry.set_leased(iid, leased)
            self._check(iid)
        self._arm_expiry()

    async def primaries_settled(self) -> None:
        """Return once the last ring change's leases are where it put them."""
        if self._deciding is not None:
            await asyncio.shield(self._deciding)

    async def inventory(self, ids: Iterable[str] | None = None) -> dict[str, int]:
        """Revisions of the instances and tombstones held (of `ids`; all, read off the event loop, when None;
        `semreg.registry.inventory`)."""
        if ids is None:
            return await inventory.whole(self.registry.instances, self.registry.tombstones)
        return inventory.of(self.registry.instances, self.registry.tombstones, ids)

    async def digests(self, ring: Arcs, arcs: list[int]) -> dict[int, Digest]:
        """Digests of what this shard holds in these arcs of `ring` (computed off the event loop)."""
        return await asyncio.to_thread(digests, ring, await self.inventory(), arcs)

    async def export(self, ids: Iterable[str]) -> list[Record]:
        """The durable form of these instances and tombstones, for another owner."""
        out = []
        for iid in ids:
            inst = self.registry.instances.get(iid)
            if inst is not None:
                out.append((inst.durable(), inst.revision))
                continue
            tomb = self.registry.tombstones.get(iid)
            if tomb is not None:
                out.append(({"id": iid, "deleted": True, "deleted_at": tomb[1]}, tomb[0]))
        return out

    async def drop(self, ids: Iterable[str], held: Mapping[str, int] | None = None) -> int:
        """Let go of copies (and tombstones) this shard no longer owns, once their owners hold them. With `held`
        (the revision each was at when its owners were found to hold it, a tombstone's negated), only those still
        at it: one written here since (a status decided here, a newer copy handed over), or being written right
        now, is kept for the next pass to hand on, never let go of unsent."""
        dropped = 0
        for iid in ids:
            now = inventory.of(self.registry.instances, self.registry.tombstones, (iid,)).get(iid)
            if now is None or (held is not None and (held.get(iid) != now or iid in self._writing)):
                continue
            self.registry.tombstones.pop(iid, None)
            self.registry.drop(iid)
            await self._write(self.store.delete_record, iid)
            dropped += 1
        return dropped

    async def last_on_ring(self) -> float | None:
        """When this shard last compared its records with a ring (wall seconds), as its store remembers."""
        return await self._write(self.store.load_last_on_ring)

    def on_ring(self) -> None:
        self._submit(self.store.save_last_on_ring, self.clock.wall())

    def forget_tombstones(self) -> int:
        gone = self.registry.forget_tombstones(self.clock.wall() - TOMBSTONE_KEEP_S)
        for iid in gone:
            self._submit(self.store.delete_record, iid)
        return len(gone)

    # -- reads -------------------------------------------------------------------------------------
    def held(self, instance_id: str) -> Instance | None:
        """The instance as this shard holds it now, if it does."""
        return self.registry.instances.get(instance_id)

    async def get(self, instance_id: str) -> Instance:
        inst = self.registry.instances.get(instance_id)
        if inst is None and (tomb := self.registry.tombstones.get(instance_id)) is not None:
            raise Removed(f"no instance '{instance_id}' is registered.", tomb[0])
        return self.registry.get(instance_id)

    async def instances(self, service: str | None, *, shed: bool = True) -> Held[list[Instance]]:
        """The instances held (of `service`, or all), as request work (`shed=False`: another node admitted it)."""
        listed = await self.lane.run(self.registry.of_service, service, what="this listing", shed=shed)
        return Held(listed, self.removals.current())

    async def registered_by(self, ids: list[str]) -> dict[str, tuple[int, str | None, str]]:
        """Of these instances, the ones held here: their revision, the token that registered them and their
        environment; and the ones removed lately, as (-revision, None, "")."""
        held = self.registry.instances
        removed = self.removals.current()
        out = {iid: (inst.revision, inst.reg.owner, inst.reg.environment) for iid in ids
               if (inst := held.get(iid)) is not None}
        out.update({iid: (-removed[iid], None, "") for iid in ids if iid in removed})
        return out

    async def resolve(self, q: questions.Question, *, shed: bool = True) -> discovery.Part:
        """The shard's part of a question, as request work (`shed=False`: another node admitted it)."""
        return await self.lane.run(self.part, q, what="this question", shed=shed)

    def part(self, q: questions.Question) -> discovery.Part:
        return q.part(self.registry.catalogue, self.registry.instances, self.removals.current())

    async def holders(self, tags: list[Tag], with_tags: bool = True) -> Held[dict[Tag, list[Instance]]]:
        """Each tag's holders (`with_tags` matters only to a shard that sends views elsewhere)."""
        holders = self.registry.catalogue.holders
        instances = self.registry.instances
        return Held({tag: [instances[i] for i in sorted(holders.get(tag, ())) if i in instances] for tag in tags},
                    self.removals.current())

    async def matching_tags(self, query: Tag, match: frozenset[str], *, shed: bool = True) -> list[Match]:
        return await self.lane.run(self.registry.catalogue.expand, query, match, what="this question", shed=shed)

    async def tag_holders(self, selector: Selector) -> Held[Mapping[Tag, Collection[str]]]:
        """Every tag of this shard with the ids of its instances the selector admits (read, do not keep)."""
        return Held(self.registry.tag_holders(selector), self.removals.current())

    async def names_term(self, iri: str) -> bool:
        return any(iri in terms for terms in self.registry.catalogue.by_position)

    async def counts(self, environments: frozenset[str] | None, known: str | None = None) -> Tally:
        """The overview's counts of the instances in `environments` (None: all) whose lease runs here, kept as
        they change (`Registry.leased_counts`), once the last ring change's leases are where it put them. The
        hashes of their distinct tags are made again only when the tags held moved: past `HASHED_AT_ONCE`
        tags, in a worker thread over copies of the tag lists; and not sent when the asker holds them already
        (`known`, the state they were sent as: `semreg.registry.tag_union`)."""
        await self.primaries_settled()
        kept = self.registry.leased_counts
        version = kept.tags_version
        state = f"{self._incarnation}:{version}"
        if known == state:
            return kept.tally(environments, STATUSES, None, self.ring, state)
        made = self._tag_hashes.get(environments)
        if made is not None and made[0] == version:
            tags = made[1]
        else:
            lists = kept.tag_lists(environments)
            tags = tag_hashes(lists) if sum(map(len, lists)) <= HASHED_AT_ONCE else await asyncio.to_thread(
                tag_hashes, lists)
            self._tag_hashes.pop(environments, None)
            if len(self._tag_hashes) >= TAG_HASHES_KEPT:
                del self._tag_hashes[next(iter(self._tag_hashes))]
            self._tag_hashes[environments] = (version, tags)
        return kept.tally(environments, STATUSES, tags, self.ring, state)

    # -- leases ------------------------------------------------------------------------------------
    def _arm_expiry(self) -> None:
        """One timer, at the earliest lease deadline, so an expired instance leaves discovery at once."""
        deadline = self.registry.next_deadline()
        if self._expiry is not None:
            if deadline is not None and abs(self._expiry_when - deadline) < 1e-6:
                return
            self._expiry.cancel()
            self._expiry = None
        if deadline is None:
            return
        self._expiry_when = deadline
        self._expiry = self.clock.call_at(deadline, self._on_expiry_timer)

    def _on_expiry_timer(self) -> None:
        self._expiry = None
        # a deletion after deregister_after leaves a tombstone, so that no copy brings it back
        changes = self.registry.expire(removal=self.revisions.next)
        for c in changes:
            if c.removed:
                self.removals.added(c.id, c.revision)
                self._submit(self.store.save_records, [({"id": c.id, "deleted": True,
                                                         "deleted_at": self.clock.wall()}, c.revision)])
            log.info("instance " + c.reason, extra={"instance": c.id})
        self._arm_expiry()

    # -- health checks -----------------------------------------------------------------------------
    def _apply_check(self, iid: str, gen: int, passing: bool, detail: str) -> None:
        if self._check_gen.get(iid) != gen:
            return  # a result for a check that was replaced or removed meanwhile
        inst = self.registry.instances.get(iid)
        if inst is None:
            return
        was = inst.check_passing
        self.registry.set_check_result(iid, passing, state_version=self.revisions.next(), output=detail)
        if was != passing:
            log.info("check " + ("passing" if passing else "failing"), extra={"instance": iid, "detail": detail})
            self._arm_expiry()
