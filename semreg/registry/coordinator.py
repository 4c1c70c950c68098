"""The registry as a client sees it, over the shards: writes go to the shards that own the instance, reads
are gathered from the shards and merged, and every watchable read is a topic of this node's hub.

Where instances live is the placement's (`semreg.registry.placement`): a node alone has one local shard and a
merge is the identity; in a cluster an instance has `replicas` owners on the ring. A write is sent to
every owner and acknowledged as soon as `min(2, replicas)` of them hold it durably, without waiting for
the others (`semreg.registry.writes` over `semreg.registry.quorum`): their sends finish in the background,
and an owner that missed one gets it from a hint when it answers again, or else from anti-entropy; before
a failed forward is tried again the owners are looked up again (they may have moved). A heartbeat goes to one
owner, the one running the lease; an admin status it carries (or one set alone) is decided there and, when it
changes, acknowledged as a write is, once enough owners hold it (`semreg.registry.writes`). A read asks every
member once; copies of an instance keep the newest (revision, then state version). When a member does
not answer and no other owner covered its records, the answer says which members are missing
(`partial`), never a silent gap.

Watches are kept here, over merged results: shards report their changes as values
(`semreg.registry.registry.Change`, from other nodes through the cluster's followers), and a topic whose query a
change is relevant to is recomputed and wakes its waiters only if its merged result moved.
"""
from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from semreg.clock import Clock
from semreg.errors import NotFound, Unavailable
from semreg.knowledge.knowledge import Knowledge
from semreg.rdf.terms import Tag
from semreg.reasoning.matching import rank_key
from semreg.reasoning.reasoner import Hierarchy
from semreg.registry import discovery, questions, quorum, writes
from semreg.registry.catalogue import Match
from semreg.registry.feed import ChangeFeed
from semreg.registry.indexes import scope_of
from semreg.registry.instances import UP, Registration
from semreg.registry.merged import newest_copies, newest_holders, removals_of
from semreg.registry.placement import Placement
from semreg.registry.registry import REMOVALS, Change
from semreg.registry.selector import Selector
from semreg.registry.shard import Shard, ShardUnavailable
from semreg.registry.tag_union import TagUnion
from semreg.registry.watch import Topic, WatchHub
from semreg.work.lane import Lane, paced, sort

T = TypeVar("T")

@dataclass
class Gathered:
    """A list read from every member, and the members whose records it may lack."""

    items: Any
    missing: tuple[str, ...] = ()


