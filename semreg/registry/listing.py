"""Reads of instances for a person's screen: a page of the list, and an overview's counts.

`page` answers one page of the instances a `ListQuery` admits (by service, status, a tag or a term its
tags mention, environment and metadata), in id order, with how many it admits in all: `after` (the last
id of the previous page: a cursor that stays put when instances come or go before it) and `offset` skip,
`limit` bounds. `summary` counts the instances of some environments by status, service and environment.

Both are topics of the coordinator's hub, kept until a change that can alter them. A page is computed from
what every member holds as `Coordinator.instances` is (the newest copy of each, none removed since), never
rendering the whole list; a summary from the counts every member keeps (`semreg.registry.environment_counts`).
The admitted list of a query's filters is a topic of its own, so paging through it filters and sorts once; its
body is never rendered.
"""
from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from semreg.rdf.terms import Tag
from semreg.registry.coordinator import Coordinator, Gathered
from semreg.registry.indexes import scope_of
from semreg.registry.instances import BLOCKED, CRITICAL, DRAINING, UP, Instance
from semreg.registry.merged import newest_copies, removals_of
from semreg.registry.placement import Single
from semreg.registry.registry import Change, Registry
from semreg.registry.selector import Selector
from semreg.registry.shard import ShardUnavailable
from semreg.registry.watch import Topic

STATUSES = (UP, DRAINING, BLOCKED, CRITICAL)
MAX_LIMIT = 1000
Mention = Tag | str  # a whole tag, or a term named in any position of one


@dataclass(frozen=True)
class ListQuery:
    service: str | None = None
    status: str | None = None
    mention: Mention | None = None
    selector: Selector = Selector()
    after: str | None = None
    offset: int = 0
    limit: int | None = None
    tags: bool = True  # views with their tags

    @property
    def filters(self) -> tuple[Any, ...]:
        return (self.service, self.status, self.mention, self.selector)

    def admits(self, inst: Any) -> bool:
        reg = inst.reg
        if self.service is not None and reg.service != self.service:
            return False
        if not self.selector.admits(reg):
            return False
        if self.status is not None and inst.status != self.status:
            return False
        if isinstance(self.mention, Tag):
            return self.mention in reg.tags
        if self.mention is not None:
            return any(self.mention in tag for tag in reg.tags)
        return True

    def relevant(self, changes: Iterable[Change]) -> bool:
        return any((self.service is None or self.service in c.services) and self.selector.covers(c.environments)
                   for c in changes)


@dataclass
class Paged:
    items: list[Any]
    total: int  # admitted in all, before after/offset/limit
    missing: tuple[str, ...] = ()


async def admitted(coordinator: Coordinator, q: ListQuery) -> Gathered:
    """Every instance the query's filters admit, in id order."""
    async def compute() -> tuple[Any, Gathered]:
        lists, missing = await coordinator.gather(lambda shard: shard.instances(q.service))
        found = newest_copies([i for one in lists for i in one.items], removals_of(lists))  # in id order
        return missing, Gathered([i for i in found if q.admits(i)], missing)

    key = ("admitted", *q.filters)
    topic = await coordinator.hub.topic(key, compute, q.relevant, lambda _: b"", scope_of(q.selector.environment))
    gathered: Gathered = topic.payload  # what `compute` returned
    if gathered.missing:
        coordinator.hub.stale(key)
    return gathered


async def page(coordinator: Coordinator, q: ListQuery) -> Topic:
    """The topic of one page: its views, and the total admitted (a watch of it wakes when either moves)."""
    async def compute() -> tuple[Any, Paged]:
        found = await admitted(coordinator, q)
        start = bisect.bisect_right(found.items, q.after, key=lambda i: i.id) if q.after is not None else 0
        start += q.offset
        shown = found.items[start:start + q.limit if q.limit is not None else None]
        return (tuple(i.state for i in shown), len(found.items), found.missing), Paged(shown, len(found.items),
                                                                                       found.missing)

    def render(paged: Paged) -> bytes:
        return b"[" + b",".join(i.view_json(q.tags) for i in paged.items) + b"]"

    key = ("page", q)
    topic = await coordinator.hub.topic(key, compute, q.relevant, render, scope_of(q.selector.environment))
    if topic.payload.missing:
        coordinator.hub.stale(key)
    return topic


@dataclass
class Counts:
    counts: dict[str, Any]
    missing: tuple[str, ...] = field(default=())
    mixed: bool = False  # the members counted on different rings (one saw a ring change the others had not)


