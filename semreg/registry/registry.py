"""The registry of one shard: instances, their leases and statuses, and the tag catalogue. Domain only:
no HTTP, no storage; time comes from the injected clock (monotonic for leases, `semreg.clock`).

Every change is reported to `on_change` as `Change` values (plain data, no live objects), which
persistence, caches, watches and the replica follow. A change is `membership` when it can alter a
discovery result (a registration, a removal, a status); a heartbeat that only renews the lease or
reports a load is not.

Only this module mutates an `Instance`.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass

from semreg.clock import Clock
from semreg.errors import NotFound
from semreg.rdf.terms import Tag
from semreg.registry.catalogue import Catalogue
from semreg.registry.environment_counts import EnvironmentCounts
from semreg.registry.instances import CRITICAL, UP, HealthNote, Instance, Registration
from semreg.registry.selector import ALL, EVERYTHING, Selector
from semreg.work.lane import checkpoint, current, sort

REGISTERED, REPLACED, DEREGISTERED, EXPIRED, DELETED = "registered", "replaced", "deregistered", "expired", "deleted"
STATUS, RENEWED, CHECK = "status", "renewed", "check"
REMOVALS = (DEREGISTERED, DELETED)
EXPIRE_BATCH = 200  # lapsed leases handled in one turn of the event loop (~20 ms of their changes)


@dataclass(frozen=True, slots=True)
class Change:
    """What happened to one instance, as values that can be logged, compared or sent elsewhere."""

    id: str
    reason: str  # registered | replaced | deregistered | expired | deleted | status | renewed | check
    # the instance's revision; of a removal that leaves a tombstone, the removal's own (the tombstone's), not the
    # removed copy's: a copy elsewhere at or below it is of the registration removed (`semreg.cluster.replica_copies`)
    revision: int
    status: str | None  # after the change; None once the instance is gone
    membership: bool
    tags: frozenset[Tag]  # its tags before and after: what a watcher tests for relevance
    services: frozenset[str]  # its service before and after
    environments: frozenset[str]  # its environment before and after

    @property
    def removed(self) -> bool:
        return self.status is None


def _change(inst: Instance, reason: str, membership: bool, before: Registration | None = None,
            removed: bool = False, revision: int | None = None) -> Change:
    tags = frozenset(inst.reg.tags) if before is None else frozenset(inst.reg.tags) | frozenset(before.tags)
    services = frozenset((inst.reg.service,) if before is None else (inst.reg.service, before.service))
    environments = frozenset((inst.reg.environment,) if before is None else (inst.reg.environment, before.environment))
    return Change(inst.id, reason, inst.revision if revision is None else revision, None if removed else inst.status,
                  membership, tags, services, environments)


APPLIED_BETWEEN_CHECKPOINTS = 256


class Registry:
    def __init__(self, clock: Clock, on_change: Callable[[list[Change]], None] | None = None) -> None:
        self.clock = clock
        self.instances: dict[str, Instance] = {}
        self.tombstones: dict[str, tuple[int, float]] = {}  # id → (revision of its removal, wall time)
        self.by_service: dict[str, set[str]] = {}
        self.by_environment: dict[str, set[str]] = {}
        self.catalogue = Catalogue()
        self.on_change = on_change
        self._deadlines: list[tuple[float, str]] = []  # (when, id): lazily checked lease deadlines
        # the instances of each status, kept as they change: /metrics asks on every scrape, and counting a
        # million instances held the event loop 0.3-0.9 s
        self._statuses: dict[str, int] = dict.fromkeys((UP, "blocked", "draining", CRITICAL), 0)
        # the overview's counts of the instances whose lease runs here, per environment, kept as they change:
        # every instance on a node alone, those it is the first owner of in a ring (`environment_counts`)
        self.leased_counts = EnvironmentCounts(())
        self.leases_here: Callable[[str], bool] = _everywhere  # whether a new instance's lease runs here

    # -- writes ------------------------------------------------------------------------------------
    def put(self, reg: Registration, *, revision: int | None = None) -> tuple[Instance, bool]:
        """Create or replace; returns the instance and whether it was created."""
        (inst, created), = self.put_many([reg], revisions=[revision])
        return inst, created

    def put_many(self, regs: Iterable[Registration], revisions: Iterable[int | None] | None = None, *,
                 admin_statuses: Iterable[str | None] | None = None,
                 registered_at_wall: Iterable[float | None] | None = None) -> list[tuple[Instance, bool]]:
        """Create or replace, each with its own revision (default: the next). A restore passes the
        recorded admin status and registration time too; every instance starts a fresh lease. As request work
        (`semreg.work.lane`), a few hundred at a time, their changes reported before the loop is handed back."""
        regs = list(regs)
        revs = list(revisions) if revisions is not None else [None] * len(regs)
        statuses = list(admin_statuses) if admin_statuses is not None else [None] * len(regs)
        walls = list(registered_at_wall) if registered_at_wall is not None else [None] * len(regs)
        now, wall = self.clock.monotonic(), self.clock.wall()
        out = []
        changes: list[Change] = []
        pausing = current() is not None
        for k, (reg, revision, status, at_wall) in enumerate(zip(regs, revs, statuses, walls)):
            if pausing and k % APPLIED_BETWEEN_CHECKPOINTS == APPLIED_BETWEEN_CHECKPOINTS - 1:
                self._emit(changes)  # what is applied is said before the loop is handed back
                changes = []
                checkpoint()
            old = self.instances.get(reg.id)
            if revision is not None and not self.newer(reg.id, revision):
                continue  # a copy older than what this shard holds, or than its removal
            shared = self.catalogue.shared(reg.tags)
            if shared is not reg.tags:
                reg.share_tags(shared)
            expires = now + reg.ttl_s if reg.ttl_s > 0 else None
            inst = Instance(reg=reg, registered_at=now, last_heartbeat=now, expires_at=expires,
                            registered_at_wall=at_wall or wall,
                            expires_at_wall=wall + reg.ttl_s if reg.ttl_s > 0 else None,
                            revision=revision or (old.revision + 1 if old else 1), leased=self.leases_here(reg.id))
            if old is not None:
                inst.registered_at = old.registered_at
                inst.registered_at_wall = old.registered_at_wall
                inst.admin_status = old.admin_status
                inst.load = old.load
                self._unindex(old)
            if status is not None:
                inst.admin_status = status
            self.tombstones.pop(reg.id, None)
            self.instances[reg.id] = inst
            self._statuses[inst.status] += 1
            if inst.leased:
                self.leased_counts.add(inst)
            self.by_service.setdefault(reg.service, set()).add(reg.id)
            self.by_environment.setdefault(reg.environment, set()).add(reg.id)
            self.catalogue.add(reg.id, reg.tags)
            self._schedule(inst)
            out.append((inst, old is None))
            changes.append(_change(inst, REGISTERED if old is None else REPLACED, True, old.reg if old else None))
        self._emit(changes)
        return out

    def delete(self, instance_id: str, reason: str = DEREGISTERED, revision: int | None = None) -> Instance | None:
        """Remove an instance; with a `revision` (a cluster's deletes) leave a tombstone of it, so an older
        copy arriving later never brings the instance back. NotFound without one when there is nothing."""
        if revision is not None:
            if not self.newer(instance_id, revision):
                return None
            self.tombstones[instance_id] = (revision, self.clock.wall())
        inst = self.instances.pop(instance_id, None)
        if inst is None:
            if revision is not None:
                return None
            raise NotFound(f"no instance '{instance_id}' is registered.")
        self._unindex(inst)
        self._emit([_change(inst, reason, True, removed=True, revision=revision)])
        return inst

    def newer(self, instance_id: str, revision: int) -> bool:
        """Whether `revision` of an instance is newer than anything this registry holds of it."""
        inst = self.instances.get(instance_id)
        if inst is not None and inst.revision >= revision:
            return False
        tomb = self.tombstones.get(instance_id)
        return tomb is None or tomb[0] < revision

    def forget_tombstones(self, older_than_wall: float) -> list[str]:
        gone = [iid for iid, (_, at) in self.tombstones.items() if at < older_than_wall]
        for iid in gone:
            del self.tombstones[iid]
        return gone

    def drop(self, instance_id: str) -> None:
        """Let go of a copy this shard no longer owns (its owners hold it): no tombstone, no change to
        the instance itself, but watchers of this shard's results see it leave."""
        inst = self.instances.pop(instance_id, None)
        if inst is not None:
            self._unindex(inst)
            self._emit([_change(inst, "moved", True, removed=True)])

    def heartbeat(self, instance_id: str, *, load: float | None = None, status: str | None = None,
                  revision: int | None = None, state_version: int = 0) -> Instance:
        """Renew the lease (a `critical` instance whose ttl had passed comes back), maybe with a load
        and an admin status; `revision` is the new one when the status was written down."""
        inst = self.instances.get(instance_id)
        if inst is None:
            raise NotFound(f"no instance '{instance_id}' is registered; register it again.")
        before = inst.status
        now = self.clock.monotonic()
        # a service that reports itself critical again is not the better for saying so: its deletion
        # (`deregister_after`) still counts from its first such report, as Consul counts from the check's failure
        if not (status == CRITICAL and inst.admin_status == CRITICAL):
            inst.last_heartbeat = now
        if inst.reg.ttl_s > 0:
            inst.expires_at = now + inst.reg.ttl_s
            inst.expires_at_wall = self.clock.wall() + inst.reg.ttl_s
        inst.expired = False
        if load is not None:
            inst.load = load
            inst.routes_since_report = 0
        if status is not None:
            inst.admin_status = status
        if revision is not None:
            inst.revision = revision
        membership = self._restatus(inst, before)
        # every renewal is newer state (lease, load): a copy elsewhere that was not renewed is older
        inst.state_version = max(inst.state_version + 1, state_version)
        inst.invalidate_view()
        self._schedule(inst)
        self._emit([_change(inst, STATUS if membership else RENEWED, membership)])
        return inst

    def set_status(self, instance_id: str, status: str, *, revision: int, state_version: int = 0) -> Instance:
        """The admin status alone, as written down at `revision`: unlike a heartbeat's, the lease is not renewed, so
        an instance whose ttl has passed stays critical, and a `deregister_after` counts on from the last heartbeat."""
        inst = self.get(instance_id)
        before, inst.admin_status, inst.revision = inst.status, status, revision
        inst.state_version = max(inst.state_version + 1, state_version)
        inst.invalidate_view()
        self._emit([_change(inst, STATUS, self._restatus(inst, before))])
        return inst

    def set_check_result(self, instance_id: str, passing: bool, state_version: int = 0, output: str | None = None
                         ) -> Instance | None:
        """A check's result; with `output` (what the probe said) it is kept as the instance's last check."""
        inst = self.instances.get(instance_id)
        if inst is None:
            return None
        if output is not None:
            inst.health = HealthNote.checked(inst.health, passing, output, self.clock.wall())
            inst.invalidate_view()
        if inst.check_passing == passing:
            return inst
        before = inst.status
        inst.check_passing = passing
        inst.state_version = max(inst.state_version + 1, state_version)
        if passing:
            inst.last_heartbeat = max(inst.last_heartbeat, self.clock.monotonic())
        inst.invalidate_view()
        self._schedule(inst)
        self._emit([_change(inst, CHECK, self._restatus(inst, before))])
        return inst

    def apply_state(self, instance_id: str, revision: int, state_version: int, admin_status: str, expired: bool,
                    check_passing: bool) -> Instance | None:
        """A status the instance's first owner reported (in a cluster): taken when it is newer."""
        inst = self.instances.get(instance_id)
        if inst is None or inst.revision != revision or inst.state_version >= state_version:
            return None
        before = inst.status
        inst.admin_status, inst.expired, inst.check_passing = admin_status, expired, check_passing
        inst.state_version = state_version
        inst.invalidate_view()
        self._emit([_change(inst, STATUS, self._restatus(inst, before))])
        return inst

    def set_leased(self, instance_id: str, leased: bool) -> None:
        """Run this instance's lease here (it starts afresh: one ttl from now) or stop running it."""
        inst = self.instances.get(instance_id)
        if inst is None or inst.leased == leased:
            return
        inst.leased = leased
        if not leased:
            self.leased_counts.remove(inst)
        else:
            self.leased_counts.add(inst)
            now = self.clock.monotonic()
            inst.last_heartbeat = max(inst.last_heartbeat, now)
            if inst.reg.ttl_s > 0 and not inst.expired:
                inst.expires_at = now + inst.reg.ttl_s
                inst.expires_at_wall = self.clock.wall() + inst.reg.ttl_s
                inst.invalidate_view()
            self._schedule(inst)

    def record_route(self, instance_id: str) -> None:
        """A route to this instance was handed out: it counts in its effective load until its next report."""
        inst = self.instances.get(instance_id)
        if inst is not None:
            inst.routes_since_report += 1

    # -- leases ------------------------------------------------------------------------------------
    def _schedule(self, inst: Instance) -> None:
        deadline = self._deadline(inst)
        if deadline is not None:
            heapq.heappush(self._deadlines, (deadline, inst.id))
        if inst.status == CRITICAL and inst.leased:  # when it is deleted, for the people reading its view
            at = None if deadline is None else self.clock.wall() + deadline - self.clock.monotonic()
            inst.health = HealthNote.deleting(inst.health, at)
            inst.invalidate_view()

    @staticmethod
    def _deadline(inst: Instance) -> float | None:
        """When this instance next needs attention: its lease expiry, or its deletion once critical."""
        if not inst.leased:
            return None
        if inst.status != CRITICAL:
            return inst.expires_at
        if inst.reg.deregister_after_s <= 0:
            return None
        delete_at = inst.last_heartbeat + inst.reg.deregister_after_s
        return max(delete_at, inst.expires_at or delete_at)

    def next_deadline(self) -> float | None:
        while self._deadlines:
            when, iid = self._deadlines[0]
            inst = self.instances.get(iid)
            if inst is not None and self._deadline(inst) == when:
                return when
            heapq.heappop(self._deadlines)
        return None

    def expire(self, limit: int = EXPIRE_BATCH, removal: Callable[[], int] | None = None) -> list[Change]:
        """Mark instances whose lease passed `critical`; delete those critical past `deregister_after`. At most
        `limit` of them: the caller comes back for the rest (`next_deadline` is then already due), so that
        10,000 leases lapsing at once do not hold the event loop for the whole of their changes (916 ms, and
        still 130 ms at 500 to a turn). With `removal` (a shard that keeps tombstones), a deletion leaves a
        tombstone of the revision it gives, which its change carries, as `delete` does."""
        now = self.clock.monotonic()
        changes: list[Change] = []
        while self._deadlines and self._deadlines[0][0] <= now and len(changes) < limit:
            when, iid = heapq.heappop(self._deadlines)
            inst = self.instances.get(iid)
            if inst is None or self._deadline(inst) != when:
                continue
            if inst.status != CRITICAL:
                before = inst.status
                inst.expired = True
                self._restatus(inst, before)
                inst.state_version += 1
                inst.invalidate_view()
                changes.append(_change(inst, EXPIRED, True))
                self._schedule(inst)
            else:
                self.instances.pop(iid)
                self._unindex(inst)
                revision = None if removal is None else removal()
                if revision is not None:
                    self.tombstones[iid] = (revision, self.clock.wall())
                changes.append(_change(inst, DELETED, True, removed=True, revision=revision))
        self._emit(changes)
        return changes

    # -- reads -------------------------------------------------------------------------------------
    def get(self, instance_id: str) -> Instance:
        inst = self.instances.get(instance_id)
        if inst is None:
            raise NotFound(f"no instance '{instance_id}' is registered.")
        return inst

    def of_service(self, service: str | None = None) -> list[Instance]:
        """The instances (of a service), by id; as request work, sorted and gathered in slices."""
        if service is None:
            ids: Iterable[str] = self.instances.keys()
        else:
            ids = self.by_service.get(service, ())
        out = []
        for k, i in enumerate(sort(list(ids))):  # a copy of the ids: the sort may pause
            if k % 4096 == 4095:
                checkpoint()
            inst = self.instances.get(i)
            if inst is not None:  # gone while the listing paused
                out.append(inst)
        return out

    def tag_holders(self, selector: Selector = EVERYTHING) -> Mapping[Tag, Collection[str]]:
        """Every tag with the ids of its instances that `selector` admits: the catalogue's live index (read,
        do not keep) when it admits every instance, else a new map, made from the selected environment's
        instances."""
        environment = selector.environment
        if selector.everything or (not selector.meta and len(self.by_environment.get(environment, ())) == len(
                self.instances)):
            return self.catalogue.holders
        ids = self.instances.keys() if environment == ALL else self.by_environment.get(environment, ())
        out: dict[Tag, set[str]] = {}
        for iid in ids:
            reg = self.instances[iid].reg
            if selector.admits(reg):
                for tag in reg.tags:
                    out.setdefault(tag, set()).add(iid)
        return out

    def counts_by_status(self) -> dict[str, int]:
        return dict(self._statuses)

    # -- internals ---------------------------------------------------------------------------------
    def _restatus(self, inst: Instance, before: str) -> bool:
        """Count `inst` under its status now instead of `before`; whether it changed."""
        after = inst.status
        if after == before:
            return False
        if CRITICAL in (after, before):  # since when it is critical, for its view
            inst.health = HealthNote.critical(inst.health, after == CRITICAL, self.clock.wall())
        self._statuses[before] -= 1
        self._statuses[after] += 1
        if inst.leased:
            self.leased_counts.restatus(inst, before)
        return True

    def _unindex(self, inst: Instance) -> None:
        """Forget a removed instance (or the copy a newer one replaces) in every index and count."""
        self._statuses[inst.status] -= 1
        if inst.leased:
            self.leased_counts.remove(inst)
        self.catalogue.remove(inst.id, inst.reg.tags)
        for index, key in ((self.by_service, inst.reg.service), (self.by_environment, inst.reg.environment)):
            ids = index.get(key)
            if ids is not None:
                ids.discard(inst.id)
                if not ids:
                    del index[key]

    def _emit(self, changes: list[Change]) -> None:
        if changes and self.on_change is not None:
            self.on_change(changes)


def _everywhere(instance_id: str) -> bool:
    return True
