"""One registry node: the domain (registry, reasoner, watches) wired to the store. No HTTP here.

Writes follow one order: validate, make durable (store, on one writer thread, so records land in the
order requests asked), then apply in memory and notify watchers. Reasoning runs on a worker thread so
the event loop keeps serving discovery while an ontology is being reasoned over.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson

from semreg import discovery
from semreg.config import Settings
from semreg.errors import BadRequest, NotFound
from semreg.fastpath import KnownQueries
from semreg.health import HealthChecker
from semreg.instances import Instance, Registration
from semreg.ontologies import Ontologies
from semreg.reasoner import Hierarchy
from semreg.registry import Change, Registry
from semreg.replica_feed import ReplicaFeed
from semreg.schemas import InstanceBody, validate
from semreg.sparql_pool import QueryPool
from semreg.store import Store
from semreg.terms import ANY, PrefixMap, Tag, check_iri, parse_tags, validate_prefix_name
from semreg.watch import Topic, WatchHub

log = logging.getLogger("semreg.node")


def settle_heap() -> None:
    """Move what the registry holds out of the collector's way.

    The registry keeps hundreds of thousands of long-lived objects (hierarchy, views, indexes); a full
    collection walks all of them and stalls every request for tens of milliseconds. After start-up
    and after large changes, collect once and freeze the survivors so later collections skip them.
    """
    gc.collect()
    gc.freeze()


class Node:
    def __init__(self, settings: Settings, clock: Callable[[], float] = time.time, store: Store | None = None) -> None:
        self.settings = settings
        self.clock = clock
        self.store: Store | None = store
        self.replica = ReplicaFeed()
        self.prefixes = PrefixMap()
        self.ontologies: Ontologies  # set by open(), which needs the store
        self.hierarchy = Hierarchy()
        self.registry = Registry(on_change=self._on_change)
        self.hub = WatchHub()
        self.known_queries = KnownQueries()
        self.ready = False
        self.started_at = clock()
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="semreg-store")
        self._revision = 0
        self._expiry_handle: asyncio.TimerHandle | None = None
        self._expiry_when = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self.closure_ms = 0.0
        self.closure_rebuilds = 0
        self.on_closure: Callable[[float], None] | None = None
        self.on_close: list[Callable[[], None]] = []
        self.on_stopping: list[Callable[[], None]] = []  # when asked to stop, before requests drain
        self.query_pool: QueryPool | None = None
        self.health = HealthChecker(report=self._check_reported)
        self._check_gen: dict[str, int] = {}

    # -- life cycle --------------------------------------------------------------------------------
    async def open(self) -> None:
        """Open the store, restore ontologies, closure and instances, then preload --ontology files."""
        self._loop = asyncio.get_running_loop()
        started = time.perf_counter()
        if self.store is None:
            self.store = await self._write(Store, self.settings.data_dir)
        self.replica.foreign = self.store.foreign_quads
        dropped = await self._write(self.store.drop_derived_graphs)
        if dropped:
            log.info("dropped derived graphs an earlier version kept on disk", extra={"graphs": dropped})
        for prefix, iri in self.store.load_prefixes().items():
            self.prefixes.set(prefix, iri)
        self.ontologies = Ontologies(self.store, self.replica, self._write, self._apply_hierarchy)
        await self.ontologies.restore()
        records = await self._write(self.store.load_records)
        now = self.clock()
        regs, revs = [], []
        for rec, rev in records:
            try:
                regs.append(Registration.from_record(rec))
                revs.append(rev)
            except (KeyError, TypeError, ValueError):
                log.warning("ignored an unreadable instance record", extra={"record": str(rec)[:200]})
        self.replica.start()
        self.health.start()
        # restored instances get one fresh ttl before they can expire
        self.registry.put_many(regs, now, revisions=revs)
        for reg, rec in zip(regs, (r for r, _ in records)):
            status = rec.get("admin_status")
            if status in ("blocked", "draining"):
                self.registry.instances[reg.id].admin_status = status
        self._revision = max(revs, default=0)
        for path in self.settings.ontologies:
            await self.ontologies.load_file(path)
        self.ready = True
        self._arm_expiry()
        settle_heap()
        log.info("node ready", extra={"instances": len(regs), "ontologies": len(self.ontologies),
                                      "concepts": self.hierarchy.size, "data_dir": str(self.settings.data_dir or ":memory:"),
                                      "ms": round((time.perf_counter() - started) * 1000)})

    async def close(self) -> None:
        if self._expiry_handle:
            self._expiry_handle.cancel()
        await asyncio.to_thread(self.health.stop)
        for fn in self.on_close:
            fn()
        if self.query_pool is not None:
            await self.query_pool.close()
        await asyncio.to_thread(self.replica.stop)
        if self.store is not None:
            await self._write(self.store.flush)
        self._writer.shutdown(wait=True)

    async def _write(self, fn: Callable, *args: Any) -> Any:
        """Run a store operation on the single writer thread, in submission order."""
        return await asyncio.get_running_loop().run_in_executor(self._writer, fn, *args)

    def stopping(self) -> None:
        """The server was asked to stop: answer what would hold the drain up (watches, queries) now."""
        self.hub.release_all()
        for fn in self.on_stopping:
            fn()

    def _apply_hierarchy(self, hierarchy: Hierarchy, prefixes: dict[str, str], ms: float) -> None:
        """Install a new closure's index: discovery uses it from the next request on."""
        self.prefixes.set_ontology_prefixes(prefixes)
        self.hierarchy = hierarchy
        self.registry.catalogue.set_hierarchy(hierarchy)
        self.closure_ms = ms
        self.closure_rebuilds += 1
        if self.on_closure is not None:
            self.on_closure(ms / 1000)
        self.hub.changed((), membership=True, everything=True)
        settle_heap()

    # -- prefixes ----------------------------------------------------------------------------------
    async def put_prefix(self, prefix: str, iri: str) -> bool:
        validate_prefix_name(prefix)
        check_iri(iri)
        assert self.store is not None
        created = prefix not in self.prefixes.explicit
        await self._write(self.store.set_prefix, prefix, iri)
        self.prefixes.set(prefix, iri)
        return created

    async def delete_prefix(self, prefix: str) -> None:
        assert self.store is not None
        if prefix not in self.prefixes.explicit:
            raise NotFound(f"no client-set prefix '{prefix}' (prefixes declared in ontologies go with them).")
        await self._write(self.store.delete_prefix, prefix)
        self.prefixes.delete(prefix)

    # -- instances ---------------------------------------------------------------------------------
    def registration(self, data: Any, instance_id: str | None, owner: str | None, where: str = "") -> Registration:
        """Validate one registration body into a `Registration` (400 naming the field otherwise)."""
        body = validate(InstanceBody, data, where)
        iid = instance_id or body.id
        if instance_id is not None and body.id is not None and body.id != instance_id:
            raise BadRequest(f"{where + '.' if where else ''}id '{body.id}' differs from the id in the path "
                             f"'{instance_id}'.", field="id")
        if iid is None:
            raise BadRequest(f"{where + '.' if where else ''}id is required.", field="id")
        if len(body.tags) > self.settings.max_tags_per_instance:
            raise BadRequest(f"{where + '.' if where else ''}tags: {len(body.tags)} tags is more than the "
                             f"{self.settings.max_tags_per_instance} an instance may have.", field="tags")
        try:
            tags = parse_tags(body.tags, self.prefixes)
        except BadRequest as exc:
            if where:
                exc.message = f"{where}.{exc.message}"
            raise
        return Registration(id=iid, service=body.service, address=body.address, port=body.port,
                            scheme=body.scheme, tags=tuple(tags), weight=body.weight, capacity=body.capacity,
                            ttl_s=float(body.ttl), deregister_after_s=float(body.deregister_after),
                            check=body.check.model_dump(exclude_none=True) if body.check else None,
                            meta=dict(body.meta), owner=owner)

    def new_id(self) -> str:
        import uuid

        return uuid.uuid4().hex

    async def register(self, regs: list[Registration]) -> list[tuple[Instance, bool]]:
        """Make registrations durable, then live. All or nothing: one store transaction."""
        assert self.store is not None
        ids = [r.id for r in regs]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise BadRequest(f"the instance id '{dup}' appears more than once in the batch.", field="instances")
        revisions = []
        records = []
        for reg in regs:
            self._revision += 1
            revisions.append(self._revision)
            old = self.registry.instances.get(reg.id)
            rec = reg.record()
            if old is not None and old.admin_status != "up":
                rec["admin_status"] = old.admin_status
            records.append((rec, self._revision))
        await self._write(self.store.save_records, records)
        fresh = [(reg, rev) for reg, rev in zip(regs, revisions)
                 if reg.id not in self.registry.instances or self.registry.instances[reg.id].revision < rev]
        out = self.registry.put_many([r for r, _ in fresh], self.clock(), revisions=[v for _, v in fresh])
        self._arm_expiry()
        if len(regs) >= 1000:
            settle_heap()
        return out

    async def deregister(self, instance_id: str) -> None:
        assert self.store is not None
        self.registry.get(instance_id)
        await self._write(self.store.delete_record, instance_id)
        if instance_id in self.registry.instances:
            self.registry.delete(instance_id)

    async def heartbeat(self, instance_id: str, load: float | None, status: str | None) -> Instance:
        inst = self.registry.get(instance_id)
        if status is not None and status != inst.admin_status:
            assert self.store is not None
            self._revision += 1
            rec = inst.reg.record()
            rec["admin_status"] = status
            await self._write(self.store.save_records, [(rec, self._revision)])
            inst = self.registry.get(instance_id)
            inst.revision = self._revision
        inst = self.registry.heartbeat(instance_id, self.clock(), load=load, status=status)
        self._arm_expiry()
        return inst

    # -- leases ------------------------------------------------------------------------------------
    def _arm_expiry(self) -> None:
        """One timer, at the earliest lease deadline, so an expired instance leaves discovery at once."""
        if self._loop is None:
            return
        deadline = self.registry.next_deadline()
        if self._expiry_handle is not None:
            if deadline is not None and abs(self._expiry_when - deadline) < 1e-6:
                return
            self._expiry_handle.cancel()
            self._expiry_handle = None
        if deadline is None:
            return
        delay = max(0.0, deadline - self.clock())
        self._expiry_when = deadline
        self._expiry_handle = self._loop.call_later(delay, self._on_expiry_timer)

    def _on_expiry_timer(self) -> None:
        self._expiry_handle = None
        changes = self.registry.expire(self.clock())
        deleted = [c.id for c in changes if c.after is None]
        if deleted and self.store is not None:
            for iid in deleted:
                self._writer.submit(self.store.delete_record, iid)
        for c in changes:
            log.info("instance " + c.reason, extra={"instance": c.id})
        self._arm_expiry()

    # -- health checks ---------------------------------------------------------------------------
    def _check_reported(self, iid: str, gen: int, passing: bool, detail: str) -> None:
        """From the checker's thread: hand the result to this node's loop."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._apply_check, iid, gen, passing, detail)

    def _apply_check(self, iid: str, gen: int, passing: bool, detail: str) -> None:
        if self._check_gen.get(iid) != gen:
            return  # a result for a check that was replaced or removed meanwhile
        inst = self.registry.instances.get(iid)
        if inst is None:
            return
        was = inst.check_passing
        self.registry.set_check_result(iid, passing, self.clock())
        if was != passing:
            log.info("check " + ("passing" if passing else "failing"), extra={"instance": iid, "detail": detail})
            self._arm_expiry()

    # -- change fan-out ----------------------------------------------------------------------------
    def _on_change(self, changes: list[Change]) -> None:
        m = self.replica
        membership = False
        for c in changes:
            if c.reason in ("registered", "replaced") and c.after is not None:
                if c.after.reg.check or c.id in self._check_gen:
                    self._check_gen[c.id] = self.health.set(c.id, c.after.reg.check)
                    if not c.after.reg.check:
                        del self._check_gen[c.id]
            if c.after is None:
                if self._check_gen.pop(c.id, None) is not None:
                    self.health.set(c.id, None)
                m.remove_instance(c.id)
            elif c.membership:
                m.put_instance(c.after.view())
            if c.membership:
                membership = True
        self.hub.changed(changes, membership=membership)

    # -- reads -------------------------------------------------------------------------------------
    def discover_topic(self, q: discovery.DiscoverQuery) -> Topic:
        reg = self.registry

        def compute():
            result = discovery.resolve(reg, q)
            return discovery.signature(result), result

        def relevant(changes):
            t = self.hub._topics.get(q.key)
            matched = t.payload.matched_tags if t is not None and t.payload is not None else frozenset()
            return discovery.relevant(reg, q, matched, changes)

        return self.hub.topic(q.key, compute, relevant, discovery.body)

    def instances_topic(self, service: str | None) -> Topic:
        reg = self.registry

        def compute():
            insts = reg.of_service(service)
            return tuple((i.id, i.revision, i.status) for i in insts), insts

        def relevant(changes: Iterable[Change]):
            return service is None or any(
                (c.after is not None and c.after.reg.service == service) or
                (c.before is not None and c.before.service == service) for c in changes)

        def render(instances):
            return b"[" + b",".join(i.view_json() for i in instances) + b"]"

        return self.hub.topic(("instances", service), compute, relevant, render)

    def tags_topic(self) -> Topic:
        cat = self.registry.catalogue

        def compute():
            counts = cat.tag_counts()
            return tuple(counts), counts

        def relevant(changes: Iterable[Change]):
            return any(c.reason in ("registered", "replaced", "deregistered", "deleted") for c in changes)

        def render(counts):
            return orjson.dumps({"tags": [{**t.as_json(), "instances": n} for t, n in counts]})

        return self.hub.topic(("tags",), compute, relevant, render)

    def discover_tags(self, raw_tags: list[Any]) -> dict[str, list[dict[str, Any]]]:
        tags = parse_tags(raw_tags, self.prefixes)
        out: dict[str, list[dict[str, Any]]] = {}
        holders = self.registry.catalogue.holders
        for tag in tags:
            views = []
            for iid in sorted(holders.get(tag, ())):
                inst = self.registry.instances.get(iid)
                if inst is not None and inst.status == "up":
                    views.append(inst.view())
            out[tag.text] = views
        return out

    def expand(self, query: Tag, match: frozenset[str]) -> dict[str, Any]:
        from semreg.matching import BROADER, EXACT, NARROWER, needs_directions

        want_narrower, want_broader = needs_directions(match)
        h = self.hierarchy
        components: dict[str, list[dict[str, Any]]] = {}
        for name, q in zip("spo", query):
            if q == ANY:
                components[name] = [{"iri": ANY, "degree": EXACT, "distance": 0, "wildcard": True}]
                continue
            rows = [{"iri": t, "degree": EXACT, "distance": 0} for t in sorted(h.equivalents(q) | {q})]
            if want_narrower:
                rows += [{"iri": t, "degree": NARROWER, "distance": d}
                         for t, d in sorted(h.narrower_distances(q).items(), key=lambda x: (x[1], x[0]))]
            if want_broader:
                rows += [{"iri": t, "degree": BROADER, "distance": d}
                         for t, d in sorted(h.broader_distances(q).items(), key=lambda x: (x[1], x[0]))]
                rows.append({"iri": ANY, "degree": BROADER, "distance": 0, "wildcard": True})
            components[name] = rows
        matched = self.registry.catalogue.expand(query, match)
        return {"query": query.as_json(), "match": sorted(match, key=list(("exact", "narrower", "broader",
                                                                            "overlap")).index),
                "components": components,
                "tags": [{"tag": t.as_json(), "degree": d, "distance": n} for t, d, n in matched]}

    def concept(self, iri: str) -> dict[str, Any]:
        h = self.hierarchy
        known = iri in h.kinds or h.canon(iri) in h.up or any(iri in pos for pos in self.registry.catalogue.by_position)
        if not known:
            raise NotFound(f"'{iri}' is not a concept of any uploaded ontology nor a term of any registered tag.")
        parents = sorted(h.asserted_parents.get(iri, ()))
        children = sorted(c for c, ps in h.asserted_parents.items() if iri in ps)
        return {"iri": iri, "kind": h.kind(iri), "label": h.labels.get(iri),
                "equivalents": sorted(h.equivalents(iri) - {iri}), "parents": parents, "children": children,
                "ancestors": sorted(h.ancestors(iri)), "descendants": sorted(h.descendants(iri))}