async def summary(coordinator: Coordinator, environments: frozenset[str] | None) -> Topic:
    """The counts of the instances in `environments` (None: all) as an overview shows them: in all, by
    status, service and environment, distinct tags; and the ontologies and the hierarchy's concepts.

    A node alone reads the counts its registry keeps: of all its instances (`alone`), or per environment
    (`semreg.registry.environment_counts`). In a ring each member keeps the same counts of the instances it
    is the first owner of, and they are summed (`ring_counts`: each instance counted once, whatever the
    replicas); a member that does not answer makes it `partial`. Counts from members on different rings (one
    saw a ring change the others had not yet) are answered, not kept: the next read asks again."""
    async def compute() -> tuple[Any, Counts]:
        placement = coordinator.placement
        missing: tuple[str, ...] = ()
        mixed = False
        if isinstance(placement, Single) and environments is None:
            counts = alone(placement.shard.registry)
        elif isinstance(placement, Single) and environments is not None:
            counts = placement.shard.registry.leased_counts.summary(environments, STATUSES)
        else:
            counts, missing, mixed = await ring_counts(coordinator, environments)
        knowledge = coordinator.knowledge
        counts.update(ontologies=len(knowledge.ontologies.metas), concepts=knowledge.hierarchy.size)
        if missing:
            counts.update(partial=True, missing=list(missing))
        body = orjson.dumps(counts)
        return body, Counts(counts, missing, mixed)

    key = ("summary", environments)
    topic = await coordinator.hub.topic(key, compute, lambda changes: True, lambda c: orjson.dumps(c.counts),
                                        environments)
    if topic.payload.missing or topic.payload.mixed:
        coordinator.hub.stale(key)
    return topic


async def ring_counts(coordinator: Coordinator, environments: frozenset[str] | None
                      ) -> tuple[dict[str, Any], tuple[str, ...], bool]:
    """The counts of a ring's instances in `environments` (None: all), summed over every member's counts of
    those it is the first owner of (`semreg.registry.shard.Shard.counts`); the distinct tags, the size of the
    union of the members' tag hashes, counted again only when some member's tags moved (`tag_union`). With the
    members of the rings they counted on that did not answer (a member the placement no longer asks, too), and
    whether they counted on more than one ring."""
    union = coordinator.tag_union
    answers = await coordinator.ask_members(lambda member, shard: shard.counts(environments,
                                                                                union.known(environments, member)))
    again = union.missing(environments, {m: a for m, a in answers.items() if not isinstance(a, ShardUnavailable)})
    if again:  # their hashes were forgotten meanwhile (by a summary of other environments): asked for them
        answers.update(await coordinator.ask_members(lambda _, shard: shard.counts(environments), again))
    answered = {m: a for m, a in answers.items() if not isinstance(a, ShardUnavailable)}
    tallies = list(answered.values())
    rings = {t.ring for t in tallies}
    missing = tuple(sorted(set(answers).union(*rings) - set(answered)))
    statuses = dict.fromkeys(STATUSES, 0)
    services: dict[str, int] = {}
    places: dict[str, int] = {}
    for tally in tallies:
        for totals, counts in ((statuses, tally.by_status), (services, tally.services), (places, tally.environments)):
            for name, n in counts.items():
                totals[name] = totals.get(name, 0) + n
    tags = await union.count(environments, answered)
    return ({"instances": sum(places.values()), "by_status": statuses, "services": dict(sorted(services.items())),
             "environments": dict(sorted(places.items())), "tags": tags}, missing, len(rings) > 1)


def counted(instances: Iterable[Instance], environments: frozenset[str] | None) -> dict[str, Any]:
    """The counts of `instances` in `environments` (None: all), each looked at."""
    statuses = dict.fromkeys(STATUSES, 0)
    services: dict[str, int] = {}
    places: dict[str, int] = {}
    tags: set[Tag] = set()
    total = 0
    for inst in instances:
        reg = inst.reg
        if environments is not None and reg.environment not in environments:
            continue
        total += 1
        statuses[inst.status] = statuses.get(inst.status, 0) + 1
        services[reg.service] = services.get(reg.service, 0) + 1
        places[reg.environment] = places.get(reg.environment, 0) + 1
        tags.update(reg.tags)
    return {"instances": total, "by_status": statuses, "services": dict(sorted(services.items())),
            "environments": dict(sorted(places.items())), "tags": len(tags)}


def alone(registry: Registry) -> dict[str, Any]:
    """The same counts of every instance of one registry, from the counts and indexes it keeps."""
    by_status = registry.counts_by_status()
    return {"instances": len(registry.instances), "by_status": {s: by_status.get(s, 0) for s in STATUSES},
            "services": {k: len(v) for k, v in sorted(registry.by_service.items())},
            "environments": {k: len(v) for k, v in sorted(registry.by_environment.items())},
            "tags": len(registry.catalogue.holders)}
