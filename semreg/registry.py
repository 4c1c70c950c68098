"""The registry: instances, their leases and statuses, and the tag catalogue. Domain only: no HTTP,
no storage, no clock of its own (every method that needs the time takes `now`, wall-clock seconds).

Every change is reported to `on_change` as `Change`s, which persistence, caches and watches follow.
A change is `membership` when it can alter a discovery result (a registration, a removal, a status);
a heartbeat that only renews the lease or reports a load is not.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from semreg.catalogue import Catalogue
from semreg.errors import NotFound
from semreg.instances import CRITICAL, Instance, Registration
from semreg.terms import Tag


@dataclass(frozen=True)
class Change:
    id: str
    before: Registration | None
    after: Instance | None  # None when removed
    membership: bool
    reason: str  # registered | replaced | deregistered | expired | deleted | status | renewed | check

    @property
    def tags(self) -> set[Tag]:
        out = set(self.before.tags) if self.before else set()
        if self.after is not None:
            out.update(self.after.reg.tags)
        return out


class Registry:
    def __init__(self, on_change: Callable[[list[Change]], None] | None = None) -> None:
        self.instances: dict[str, Instance] = {}
        self.by_service: dict[str, set[str]] = {}
        self.catalogue = Catalogue()
        self.on_change = on_change
        self._deadlines: list[tuple[float, str]] = []  # (when, id): lazily checked lease deadlines

    # -- writes ------------------------------------------------------------------------------------
    def put(self, reg: Registration, now: float, *, revision: int | None = None) -> tuple[Instance, bool]:
        """Create or replace; returns the instance and whether it was created."""
        (inst, created), = self.put_many([reg], now, revisions=[revision])
        return inst, created

    def put_many(self, regs: Iterable[Registration], now: float,
                 revisions: Iterable[int | None] | None = None) -> list[tuple[Instance, bool]]:
        out = []
        changes = []
        revs = list(revisions) if revisions is not None else None
        for n, reg in enumerate(regs):
            old = self.instances.get(reg.id)
            revision = (revs[n] if revs else None) or (old.revision + 1 if old else 1)
            inst = Instance(reg=reg, registered_at=now, last_heartbeat=now,
                            expires_at=now + reg.ttl_s if reg.ttl_s > 0 else None, revision=revision)
            if old is not None:
                inst.registered_at = old.registered_at
                inst.admin_status = old.admin_status
                inst.load = old.load
                self._unindex(old)
            self.instances[reg.id] = inst
            self.by_service.setdefault(reg.service, set()).add(reg.id)
            self.catalogue.add(reg.id, reg.tags)
            self._schedule(inst)
            out.append((inst, old is None))
            changes.append(Change(reg.id, old.reg if old else None, inst, True,
                                  "registered" if old is None else "replaced"))
        self._emit(changes)
        return out

    def delete(self, instance_id: str, reason: str = "deregistered") -> Instance:
        inst = self.instances.pop(instance_id, None)
        if inst is None:
            raise NotFound(f"no instance '{instance_id}' is registered.")
        self._unindex(inst)
        self._emit([Change(instance_id, inst.reg, None, True, reason)])
        return inst

    def heartbeat(self, instance_id: str, now: float, *, load: float | None = None,
                  status: str | None = None) -> Instance:
        inst = self.instances.get(instance_id)
        if inst is None:
            raise NotFound(f"no instance '{instance_id}' is registered; register it again.")
        before = inst.status
        inst.last_heartbeat = now
        if inst.reg.ttl_s > 0:
            inst.expires_at = now + inst.reg.ttl_s
        inst.expired = False
        if load is not None:
            inst.load = load
            inst.routes_since_report = 0
        if status is not None:
            inst.admin_status = status
        inst.invalidate_view()
        self._schedule(inst)
        membership = inst.status != before
        self._emit([Change(instance_id, inst.reg, inst, membership, "status" if membership else "renewed")])
        return inst

    def set_check_result(self, instance_id: str, passing: bool, now: float) -> Instance | None:
        inst = self.instances.get(instance_id)
        if inst is None or inst.check_passing == passing:
            return inst
        before = inst.status
        inst.check_passing = passing
        if passing:
            inst.last_heartbeat = max(inst.last_heartbeat, now)
        inst.invalidate_view()
        self._schedule(inst)
        self._emit([Change(instance_id, inst.reg, inst, inst.status != before, "check")])
        return inst

    # -- leases ------------------------------------------------------------------------------------
    def _schedule(self, inst: Instance) -> None:
        deadline = self._deadline(inst)
        if deadline is not None:
            heapq.heappush(self._deadlines, (deadline, inst.id))

    @staticmethod
    def _deadline(inst: Instance) -> float | None:
        """When this instance next needs attention: its lease expiry, or its deletion once critical."""
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

    def expire(self, now: float) -> list[Change]:
        """Mark instances whose lease passed `critical`; delete those critical past `deregister_after`."""
        changes: list[Change] = []
        while self._deadlines and self._deadlines[0][0] <= now:
            when, iid = heapq.heappop(self._deadlines)
            inst = self.instances.get(iid)
            if inst is None or self._deadline(inst) != when:
                continue
            if inst.status != CRITICAL:
                inst.expired = True
                inst.invalidate_view()
                changes.append(Change(iid, inst.reg, inst, True, "expired"))
                self._schedule(inst)
            else:
                self.instances.pop(iid)
                self._unindex(inst)
                changes.append(Change(iid, inst.reg, None, True, "deleted"))
        self._emit(changes)
        return changes

    # -- reads -------------------------------------------------------------------------------------
    def get(self, instance_id: str) -> Instance:
        inst = self.instances.get(instance_id)
        if inst is None:
            raise NotFound(f"no instance '{instance_id}' is registered.")
        return inst

    def of_service(self, service: str | None = None) -> list[Instance]:
        if service is None:
            ids: Iterable[str] = self.instances.keys()
        else:
            ids = self.by_service.get(service, ())
        return [self.instances[i] for i in sorted(ids)]

    # -- internals ---------------------------------------------------------------------------------
    def _unindex(self, inst: Instance) -> None:
        self.catalogue.remove(inst.id, inst.reg.tags)
        ids = self.by_service.get(inst.reg.service)
        if ids is not None:
            ids.discard(inst.id)
            if not ids:
                del self.by_service[inst.reg.service]

    def _emit(self, changes: list[Change]) -> None:
        if changes and self.on_change is not None:
            self.on_change(changes)
