"""A shard: what one partition of the registry does, behind one protocol.

`Shard` is the seam a node's coordinator talks to: register (create or replace), deregister,
heartbeat, read instances, resolve a discovery over its instances (`semreg.discovery.Part`), count and
look up tags, record a route, and report its changes (per-query watching is the coordinator's, over
those changes). `LocalShard` is a shard in this process: the
registry (instances, leases, catalogue), its durable records, the lease timer and the active health
checks. A shard on another node answers the same calls over HTTP.

Writes follow one order: validate (before the shard), make durable (the records, on the node's writer
thread, so records land in the order requests asked), then apply in memory and report the changes.
Revisions order the writes of one instance; a record carries its revision.
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from semreg import discovery
from semreg.catalogue import Match
from semreg.clock import Cancellable, Clock
from semreg.errors import BadRequest
from semreg.health import HealthChecker
from semreg.instances import Instance, Registration
from semreg.registry import Change, Registry
from semreg.store import Store
from semreg.terms import Tag

log = logging.getLogger("semreg.shard")

Write = Callable[..., Awaitable[Any]]  # runs a store operation on the node's writer thread, in order
Submit = Callable[..., None]  # the same, for a write nobody waits for
Listener = Callable[[list[Change]], None]


class Shard(Protocol):
    async def put(self, regs: list[Registration]) -> list[tuple[Instance, bool]]: ...

    async def delete(self, instance_id: str) -> None: ...

    async def heartbeat(self, instance_id: str, load: float | None, status: str | None) -> Instance: ...

    async def get(self, instance_id: str) -> Instance: ...

    async def instances(self, service: str | None) -> list[Instance]: ...

    async def resolve(self, q: discovery.DiscoverQuery) -> discovery.Part: ...

    async def holders(self, tags: list[Tag]) -> dict[Tag, list[Instance]]: ...

    async def matching_tags(self, query: Tag, match: frozenset[str]) -> list[Match]: ...

    async def tag_holders(self) -> dict[Tag, set[str]]: ...

    async def names_term(self, iri: str) -> bool: ...

    async def record_route(self, instance_id: str) -> None: ...

    def subscribe(self, listener: Listener) -> None: ...


class LocalShard:
    """The registry of this process behind the `Shard` protocol, with its records, leases and checks."""

    def __init__(self, clock: Clock, store: Store, write: Write, submit: Submit,
                 health: HealthChecker | None = None) -> None:
        """`health`: the checker to use (tests give one with a fake probe); its reports come here."""
        self.clock = clock
        self.store = store
        self._write = write
        self._submit = submit
        self.registry = Registry(clock, on_change=self._changed)
        self.health = health or HealthChecker(self._apply_check, clock)
        self.health.report = self._apply_check
        self._listeners: list[Listener] = []
        self._revision = 0
        self._expiry: Cancellable | None = None
        self._expiry_when = 0.0
        self._check_gen: dict[str, int] = {}

    # -- life cycle --------------------------------------------------------------------------------
    async def open(self, post: Callable[[Callable[[], None]], None]) -> int:
        """Restore the recorded instances (each with one fresh ttl) and start the checks and the lease
        timer. `post(fn)` runs `fn` on the node's event loop from another thread. Returns the count."""
        self.health.post = post
        records = await self._write(self.store.load_records)
        regs, revs, statuses, walls = [], [], [], []
        for rec, rev in records:
            try:
                regs.append(Registration.from_record(rec))
            except (KeyError, TypeError, ValueError):
                log.warning("ignored an unreadable instance record", extra={"record": str(rec)[:200]})
                continue
            revs.append(rev)
            status = rec.get("admin_status")
            statuses.append(status if status in ("blocked", "draining") else None)
            at = rec.get("registered_at")
            walls.append(float(at) if isinstance(at, (int, float)) else None)
        self.health.start()
        self.registry.put_many(regs, revs, admin_statuses=statuses, registered_at_wall=walls)
        self._revision = max(revs, default=0)
        self._arm_expiry()
        return len(regs)

    async def close(self) -> None:
        import asyncio

        if self._expiry is not None:
            self._expiry.cancel()
        await asyncio.to_thread(self.health.stop)

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def _changed(self, changes: list[Change]) -> None:
        for c in changes:
            if c.reason in ("registered", "replaced"):
                inst = self.registry.instances[c.id]
                if inst.reg.check or c.id in self._check_gen:
                    gen = self.health.set(c.id, inst.reg.check)
                    if inst.reg.check:
                        self._check_gen[c.id] = gen
                    else:
                        del self._check_gen[c.id]
            elif c.removed and self._check_gen.pop(c.id, None) is not None:
                self.health.set(c.id, None)
        for listener in self._listeners:
            listener(changes)

    # -- writes ------------------------------------------------------------------------------------
    async def put(self, regs: list[Registration]) -> list[tuple[Instance, bool]]:
        """Make registrations durable, then live. All or nothing: one store transaction."""
        ids = [r.id for r in regs]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise BadRequest(f"the instance id '{dup}' appears more than once in the batch.", field="instances")
        revisions, records = [], []
        wall = self.clock.wall()
        for reg in regs:
            self._revision += 1
            revisions.append(self._revision)
            old = self.registry.instances.get(reg.id)
            rec = reg.record()
            rec["registered_at"] = old.registered_at_wall if old is not None else wall
            if old is not None and old.admin_status != "up":
                rec["admin_status"] = old.admin_status
            records.append((rec, self._revision))
        await self._write(self.store.save_records, records)
        instances = self.registry.instances
        fresh = [(reg, rev) for reg, rev in zip(regs, revisions) if reg.id not in instances or instances[reg.id].revision < rev]
        out = self.registry.put_many([r for r, _ in fresh], [v for _, v in fresh])
        self._arm_expiry()
        return out

    async def delete(self, instance_id: str) -> None:
        self.registry.get(instance_id)
        await self._write(self.store.delete_record, instance_id)
        if instance_id in self.registry.instances:
            self.registry.delete(instance_id)

    async def heartbeat(self, instance_id: str, load: float | None, status: str | None) -> Instance:
        inst = self.registry.get(instance_id)
        revision = None
        if status is not None and status != inst.admin_status:
            self._revision += 1
            revision = self._revision
            rec = inst.reg.record()
            rec["registered_at"] = inst.registered_at_wall
            rec["admin_status"] = status
            await self._write(self.store.save_records, [(rec, revision)])
        inst = self.registry.heartbeat(instance_id, load=load, status=status, revision=revision)
        self._arm_expiry()
        return inst

    async def record_route(self, instance_id: str) -> None:
        self.registry.record_route(instance_id)

    # -- reads -------------------------------------------------------------------------------------
    async def get(self, instance_id: str) -> Instance:
        return self.registry.get(instance_id)

    async def instances(self, service: str | None) -> list[Instance]:
        return self.registry.of_service(service)

    async def resolve(self, q: discovery.DiscoverQuery) -> discovery.Part:
        return self.part(q)

    def part(self, q: discovery.DiscoverQuery) -> discovery.Part:
        return discovery.part(self.registry.catalogue, self.registry.instances, q)

    async def holders(self, tags: list[Tag]) -> dict[Tag, list[Instance]]:
        holders = self.registry.catalogue.holders
        instances = self.registry.instances
        return {tag: [instances[i] for i in sorted(holders.get(tag, ())) if i in instances] for tag in tags}

    async def matching_tags(self, query: Tag, match: frozenset[str]) -> list[Match]:
        return self.registry.catalogue.expand(query, match)

    async def tag_holders(self) -> dict[Tag, set[str]]:
        """Every tag of this shard with the ids of its instances (the live index: read, do not keep)."""
        return self.registry.catalogue.holders

    async def names_term(self, iri: str) -> bool:
        return any(iri in terms for terms in self.registry.catalogue.by_position)

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
        changes = self.registry.expire()
        for c in changes:
            if c.removed:
                self._submit(self.store.delete_record, c.id)
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
        self.registry.set_check_result(iid, passing)
        if was != passing:
            log.info("check " + ("passing" if passing else "failing"), extra={"instance": iid, "detail": detail})
            self._arm_expiry()
