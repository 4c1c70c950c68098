"""Discovery results: each shard's part, the merge of the parts, their signature and JSON body; and `Query`, what
a question of either form (one pattern: `DiscoverQuery`; several: `semreg.registry.conjunctive`) does.

A shard answers a query with its `Part`: every registered tag of its own that matches, ranked, each with
the instances of that shard that carry it and are eligible (status, service, and the query's selector:
environment and metadata). `merge` combines the parts of every shard exactly as one shard holding all of
them would have answered: tags are merged (a tag's instances may sit on several shards), copies of one
instance keep the newest revision (a copy older than one the selector left out on another shard is of a
registration that moved out of the question, and leaves too), the matches are ranked by the matching
order, each instance is ranked at its best match, and the ranked list is cut at `limit`, after every
filter. It is pure: one part in, the single-node answer out.

The answer names each instance once: `instances` holds the ranked views, each with its best `match`
and without its tags unless the query asks for them, and `matches` lists the matched tags with
references (`{"id": ...}`) to those instances. So an answer grows with the instances and tags it names,
not with how many tags each instance carries. At most `MATCHES_LISTED` matched tags are listed, the
best ranked first; past that the answer says `"truncated": true` (one instance may match thousands of
tags, and every instance's own best match is on its view anyway).
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any, Protocol, Self, TypeVar

import orjson

from semreg.rdf.terms import Tag
from semreg.reasoning.hierarchy import Hierarchy
from semreg.reasoning.matching import SIMILAR, floor_of, rank_key, similarity_of, tag_match
from semreg.registry.catalogue import Catalogue, Match
from semreg.registry.instances import UP, Instance
from semreg.registry.registry import Change
from semreg.registry.selector import ALL, Selector
from semreg.registry.similar import similar_match
from semreg.work.budget import INSTANCES
from semreg.work.lane import charge, checkpoint, paced

MATCHES_LISTED = 1000


class Member(Protocol):
    """What discovery needs of an instance in a result (a local `Instance`, or one from another node)."""

    @property
    def id(self) -> str: ...

    @property
    def status(self) -> str: ...

    revision: int
    state_version: int
    routes_since_report: int

    @property
    def state(self) -> tuple[str, int, str]: ...

    def view_json(self, tags: bool = True) -> bytes: ...


M = TypeVar("M", bound=Member)


class Query(Protocol):
    """A discovery question, of one pattern (`DiscoverQuery`) or several (`semreg.registry.conjunctive`): what
    the coordinator, the shards and routing do with it is its own method, so they ask either form alike."""

    @property
    def key(self) -> tuple[Hashable, ...]: ...  # the question, as its topic and its route counter know it

    @property
    def limit(self) -> int | None: ...

    @property
    def tags(self) -> bool: ...  # views with their tags

    @property
    def text(self) -> str: ...  # the question in words, for a log line

    @property
    def patterns(self) -> tuple[Tag, ...]: ...

    def as_json(self) -> dict[str, Any]: ...  # the answer's `query`

    def part(self, catalogue: Catalogue, instances: Mapping[str, Instance],
             removed: dict[str, int] | None = None) -> Part: ...  # a shard's part of the answer

    def shard_query(self) -> Self: ...  # what each of several shards is asked

    def merge(self, parts: Sequence[Part], widened: bool = False) -> DiscoverResult: ...  # the parts, as one answer

    def relevant(self, hierarchy: Hierarchy, matched: frozenset[Tag], changes: Iterable[Change]) -> bool: ...

    def body(self, result: DiscoverResult) -> bytes: ...  # the answer's JSON body


@dataclass(frozen=True)
class DiscoverQuery:
    tag: Tag
    match: frozenset[str]
    service: str | None = None
    any_status: bool = False
    limit: int | None = None
    tags: bool = False  # views with their tags
    selector: Selector = Selector()  # the environment and metadata an instance must be in
    # report the instances the selector leaves out (a coordinator of several shards asks, to tell
    # whether the newest copy of an instance is admitted): not part of the question
    report_excluded: bool = False

    @property
    def key(self) -> tuple[Hashable, ...]:
        return ("discover", self.tag, self.match, self.service, self.any_status, self.limit, self.tags, self.selector)

    @property
    def text(self) -> str:
        return self.tag.text

    @property
    def patterns(self) -> tuple[Tag, ...]:
        return (self.tag,)

    def as_json(self) -> dict[str, Any]:
        return self.tag.as_json()

    def part(self, catalogue: Catalogue, instances: Mapping[str, Instance], removed: dict[str, int] | None = None
             ) -> Part:
        return part(catalogue, instances, self, removed)

    def shard_query(self) -> DiscoverQuery:
        return shard_query(self)

    def merge(self, parts: Sequence[Part], widened: bool = False) -> DiscoverResult:
        return merge(self, parts, widened)

    def relevant(self, hierarchy: Hierarchy, matched: frozenset[Tag], changes: Iterable[Change]) -> bool:
        return relevant(hierarchy, self, matched, changes)

    def body(self, result: DiscoverResult) -> bytes:
        return body(result)


@dataclass(frozen=True)
class Part:
    """One shard's answer: its matching tags (ranked), each with its eligible instances (by id)."""

    matches: list[tuple[Any, list[Member]]]  # each `Match` (a conjunction's: `Combined`) with its instances
    matched_tags: frozenset[Tag]  # every matching tag of the shard, with eligible instances or not
    # instances holding a matching tag that the selector leaves out, by id, with their revision (when
    # the query asked): a copy elsewhere older than one of these is not admitted either
    excluded: dict[str, int] = field(default_factory=dict)
    # the shard's recent removals, by id, with their revision: a copy elsewhere older than one of these is of
    # a removed registration (`semreg.registry.shard.Held`)
    removed: dict[str, int] = field(default_factory=dict)


