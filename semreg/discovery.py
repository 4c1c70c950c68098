"""Discovery results: each shard's part, the merge of the parts, their signature and JSON body.

A shard answers a query with its `Part`: every registered tag of its own that matches, ranked, each with
the instances of that shard that carry it and are eligible (status, service). `merge` combines the parts
of every shard exactly as one shard holding all of them would have answered: tags are merged (a tag's
instances may sit on several shards), copies of one instance keep the newest revision, the matches are
ranked by the matching order, and the ranked instance list is cut at `limit`. It is pure: one part in,
today's single-node answer out.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import orjson

from semreg.catalogue import Catalogue, Match
from semreg.instances import UP
from semreg.matching import Relations as Hierarchy
from semreg.matching import rank_key, tag_match
from semreg.registry import Change
from semreg.terms import Tag


class Member(Protocol):
    """What discovery needs of an instance in a result (a local `Instance`, or one from another node)."""

    @property
    def id(self) -> str: ...

    @property
    def status(self) -> str: ...

    revision: int

    def view_json(self) -> bytes: ...


@dataclass(frozen=True)
class DiscoverQuery:
    tag: Tag
    match: frozenset[str]
    service: str | None = None
    any_status: bool = False
    limit: int | None = None

    @property
    def key(self) -> tuple:
        return ("discover", self.tag, self.match, self.service, self.any_status, self.limit)


@dataclass(frozen=True)
class Part:
    """One shard's answer: its matching tags (ranked), each with its eligible instances (by id)."""

    matches: list[tuple[Match, list[Member]]]
    matched_tags: frozenset[Tag]  # every matching tag of the shard, with eligible instances or not


@dataclass
class DiscoverResult:
    query: DiscoverQuery
    matches: list[tuple[Match, list[Member]]]
    ranked: list[Member]
    matched_tags: frozenset[Tag]


def part(catalogue: Catalogue, instances: dict, q: DiscoverQuery) -> Part:
    """A shard's part: expand the query over its catalogue, keep each tag's eligible instances."""
    expansion = catalogue.expand(q.tag, q.match)
    holders = catalogue.holders
    out: list[tuple[Match, list[Member]]] = []
    for m in expansion:
        group = []
        for iid in sorted(holders.get(m[0], ())):
            inst = instances.get(iid)
            if inst is None or (not q.any_status and inst.status != UP):
                continue
            if q.service is not None and inst.reg.service != q.service:
                continue
            group.append(inst)
        if group:
            out.append((m, group))
    return Part(out, frozenset(m[0] for m in expansion))


def merge(q: DiscoverQuery, parts: Sequence[Part]) -> DiscoverResult:
    """The answer one shard holding every part's instances would give: matches ranked, each instance
    ranked at its best match, the ranked list cut at `q.limit` (and the groups with it)."""
    if len(parts) == 1:
        matches = parts[0].matches
    else:
        newest: dict[str, Member] = {}
        merged: dict[Tag, tuple[Match, dict[str, Member]]] = {}
        for p in parts:
            for m, group in p.matches:
                members = merged.setdefault(m[0], (m, {}))[1]
                for inst in group:
                    members[inst.id] = inst
                    known = newest.get(inst.id)
                    if known is None or known.revision < inst.revision:
                        newest[inst.id] = inst
        ordered = sorted(merged.values(), key=lambda entry: rank_key(entry[0][1], entry[0][2], entry[0][0]))
        matches = [(m, [newest[i] for i in sorted(members)]) for m, members in ordered]
    seen: set[str] = set()
    ranked: list[Member] = []
    out: list[tuple[Match, list[Member]]] = []
    limit = q.limit
    for m, group in matches:
        kept = []
        for inst in group:
            if inst.id not in seen:
                if limit is not None and len(ranked) >= limit:
                    continue
                seen.add(inst.id)
                ranked.append(inst)
            kept.append(inst)
        if kept:
            out.append((m, kept))
    matched = parts[0].matched_tags if len(parts) == 1 else frozenset().union(*(p.matched_tags for p in parts))
    return DiscoverResult(q, out, ranked, matched)


def signature(result: DiscoverResult) -> tuple:
    """What a watcher of this query cares about: tags, degrees, and who serves them in which state."""
    return tuple((m[0], m[1], m[2], tuple((i.id, i.revision, i.status) for i in group))
                 for m, group in result.matches)


def body(result: DiscoverResult) -> bytes:
    """The JSON body, assembled from each instance's cached view bytes."""
    q = result.query.tag
    parts = [b'{"query":', orjson.dumps(q.as_json()), b',"matches":[']
    first = True
    for (tag, degree, distance), group in result.matches:
        if not first:
            parts.append(b",")
        first = False
        parts += [b'{"tag":', orjson.dumps(tag.as_json()), b',"degree":"', degree.encode(), b'","distance":',
                  str(distance).encode(), b',"instances":[', b",".join(i.view_json() for i in group), b"]}"]
    parts += [b'],"instances":[', b",".join(i.view_json() for i in result.ranked), b"]}"]
    return b"".join(parts)


def relevant(hierarchy: Hierarchy, q: DiscoverQuery, matched: frozenset[Tag], changes: Iterable[Change]) -> bool:
    """Whether any change touches a tag this query matched, or a tag that would match it."""
    for c in changes:
        for tag in c.tags:
            if tag in matched:
                return True
            m = tag_match(tag, q.tag, hierarchy)
            if m is not None and m[0] in q.match:
                return True
    return False
