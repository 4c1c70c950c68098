"""Discovery results: matched tags → ranked, filtered instance views, their signature and JSON body."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import orjson

from semreg.catalogue import Match
from semreg.instances import UP, Instance
from semreg.matching import tag_match
from semreg.registry import Change, Registry
from semreg.terms import Tag


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


@dataclass
class DiscoverResult:
    query: DiscoverQuery
    matches: list[tuple[Match, list[Instance]]]
    ranked: list[Instance]
    matched_tags: frozenset[Tag]


def resolve(registry: Registry, q: DiscoverQuery) -> DiscoverResult:
    """Expand the query, then collect eligible instances per matched tag, each ranked at its best tag."""
    expansion = registry.catalogue.expand(q.tag, q.match)
    instances = registry.instances
    holders = registry.catalogue.holders
    seen: set[str] = set()
    ranked: list[Instance] = []
    matches: list[tuple[Match, list[Instance]]] = []
    limit = q.limit
    for m in expansion:
        group = []
        for iid in sorted(holders.get(m[0], ())):
            inst = instances.get(iid)
            if inst is None:
                continue
            if not q.any_status and inst.status != UP:
                continue
            if q.service is not None and inst.reg.service != q.service:
                continue
            if iid not in seen:
                if limit is not None and len(ranked) >= limit:
                    continue
                seen.add(iid)
                ranked.append(inst)
            group.append(inst)
        if group:
            matches.append((m, group))
    return DiscoverResult(q, matches, ranked, frozenset(m[0] for m in expansion))


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


def relevant(registry: Registry, q: DiscoverQuery, matched: frozenset[Tag], changes: Iterable[Change]) -> bool:
    """Whether any change touches a tag this query matched, or a tag that would match it."""
    h = registry.catalogue.hierarchy
    for c in changes:
        for tag in c.tags:
            if tag in matched:
                return True
            m = tag_match(tag, q.tag, h)
            if m is not None and m[0] in q.match:
                return True
    return False