@dataclass(eq=False)
class DiscoverResult:
    """A merged answer, kept small: the ranked instances with their best matches, and the listed matched
    tags already rendered (a topic holds a handful of objects whatever the size of its answer, so that
    thousands of idle topics do not slow the garbage collector)."""

    query: Query  # a DiscoverQuery, or a ConjunctiveQuery (`semreg.registry.conjunctive`)
    members: list[Member]  # each instance once, ranked
    best: list[Any]  # each member's best match (a `Match`, or a conjunction's `Combined`)
    matches_json: bytes  # the `matches` array
    listed: int  # matched tags listed in it
    truncated: bool
    matched_tags: frozenset[Tag]  # every matching tag, for deciding whether a change is relevant
    missing: tuple[str, ...] = ()  # members whose instances the answer may lack (in a cluster)

    @property
    def ranked(self) -> list[tuple[Member, Match]]:
        return list(zip(self.members, self.best))

    def rendered(self) -> bytes:
        """The JSON body, shaped by the question it answers."""
        return self.query.body(self)


def newest(a: M, b: M) -> M:
    """Of two copies of an instance, the later: by revision, then by state version; between equals, the one
    that counted more routes (routes are counted on the first owner only, and change no version)."""
    return a if ((a.revision, a.state_version, a.routes_since_report)
                 >= (b.revision, b.state_version, b.routes_since_report)) else b


def shard_query(q: DiscoverQuery) -> DiscoverQuery:
    """What each of several shards is asked: instances in any status, since a copy's status may be older
    than another copy's (`merge` filters the newest copies), and the instances the selector leaves out,
    since a copy may be older than another copy that moved to another environment."""
    return replace(q, any_status=True, report_excluded=not q.selector.everything)


def part(catalogue: Catalogue, instances: Mapping[str, Instance], q: DiscoverQuery,
         removed: dict[str, int] | None = None) -> Part:
    """A shard's part: expand the query over its catalogue, keep each tag's eligible instances (and the
    shard's recent removals, which a merge applies to every part)."""
    expansion = catalogue.expand(q.tag, q.match)
    holder_ids = catalogue.holder_ids
    out: list[tuple[Match, list[Member]]] = []
    any_status, service = q.any_status, q.service
    selector = q.selector
    environment = None if selector.environment == ALL else selector.environment
    meta = selector.meta
    excluded: dict[str, int] | None = {} if q.report_excluded else None
    for m in expansion:
        checkpoint()
        ids = holder_ids(m[0])
        charge(INSTANCES, len(ids))
        group: list[Member] = []
        for iid in ids:
            inst = instances.get(iid)
            if inst is None:
                continue
            reg = inst.reg
            if (environment is not None and reg.environment != environment) or (meta and not selector.admits(reg)):
                if excluded is not None:
                    excluded[iid] = inst.revision
                continue
            if (not any_status and inst.status != UP) or (service is not None and reg.service != service):
                continue
            group.append(inst)
        if group:
            out.append((m, group))
    return Part(out, frozenset(m[0] for m in expansion), excluded or {}, removed or {})


def merge(q: DiscoverQuery, parts: Sequence[Part], widened: bool = False) -> DiscoverResult:
    """The answer one shard holding every part's instances would give: matches ranked, each instance
    ranked at its best match, the ranked list cut at `q.limit` (and the groups with it). `widened`: the
    parts answer `shard_query(q)`, so even one of them alone is filtered here."""
    if len(parts) == 1 and not widened:
        matches = parts[0].matches
    else:
        copies: dict[str, Member] = {}
        merged: dict[Tag, tuple[Match, dict[str, Member]]] = {}
        for p in parts:
            for m, group in paced(p.matches):
                holders = merged.setdefault(m[0], (m, {}))[1]
                for inst in group:
                    holders[inst.id] = inst
                    known = copies.get(inst.id)
                    copies[inst.id] = inst if known is None else newest(known, inst)
        left_out = superseded(parts, copies)
        ordered = sorted(merged.values(), key=lambda entry: rank_key(entry[0][1], entry[0][2], entry[0][0]))
        any_status = q.any_status
        matches = []
        for m, holders in paced(ordered):
            group = [copies[i] for i in sorted(holders) if i not in left_out]
            if not any_status:
                group = [inst for inst in group if inst.status == UP]
            if group:
                matches.append((m, group))
    matched = parts[0].matched_tags if len(parts) == 1 else frozenset().union(*(p.matched_tags for p in parts))
    return ranked(q, matches, matched)


