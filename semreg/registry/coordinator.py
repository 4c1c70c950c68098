"""The registry as a client sees it, over the shards: writes go to the shards that own the instance, reads
are gathered from the shards and merged, and every watchable read is a topic of this node's hub.

Where instances live is the placement's (`semreg.registry.placement`): a node alone has one local shard and a
merge is the identity; in a cluster an instance has `replicas` owners on the ring. A write is sent to
every owner and acknowledged once `min(2, replicas)` of them hold it durably; before a failed forward is
tried again the owners are looked up again (they may have moved). A read asks every member once; copies
of an instance keep the newest (revision, then state version). When a member does not answer and no
other owner covered its records, the answer says which members are missing (`partial`), never a silent
gap.

Watches are kept here, over merged results: shards report their changes as values
(`semreg.registry.registry.Change`, from other nodes through the cluster's followers), and a topic whose query a
change is relevant to is recomputed and wakes its waiters only if its merged result moved.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from semreg.clock import Clock
from semreg.errors import NotFound, SemregError, Unavailable
from semreg.knowledge.knowledge import Knowledge
from semreg.rdf.terms import Tag
from semreg.reasoning.matching import rank_key
from semreg.reasoning.reasoner import Hierarchy
from semreg.registry import discovery
from semreg.registry.catalogue import Match
from semreg.registry.discovery import newest
from semreg.registry.instances import UP, Registration
from semreg.registry.local_shard import LocalShard
from semreg.registry.placement import Placement
from semreg.registry.registry import REMOVALS, Change
from semreg.registry.selector import Selector
from semreg.registry.shard import ShardUnavailable, StaleRing
from semreg.registry.watch import Topic, WatchHub


@dataclass
class Gathered:
    """A list read from every member, and the members whose records it may lack."""

    items: Any
    missing: tuple[str, ...] = ()


class Coordinator:
    def __init__(self, knowledge: Knowledge, clock: Clock, placement: Placement) -> None:
        self.knowledge = knowledge
        self.hub = WatchHub(clock)
        self.placement = placement

    # -- changes -----------------------------------------------------------------------------------
    def changed(self, changes: list[Change]) -> None:
        self.hub.changed(changes, membership=any(c.membership for c in changes))

    def hierarchy_changed(self, hierarchy: Hierarchy, seconds: float) -> None:
        """A new closure: every discovery may answer differently."""
        self.hub.changed((), membership=True, everything=True)

    def everything_changed(self) -> None:
        """Members came or went, or changes may have been missed: every result is recomputed."""
        self.hub.changed((), membership=True, everything=True)

    # -- writes ------------------------------------------------------------------------------------
    async def register(self, regs: list[Registration], views: bool = True) -> list[tuple[Any, bool]]:
        """Every owner of each instance stores it; acknowledged once enough of them hold it durably. Each
        with whether it is new, and (with `views`) the instance as stored, else None."""
        if not regs:
            return []
        self.placement.check_writable()  # not while this node's membership lease is known to have lapsed
        ids = [r.id for r in regs]
        if len(set(ids)) != len(ids):
            from semreg.errors import BadRequest

            dup = next(i for i in ids if ids.count(i) > 1)
            raise BadRequest(f"the instance id '{dup}' appears more than once in the batch.", field="instances")
        revisions = {reg.id: self.placement.next_revision() for reg in regs}
        results: dict[str, tuple[Any, bool]] = {}
        acks: dict[str, set[str]] = {reg.id: set() for reg in regs}
        pending = list(regs)
        failed: set[str] = set()
        existed: set[str] = set()
        for _attempt in range(2):  # the second time with the owners looked up again, past those that failed
            groups: dict[tuple[str, ...], list[Registration]] = {}
            shards: dict[str, Any] = {}
            avoid = frozenset(failed)
            for reg in pending:
                owners = self.placement.owners(reg.id, avoid)
                for member, shard in owners:
                    shards[member] = shard
                groups.setdefault(tuple(m for m, _ in owners), []).append(reg)
            # the first owner answers with the stored instance (when the caller wants it back), the others
            # with whether they stored it: a view of 1,000 tags need not cross twice
            sends = [(member, group, views and n == 0) for members, group in groups.items()
                     for n, member in enumerate(members) if any(member not in acks[r.id] for r in group)]
            answers = await asyncio.gather(*(self._put(member, shards[member], [
                (r, revisions[r.id]) for r in group if member not in acks[r.id]], want)
                for member, group, want in sends), return_exceptions=True)
            for (member, _, _), answer in zip(sends, answers):
                if isinstance(answer, BaseException):
                    if not isinstance(answer, (ShardUnavailable, SemregError)):
                        raise answer
                    failed.add(member)
                    continue
                for reg, (inst, created) in answer:
                    acks[reg.id].add(member)
                    if not created:
                        existed.add(reg.id)
                    if inst is not None and (reg.id not in results or member == self._primary_of(reg.id)):
                        results[reg.id] = (inst, created)
            pending = [reg for reg in regs if len(acks[reg.id]) < self._needed(reg.id)]
            if not pending:
                break
        if pending:
            raise Unavailable(f"'{pending[0].id}' is held by {len(acks[pending[0].id])} of the "
                              f"{self._needed(pending[0].id)} owners a write needs; try again.", retry_after_s=1)
        if views:
            missing = [reg.id for reg in regs if reg.id not in results]
            for iid in missing:  # superseded meanwhile, or its first owner failed: what is there now
                results[iid] = (await self.get(iid), iid not in existed)
        # created only if no owner had it (a stand-in for a failed owner has nothing to replace)
        return [(results.get(reg.id, (None, True))[0], reg.id not in existed) for reg in regs]

    async def _put(self, member: str, shard: Any, items: list[tuple[Registration, int]], views: bool) -> list[Any]:
        try:
            stored = await shard.put_records(items, views)
        except ShardUnavailable:
            self.placement.failed(member)
            raise
        self.placement.answered(member)
        return [(reg, result) for (reg, _), result in zip(items, stored)]

    def _needed(self, instance_id: str) -> int:
        return self.placement.needed(instance_id)

    def _primary_of(self, instance_id: str) -> str:
        return self.placement.owners(instance_id)[0][0]

    async def deregister(self, instance_id: str) -> None:
        """A tombstone on every owner (stand-ins for the ones that fail), enough of them durably."""
        self.placement.check_writable()  # not while this node's membership lease is known to have lapsed
        await self.get(instance_id)  # 404 when no owner has it
        revision = self.placement.next_revision()
        done: set[str] = set()
        failed: set[str] = set()
        for _attempt in range(2):
            owners = [(m, shard) for m, shard in self.placement.owners(instance_id, frozenset(failed))
                      if m not in done]
            answers = await asyncio.gather(*(shard.delete_record(instance_id, revision) for _, shard in owners),
                                           return_exceptions=True)
            for (member, _), answer in zip(owners, answers):
                if isinstance(answer, ShardUnavailable):
                    self.placement.failed(member)
                    failed.add(member)
                elif isinstance(answer, StaleRing):  # its ring is newer than ours: not counted
                    failed.add(member)
                elif isinstance(answer, BaseException):
                    raise answer
                else:
                    done.add(member)
            if len(done) >= self._needed(instance_id):
                return
        raise Unavailable(f"the removal of '{instance_id}' reached {len(done)} of the {self._needed(instance_id)} "
                          f"owners it needs; try again.")

    async def heartbeat(self, instance_id: str, load: float | None, status: str | None) -> Any:
        """To the first owner that answers (the one running the lease, unless it is down)."""
        unreachable = []
        for member, shard in self.placement.owners(instance_id):
            try:
                inst = await shard.heartbeat(instance_id, load, status)
            except ShardUnavailable:
                self.placement.failed(member)
                unreachable.append(member)
                continue
            except NotFound:
                continue
            self.placement.answered(member)
            return inst
        if unreachable:
            raise Unavailable(f"no owner of '{instance_id}' answered; try again.", retry_after_s=1)
        raise NotFound(f"no instance '{instance_id}' is registered; register it again.")

    async def record_route(self, inst: Any) -> None:
        """Count a route against `inst` on its first owner; when that is another node, on the copy this
        node answered from too, so that this node's next routes see it before the next load report."""
        member, shard = self.placement.owners(inst.id)[0]
        try:
            await shard.record_route(inst.id)
        except ShardUnavailable:
            self.placement.failed(member)
        if not isinstance(shard, LocalShard):
            inst.routes_since_report += 1

    # -- reads -------------------------------------------------------------------------------------
    async def get(self, instance_id: str) -> Any:
        owners = self.placement.owners(instance_id)
        answers = await asyncio.gather(*(shard.get(instance_id) for _, shard in owners), return_exceptions=True)
        found, unreachable = None, []
        for (member, _), answer in zip(owners, answers):
            if isinstance(answer, ShardUnavailable):
                self.placement.failed(member)
                unreachable.append(member)
            elif isinstance(answer, NotFound):
                continue
            elif isinstance(answer, BaseException):
                raise answer
            else:
                found = answer if found is None else newest(found, answer)
        if found is not None:
            return found
        if unreachable and len(unreachable) == len(owners):
            raise Unavailable(f"no owner of '{instance_id}' answered; try again.", retry_after_s=1)
        raise NotFound(f"no instance '{instance_id}' is registered.")

    async def registered_by(self, instance_ids: list[str]) -> dict[str, tuple[str | None, str]]:
        """Of these instances, the ones registered, with the token each was registered by and its
        environment: one request per member, the newest copy deciding."""
        wanted = list(dict.fromkeys(instance_ids))
        answers, missing = await self.gather(lambda shard: shard.registered_by(wanted))
        if missing:
            raise Unavailable(f"members {', '.join(missing)} did not answer, and some of these instances may be "
                              f"theirs; try again.", retry_after_s=1)
        newest_seen: dict[str, tuple[int, str | None, str]] = {}
        for found in answers:
            for iid, seen in found.items():
                if iid not in newest_seen or newest_seen[iid][0] < seen[0]:
                    newest_seen[iid] = seen
        return {iid: (owner, environment) for iid, (_, owner, environment) in newest_seen.items()}

    async def exists(self, instance_id: str) -> bool:
        try:
            await self.get(instance_id)
        except NotFound:
            return False
        return True

    async def gather(self, call: Callable[[Any], Awaitable[Any]]) -> tuple[list[Any], tuple[str, ...]]:
        """`call(shard)` on every member at once: the answers, and the members whose records are missing."""
        readers = self.placement.readers()
        if len(readers) == 1 and isinstance(readers[0][1], LocalShard):
            return [await call(readers[0][1])], tuple(self.placement.missing(()))
        # the other members' requests go out first; this node's own part is computed meanwhile
        pending = {member: asyncio.ensure_future(call(shard)) for member, shard in readers
                   if not isinstance(shard, LocalShard)}
        answers: list[Any] = []
        for member, shard in readers:
            if member in pending:
                answers.append(pending[member])
                continue
            try:
                answers.append(await call(shard))
            except BaseException:
                for task in pending.values():
                    task.cancel()
                raise
        if pending:
            done = iter(await asyncio.gather(*pending.values(), return_exceptions=True))
            answers = [next(done) if isinstance(a, asyncio.Future) else a for a in answers]
        out, failed = [], []
        for (member, _), answer in zip(readers, answers):
            if isinstance(answer, ShardUnavailable):
                self.placement.failed(member)
                failed.append(member)
            elif isinstance(answer, BaseException):
                raise answer
            else:
                self.placement.answered(member)
                out.append(answer)
        return out, tuple(self.placement.missing(failed))

    async def discover(self, q: discovery.DiscoverQuery) -> Topic:
        """The topic of a discovery query: its merged result, signature, body and index."""

        async def compute() -> tuple[Any, discovery.DiscoverResult]:
            asked = q if len(self.placement.readers()) == 1 else discovery.shard_query(q)
            parts, missing = await self.gather(lambda shard: shard.resolve(asked))
            result = discovery.merge(q, parts, widened=asked is not q)
            result.missing = missing
            return (discovery.signature(result), missing), result

        def relevant(changes: Iterable[Change]) -> bool:
            result = self.hub.payload(q.key)
            matched = result.matched_tags if result is not None else frozenset()
            return discovery.relevant(self.knowledge.hierarchy, q, matched, changes)

        topic = await self.hub.topic(q.key, compute, relevant, discovery.body)
        if topic.payload.missing:
            self.hub.stale(q.key)  # ask again next time: a member that timed out may answer then
        return topic

    async def instances(self, service: str | None, tags: bool = True, selector: Selector = Selector()) -> Topic:
        async def compute() -> tuple[Any, Gathered]:
            lists, missing = await self.gather(lambda shard: shard.instances(service))
            # the newest copy of each, then the selector: an older copy may be in another environment
            insts = [i for i in _newest([i for found in lists for i in found]) if selector.admits(i.reg)]
            return (tuple(i.state for i in insts), missing), Gathered(insts, missing)

        def relevant(changes: Iterable[Change]) -> bool:
            return any((service is None or service in c.services) and selector.covers(c.environments)
                       for c in changes)

        def render(found: Gathered) -> bytes:
            return b"[" + b",".join(i.view_json(tags) for i in found.items) + b"]"

        key = ("instances", service, tags, selector)
        topic = await self.hub.topic(key, compute, relevant, render)
        if topic.payload.missing:
            self.hub.stale(key)
        return topic

    async def tags(self, selector: Selector = Selector()) -> Topic:
        async def compute() -> tuple[Any, Gathered]:
            holders: dict[Tag, set[str]] = {}
            found, missing = await self.gather(lambda shard: shard.tag_holders(selector))
            for one in found:
                for tag, ids in one.items():
                    holders.setdefault(tag, set()).update(ids)
            counts = sorted(((t, len(ids)) for t, ids in holders.items()), key=lambda x: x[0].text)
            return (tuple(counts), missing), Gathered(counts, missing)

        def relevant(changes: Iterable[Change]) -> bool:
            return any(c.reason in ("registered", "replaced", "moved", *REMOVALS) and selector.covers(c.environments)
                       for c in changes)

        def render(found: Gathered) -> bytes:
            body: dict[str, Any] = {"tags": [{**t.as_json(), "instances": n} for t, n in found.items]}
            if found.missing:
                body.update(partial=True, missing=list(found.missing))
            return orjson.dumps(body)

        key = ("tags", selector)
        topic = await self.hub.topic(key, compute, relevant, render)
        if topic.payload.missing:
            self.hub.stale(key)
        return topic

    async def holders(self, tags: list[Tag], with_tags: bool = True, selector: Selector = Selector()
                      ) -> tuple[dict[Tag, list[Any]], tuple[str, ...]]:
        """Each tag's `up` instances that the selector admits, exactly (no reasoning): the multi-tag lookup."""
        out: dict[Tag, list[Any]] = {tag: [] for tag in tags}
        found, missing = await self.gather(lambda shard: shard.holders(tags, with_tags))
        for one in found:
            for tag, insts in one.items():
                out[tag] += insts
        return {tag: [i for i in _newest(insts) if i.status == UP and selector.admits(i.reg)]
                for tag, insts in out.items()}, missing

    async def matching_tags(self, query: Tag, match: frozenset[str]) -> list[Match]:
        """Every registered tag that matches `query` (whoever carries it), ranked."""
        found: dict[Tag, Match] = {}
        answers, _ = await self.gather(lambda shard: shard.matching_tags(query, match))
        for one in answers:
            for m in one:
                found[m[0]] = m
        return sorted(found.values(), key=lambda m: rank_key(m[1], m[2], m[0]))

    async def is_registered_term(self, iri: str) -> bool:
        """Whether some registered tag names `iri` (a concept known only from registrations)."""
        answers, _ = await self.gather(lambda shard: shard.names_term(iri))
        return any(answers)


def _newest(instances: list[Any]) -> list[Any]:
    """One copy of each instance (the newest), by id."""
    found: dict[str, Any] = {}
    for inst in instances:
        known = found.get(inst.id)
        found[inst.id] = inst if known is None else newest(known, inst)
    return [found[i] for i in sorted(found)]