class Coordinator:
    def __init__(self, knowledge: Knowledge, clock: Clock, placement: Placement, lane: Lane | None = None) -> None:
        self.knowledge = knowledge
        self.lane = lane or Lane()
        self.hub = WatchHub(clock, lane=self.lane)
        self.feed = ChangeFeed(clock)  # the same changes, numbered, for views of a few of many instances
        self.tag_union = TagUnion()  # the members' distinct tags, for the overview's counts in a ring
        self.placement = placement
        self.stragglers = quorum.Stragglers()

    # -- changes -----------------------------------------------------------------------------------
    def changed(self, changes: list[Change]) -> None:
        environments = frozenset().union(*(c.environments for c in changes))
        self.hub.changed(changes, membership=any(c.membership for c in changes), environments=environments)
        self.feed.append(changes)

    def hierarchy_changed(self, hierarchy: Hierarchy, seconds: float) -> None:
        """A new closure: every discovery may answer differently."""
        self.hub.changed((), membership=True, everything=True)

    def everything_changed(self) -> None:
        """Members came or went, or changes may have been missed: every result is recomputed."""
        self.hub.changed((), membership=True, everything=True)
        self.feed.reset()

    # -- writes ------------------------------------------------------------------------------------
    async def register(self, regs: list[Registration], views: bool = True) -> list[tuple[Any, bool]]:
        """Every owner of each instance stores it; acknowledged once enough of them hold it durably. Each
        with whether it is new, and (with `views`) the instance as stored, else None."""
        return await writes.register(self.placement, self.stragglers, regs, views)

    async def deregister(self, instance_id: str) -> None:
        """A tombstone on every owner (stand-ins for the ones that fail), enough of them durably."""
        await writes.deregister(self.placement, self.stragglers, instance_id)

    async def close(self) -> None:
        """Call off the sends of acknowledged writes still on their way (their members get hints)."""
        await self.stragglers.close()

    async def heartbeat(self, instance_id: str, load: float | None, status: str | None) -> Any:
        """To the first owner that answers (the one running the lease, unless it is down): a renewal alone goes
        nowhere else. A status is dated here, now, as a registration is: an owner that carries it out late (it hung,
        the request went on to the next owner, and it woke after the instance was removed) writes it down older
        than the removal. A status that changes is acknowledged once enough owners hold it (`writes.admin_status`)."""
        if status is None:
            return (await writes.first_owner(self.placement, instance_id,
                                             lambda shard: shard.heartbeat(instance_id, load, None)))[2]
        revision = self.placement.next_revision()
        return await writes.admin_status(self.placement, self.stragglers, instance_id, revision,
                                         lambda shard: shard.heartbeat(instance_id, load, status, revision))

    async def set_status(self, instance_id: str, status: str, replaces: Collection[str] | None = None) -> Any:
        """An admin status without renewing the lease (maintenance), in place of one of `replaces` when given;
        dated here and acknowledged as a heartbeat's."""
        revision = self.placement.next_revision()
        return await writes.admin_status(self.placement, self.stragglers, instance_id, revision,
                                         lambda shard: shard.set_status(instance_id, status, replaces, revision))

    async def record_route(self, inst: Any) -> None:
        """Count a route against `inst` on its first owner; when that is another node, on the copy this
        node answered from too, so that this node's next routes see it before the next load report."""
        member, shard = self.placement.owners(inst.id)[0]
        try:
            await shard.record_route(inst.id)
        except ShardUnavailable:
            self.placement.failed(member)
        if member != self.placement.here:
            inst.routes_since_report += 1

    # -- reads -------------------------------------------------------------------------------------
    async def get(self, instance_id: str) -> Any:
        """The newest copy of an instance its owners hold (`quorum.newest_copy`)."""
        return await quorum.newest_copy(self.placement, instance_id)

    async def registered_by(self, instance_ids: list[str]) -> dict[str, tuple[str | None, str]]:
        """Of these instances, the ones registered, with the token each was registered by and its
        environment, as their owners say: the newest copy decides, and a removal newer than every copy
        leaves the instance out. One request per owner (past the members known not to answer, as a write is
        sent; this node's own part answered in process). An id some owner did not answer for is asked once
        more: of the members standing in for it, and of its owners passed over while none of them answered
        (`Placement.accountable`). `Unavailable` when none of an id's owners answered."""
        wanted = list(dict.fromkeys(instance_ids))
        accountable = {iid: self.placement.accountable(iid) for iid in wanted}
        asked: dict[str, set[str]] = {iid: set() for iid in wanted}
        answered: dict[str, set[str]] = {iid: set() for iid in wanted}
        failed: set[str] = set()
        newest_seen: dict[str, tuple[int, str | None, str]] = {}

        def whole(iid: str) -> bool:
            return any(member in answered[iid] for member, _ in accountable[iid])

        targets: dict[str, list[tuple[str, Shard | None]]] = {iid: [*self.placement.owners(iid)] for iid in wanted}
        for _ in range(quorum.ROUNDS):
            groups: dict[str, tuple[Shard, list[str]]] = {}
            for iid, members in targets.items():
                for member, shard in members:
                    if shard is not None and member not in asked[iid] and member not in failed:
                        asked[iid].add(member)
                        groups.setdefault(member, (shard, []))[1].append(iid)
            answers = await self._each({m: functools.partial(shard.registered_by, ids) for m, (shard, ids) in groups.items()})
            for member, answer in answers.items():
                if isinstance(answer, ShardUnavailable):
                    failed.add(member)
                    continue
                for iid in groups[member][1]:
                    answered[iid].add(member)
                for iid, seen in answer.items():  # a removal as its negated revision: the newest copy decides
                    if iid not in newest_seen or abs(newest_seen[iid][0]) < abs(seen[0]):
                        newest_seen[iid] = seen
            targets = {iid: [*self.placement.owners(iid, frozenset(failed)), *accountable[iid]] for iid in wanted
                       if asked[iid] & failed or not whole(iid)}
        unanswered = [iid for iid in wanted if not whole(iid)]
        if unanswered:
            raise Unavailable(f"no owner of '{unanswered[0]}' answered, and it may be registered by another token; "
                              f"try again.", retry_after_s=1)
        return {iid: (owner, environment) for iid, (rev, owner, environment) in newest_seen.items() if rev > 0}

    async def exists(self, instance_id: str) -> bool:
        """Whether an instance is registered, for a write's check: as enough of its owners say."""
        try:
            await quorum.lookup(self.placement, instance_id)
        except NotFound:
            return False
        return True

    async def gather(self, call: Callable[[Shard], Awaitable[T]]) -> tuple[list[T], tuple[str, ...]]:
        """`call(shard)` on every member at once: the answers, and the members whose records are missing."""
        readers = self.placement.readers()
        if len(readers) == 1 and readers[0][0] == self.placement.here:
            return [await call(readers[0][1])], tuple(self.placement.missing(()))
        answers = await self._each({member: functools.partial(call, shard) for member, shard in readers})
        out: list[T] = []
        failed = []
        for member, answer in answers.items():
            if isinstance(answer, ShardUnavailable):
                failed.append(member)
            else:
                out.append(answer)
        return out, tuple(self.placement.missing(failed))

    async def ask_each(self, call: Callable[[Shard], Awaitable[T]]) -> dict[str, T | ShardUnavailable]:
        """`call(shard)` on every member, suspects too (what each answers for, no other member covers), at once:
        each one's answer, or `ShardUnavailable`."""
        return await self.ask_members(lambda _, shard: call(shard))

    async def ask_members(self, call: Callable[[str, Shard], Awaitable[T]], only: Collection[str] | None = None
                          ) -> dict[str, T | ShardUnavailable]:
        """`call(member, shard)` on every member (or those in `only`), at once, as `ask_each`."""
        return await self._each({member: functools.partial(call, member, shard)
                                 for member, shard in self.placement.members() if only is None or member in only})

    async def _each(self, calls: dict[str, Callable[[], Awaitable[T]]]) -> dict[str, T | ShardUnavailable]:
        """Each member's call at once, the other members' requests sent first and this node's own part
        computed meanwhile: each member's answer, or `ShardUnavailable` when it did not answer (told to the
        placement, as an answer is). Any other error is raised."""
        here = self.placement.here
        pending = {member: asyncio.ensure_future(call()) for member, call in calls.items() if member != here}
        results: dict[str, T | BaseException] = {}
        if here in calls:
            try:
                if pending:
                    await asyncio.sleep(0)  # the requests start (on the wire) before this node's part runs
                results[here] = await calls[here]()
            except BaseException:
                for task in pending.values():
                    task.cancel()
                raise
        if pending:
            results.update(zip(pending, await asyncio.gather(*pending.values(), return_exceptions=True)))
        out: dict[str, T | ShardUnavailable] = {}
        for member in calls:
            answer = results[member]
            if isinstance(answer, ShardUnavailable):
                self.placement.failed(member)
            elif isinstance(answer, BaseException):
                raise answer
            else:
                self.placement.answered(member)
            out[member] = answer
        return out

    async def discover(self, q: questions.Question) -> Topic:
        """The topic of a discovery question (one pattern or several): its merged result, signature, body and
        index."""

        async def compute() -> tuple[Any, discovery.DiscoverResult]:
            asked = q if len(self.placement.readers()) == 1 else q.shard_query()
            parts, missing = await self.gather(lambda shard: shard.resolve(asked))

            def merged() -> tuple[Any, discovery.DiscoverResult]:
                result = q.merge(parts, widened=asked is not q)
                result.missing = missing
                return (discovery.signature(result), missing), result
            return await self.lane.run(merged, what="this question")

        def relevant(changes: Iterable[Change]) -> bool:
            result = self.hub.payload(q.key)
            matched = result.matched_tags if result is not None else frozenset()
            return q.relevant(self.knowledge.hierarchy, matched, changes)

        topic = await self.hub.topic(q.key, compute, relevant, discovery.DiscoverResult.rendered,
                                     scope_of(q.selector.environment))
        if topic.payload.missing:
            self.hub.stale(q.key)  # ask again next time: a member that timed out may answer then
        return topic

    async def instances(self, service: str | None, tags: bool = True, selector: Selector = Selector()) -> Topic:
        async def compute() -> tuple[Any, Gathered]:
            lists, missing = await self.gather(lambda shard: shard.instances(service))

            def merged() -> tuple[Any, Gathered]:
                # the newest copy of each, unless removed since, then the selector: an older copy may be in
                # another environment
                removed = removals_of(lists)
                insts = [i for i in newest_copies([i for found in lists for i in found.items], removed)
                         if selector.admits(i.reg)]
                return (tuple(i.state for i in paced(insts)), missing), Gathered(insts, missing)
            return await self.lane.run(merged, what="this listing")

        def relevant(changes: Iterable[Change]) -> bool:
            return any((service is None or service in c.services) and selector.covers(c.environments)
                       for c in changes)

        def render(found: Gathered) -> bytes:
            return b"[" + b",".join(paced(i.view_json(tags) for i in found.items)) + b"]"

        key = ("instances", service, tags, selector)
        topic = await self.hub.topic(key, compute, relevant, render, scope_of(selector.environment))
        if topic.payload.missing:
            self.hub.stale(key)
        return topic

    async def tags(self, selector: Selector = Selector()) -> Topic:
        async def compute() -> tuple[Any, Gathered]:
            found, missing = await self.gather(lambda shard: shard.tag_holders(selector))
            holders = await self.lane.run(merged_holders, found, what="this listing")
            await self._without_removed(holders, removals_of(found))

            def counted() -> list[tuple[Tag, int]]:
                return sort([(t, len(ids)) for t, ids in paced(holders.items())], key=_by_text)
            counts = await self.lane.run(counted, what="this listing")
            return (tuple(counts), missing), Gathered(counts, missing)

        def relevant(changes: Iterable[Change]) -> bool:
            return any(c.reason in ("registered", "replaced", "moved", *REMOVALS) and selector.covers(c.environments)
                       for c in changes)

        def render(found: Gathered) -> bytes:
            body: dict[str, Any] = {"tags": [{**t.as_json(), "instances": n} for t, n in paced(found.items)]}
            if found.missing:
                body.update(partial=True, missing=list(found.missing))
            return orjson.dumps(body)

        key = ("tags", selector)
        topic = await self.hub.topic(key, compute, relevant, render, scope_of(selector.environment))
        if topic.payload.missing:
            self.hub.stale(key)
        return topic

    async def _without_removed(self, holders: dict[Tag, set[str]], removed: dict[str, int]) -> None:
        """Take out of `holders` the instances whose newest copy anywhere is older than their removal (a tag
        count carries ids, not revisions: the few removed lately are looked up)."""
        suspect = {iid for ids in holders.values() for iid in ids if iid in removed}
        if not suspect:
            return
        answers, _ = await self.gather(lambda shard: shard.registered_by(sorted(suspect)))
        live: dict[str, int] = {}
        for found in answers:
            for iid, (revision, _, _) in found.items():
                live[iid] = max(live.get(iid, 0), revision)
        gone = {iid for iid in suspect if live.get(iid, 0) < removed[iid]}
        for tag, ids in list(holders.items()):
            ids -= gone
            if not ids:
                del holders[tag]

    async def holders(self, tags: list[Tag], with_tags: bool = True, selector: Selector = Selector()
                      ) -> tuple[dict[Tag, list[Any]], tuple[str, ...]]:
        """Each tag's `up` instances that the selector admits, exactly (no reasoning): the multi-tag lookup."""
        out: dict[Tag, list[Any]] = {tag: [] for tag in tags}
        found, missing = await self.gather(lambda shard: shard.holders(tags, with_tags))
        out.update(newest_holders(found, lambda i: i.status == UP and selector.admits(i.reg)))
        return out, missing

    async def matching_tags(self, query: Tag, match: frozenset[str]) -> list[Match]:
        """Every registered tag that matches `query` (whoever carries it), ranked."""
        found: dict[Tag, Match] = {}
        answers, _ = await self.gather(lambda shard: shard.matching_tags(query, match))
        for one in answers:
            for m in one:
                found[m[0]] = m
        return sorted(found.values(), key=lambda m: rank_key(m[1], m[2], m[0]))

    async def tags_in(self, environments: Iterable[str]) -> set[Tag]:
        """Every tag some instance in one of `environments` carries (what a reader kept to them may see)."""
        tags: set[Tag] = set()
        for environment in sorted(environments):
            tags |= await self._tags_held(Selector(environment))
        return tags

    async def _tags_held(self, selector: Selector) -> set[Tag]:
        holders: dict[Tag, set[str]] = {}
        found, _ = await self.gather(lambda shard: shard.tag_holders(selector))
        for one in found:
            for tag, ids in one.items.items():
                holders.setdefault(tag, set()).update(ids)
        await self._without_removed(holders, removals_of(found))
        return {tag for tag, ids in holders.items() if ids}

    async def is_registered_term(self, iri: str) -> bool:
        """Whether some registered tag names `iri` (a concept known only from registrations)."""
        answers, _ = await self.gather(lambda shard: shard.names_term(iri))
        return any(answers)


def merged_holders(found: list[Any]) -> dict[Tag, set[str]]:
    """Every shard's tags with their holders, merged (a local shard's are its live index: read from a copy)."""
    holders: dict[Tag, set[str]] = {}
    for one in found:
        for tag, ids in paced(list(one.items.items())):
            holders.setdefault(tag, set()).update(ids)
    return holders


def _by_text(pair: tuple[Tag, int]) -> str:
    return pair[0].text