def ranked(q: Query, matches: Sequence[tuple[Any, list[Member]]], matched: frozenset[Tag],
           render: Callable[[Any], bytes] | None = None) -> DiscoverResult:
    """The answer of ranked groups: each instance at its first (best) group, the ranked list cut at `q.limit`,
    at most `MATCHES_LISTED` groups listed, each rendered by `render` (a match's JSON: `match_json`)."""
    render = render or match_json
    seen: set[str] = set()
    members: list[Member] = []
    best: list[Any] = []
    listed: list[bytes] = []
    truncated = False
    limit = q.limit
    dumps = orjson.dumps
    for m, group in matches:
        checkpoint()
        kept = []
        for inst in group:
            iid = inst.id
            if iid not in seen:
                if limit is not None and len(members) >= limit:
                    continue
                seen.add(iid)
                members.append(inst)
                best.append(m)
            kept.append(iid)
        if kept:
            if len(listed) < MATCHES_LISTED:
                refs = b",".join(b'{"id":' + dumps(iid) + b"}" for iid in kept)
                listed.append(render(m)[:-1] + b',"instances":[' + refs + b"]}")
            else:
                truncated = True
                if limit is not None and len(members) >= limit:
                    break  # nothing further can be listed or ranked
    return DiscoverResult(q, members, best, b"[" + b",".join(listed) + b"]", len(listed), truncated, matched)


def superseded(parts: Sequence[Part], copies: dict[str, Member]) -> set[str]:
    """The instances whose newest copy is older than one a selector left out (a registration that moved out
    of what was asked) or than a removal (a registration removed since)."""
    newer: dict[str, int] = {}
    for p in parts:
        for found in (p.excluded, p.removed):
            for iid, revision in found.items():
                newer[iid] = max(revision, newer.get(iid, 0))
    return {iid for iid, revision in newer.items() if iid in copies and copies[iid].revision < revision}


def signature(result: DiscoverResult) -> int:
    """What a watcher of this query cares about (the tags listed, who serves them, in which state, ranked
    how), as one 64-bit hash: a topic keeps a number, not a copy of its answer."""
    return hash((result.matches_json, tuple(map(_STATE, result.members)), tuple(m[0] for m in result.best),
                 result.truncated))


_STATE = attrgetter("state")


def match_json(m: Match) -> bytes:
    tag, degree, distance = m
    if degree == SIMILAR:  # no path in the hierarchy: its distance is 0, its closeness the similarity
        return b"".join((b'{"tag":', orjson.dumps(tag.as_json()), b',"degree":"similar","distance":0,"similarity":',
                         orjson.dumps(similarity_of(distance)), b"}"))
    return b"".join((b'{"tag":', orjson.dumps(tag.as_json()), b',"degree":"', degree.encode(), b'","distance":',
                     str(distance).encode(), b"}"))


def body(result: DiscoverResult, query: bytes | None = None, render: Callable[[Any], bytes] | None = None) -> bytes:
    """The JSON body, assembled from each instance's cached view bytes; `query` is the answer's `query` (the
    pattern's JSON unless given) and `render` each view's match (`match_json` unless given)."""
    q = result.query
    tags = q.tags
    render = render or match_json
    query = query if query is not None else orjson.dumps(q.as_json())
    parts = [b'{"query":', query, b',"matches":', result.matches_json, b',"truncated":',
             b"true" if result.truncated else b"false"]
    if result.missing:
        parts += [b',"partial":true,"missing":', orjson.dumps(list(result.missing))]
    parts.append(b',"instances":[')
    shown: dict[Match, bytes] = {}
    views = []
    for inst, m in paced(zip(result.members, result.best)):
        match = shown.get(m)
        if match is None:
            match = shown[m] = render(m)
        views.append(inst.view_json(tags)[:-1] + b',"match":' + match + b"}")
    parts += [b",".join(views), b"]}"]
    return b"".join(parts)


def relevant(hierarchy: Hierarchy, q: DiscoverQuery, matched: frozenset[Tag], changes: Iterable[Change]) -> bool:
    """Whether any change touches a tag this query matched, or a tag that would match it (logically in a degree
    asked, or, when the query names `similar`, as a near miss at its floor), in the environment the query reads."""
    selector = q.selector
    floor = floor_of(q.match)
    seen: set[Tag] = set()
    for c in changes:
        if not selector.covers(c.environments):
            continue
        for tag in c.tags:
            if tag in seen:
                continue
            seen.add(tag)
            if len(seen) % 256 == 0:
                checkpoint()
            if tag in matched:
                return True
            m = tag_match(tag, q.tag, hierarchy)
            if m is not None and m[0] in q.match:
                return True
            if m is None and floor is not None and similar_match(hierarchy, tag, q.tag, floor) is not None:
                return True
    return False
