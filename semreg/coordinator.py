"""The registry as a client sees it, over the shards: writes go to the shard that owns the instance, reads
are gathered from the shards and merged, and every watchable read is a topic of this node's hub.

With one local shard (a node alone) a merge is the identity and a read costs what it always did; the
seam is what lets shards live on other nodes. Watches are kept here, over the merged results: a shard
reports its changes as values (`semreg.registry.Change`), and a topic whose query a change is relevant to
is recomputed and wakes its waiters only if its merged result moved.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from semreg import discovery
from semreg.catalogue import Match
from semreg.clock import Clock
from semreg.errors import NotFound
from semreg.instances import UP, Instance, Registration
from semreg.knowledge import Knowledge
from semreg.matching import rank_key
from semreg.reasoner import Hierarchy
from semreg.registry import REMOVALS, Change
from semreg.shard import Shard
from semreg.terms import Tag
from semreg.watch import Topic, WatchHub


class Coordinator:
    def __init__(self, knowledge: Knowledge, clock: Clock, shards: list[Shard]) -> None:
        self.knowledge = knowledge
        self.hub = WatchHub(clock)
        self.shards = shards
        for shard in shards:
            shard.subscribe(self.changed)

    def owner(self, instance_id: str) -> Shard:
        """The shard an instance belongs to (a node alone has one)."""
        return self.shards[0]

    # -- changes -----------------------------------------------------------------------------------
    def changed(self, changes: list[Change]) -> None:
        self.hub.changed(changes, membership=any(c.membership for c in changes))

    def hierarchy_changed(self, hierarchy: Hierarchy, seconds: float) -> None:
        """A new closure: every discovery may answer differently."""
        self.hub.changed((), membership=True, everything=True)

    # -- writes ------------------------------------------------------------------------------------
    async def register(self, regs: list[Registration]) -> list[tuple[Instance, bool]]:
        """All or nothing (one transaction on the owning shard)."""
        return await self.owner(regs[0].id).put(regs) if regs else []

    async def deregister(self, instance_id: str) -> None:
        await self.owner(instance_id).delete(instance_id)

    async def heartbeat(self, instance_id: str, load: float | None, status: str | None) -> Instance:
        return await self.owner(instance_id).heartbeat(instance_id, load, status)

    async def record_route(self, instance_id: str) -> None:
        await self.owner(instance_id).record_route(instance_id)

    # -- reads -------------------------------------------------------------------------------------
    async def get(self, instance_id: str) -> Instance:
        return await self.owner(instance_id).get(instance_id)

    async def exists(self, instance_id: str) -> bool:
        try:
            await self.get(instance_id)
        except NotFound:
            return False
        return True

    async def discover(self, q: discovery.DiscoverQuery) -> Topic:
        """The topic of a discovery query: its merged result, signature, body and index."""
        shards = self.shards

        async def compute() -> tuple[Any, discovery.DiscoverResult]:
            parts = [await shard.resolve(q) for shard in shards]
            result = discovery.merge(q, parts)
            return discovery.signature(result), result

        def relevant(changes: Iterable[Change]) -> bool:
            result = self.hub.payload(q.key)
            matched = result.matched_tags if result is not None else frozenset()
            return discovery.relevant(self.knowledge.hierarchy, q, matched, changes)

        return await self.hub.topic(q.key, compute, relevant, discovery.body)

    async def instances(self, service: str | None, tags: bool = True) -> Topic:
        shards = self.shards

        async def compute() -> tuple[Any, list[Instance]]:
            insts = _newest([i for shard in shards for i in await shard.instances(service)])
            return tuple((i.id, i.revision, i.status) for i in insts), insts

        def relevant(changes: Iterable[Change]) -> bool:
            return service is None or any(service in c.services for c in changes)

        def render(instances: list[Instance]) -> bytes:
            return b"[" + b",".join(i.view_json(tags) for i in instances) + b"]"

        return await self.hub.topic(("instances", service, tags), compute, relevant, render)

    async def tags(self) -> Topic:
        shards = self.shards

        async def compute() -> tuple[Any, list[tuple[Tag, int]]]:
            holders: dict[Tag, set[str]] = {}
            for shard in shards:
                for tag, ids in (await shard.tag_holders()).items():
                    holders.setdefault(tag, set()).update(ids)
            counts = sorted(((t, len(ids)) for t, ids in holders.items()), key=lambda x: x[0].text)
            return tuple(counts), counts

        def relevant(changes: Iterable[Change]) -> bool:
            return any(c.reason in ("registered", "replaced", *REMOVALS) for c in changes)

        def render(counts: list[tuple[Tag, int]]) -> bytes:
            return orjson.dumps({"tags": [{**t.as_json(), "instances": n} for t, n in counts]})

        return await self.hub.topic(("tags",), compute, relevant, render)

    async def holders(self, tags: list[Tag]) -> dict[Tag, list[Instance]]:
        """Each tag's `up` instances, exactly (no reasoning): the multi-tag lookup."""
        out: dict[Tag, list[Instance]] = {tag: [] for tag in tags}
        for shard in self.shards:
            for tag, insts in (await shard.holders(tags)).items():
                out[tag] += insts
        return {tag: [i for i in _newest(insts) if i.status == UP] for tag, insts in out.items()}

    async def matching_tags(self, query: Tag, match: frozenset[str]) -> list[Match]:
        """Every registered tag that matches `query` (whoever carries it), ranked."""
        found: dict[Tag, Match] = {}
        for shard in self.shards:
            for m in await shard.matching_tags(query, match):
                found[m[0]] = m
        return sorted(found.values(), key=lambda m: rank_key(m[1], m[2], m[0]))

    async def is_registered_term(self, iri: str) -> bool:
        """Whether some registered tag names `iri` (a concept known only from registrations)."""
        for shard in self.shards:
            if await shard.names_term(iri):
                return True
        return False


def _newest(instances: list[Instance]) -> list[Instance]:
    """One copy of each instance (the newest revision), by id."""
    newest: dict[str, Instance] = {}
    for inst in instances:
        known = newest.get(inst.id)
        if known is None or known.revision < inst.revision:
            newest[inst.id] = inst
    return [newest[i] for i in sorted(newest)]
