"""A discovery question of either form: one pattern (`semreg.registry.discovery.DiscoverQuery`) or several at
once (`semreg.registry.conjunctive.ConjunctiveQuery`). What the coordinator, the shards and routing do with a
question (its part, the merge of parts, its body, whether a change is relevant to it) goes through here, so
that they know the two forms by one name."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from semreg.rdf.terms import Tag
from semreg.reasoning.hierarchy import Hierarchy
from semreg.registry import conjunctive, discovery
from semreg.registry.catalogue import Catalogue
from semreg.registry.conjunctive import ConjunctiveQuery
from semreg.registry.discovery import DiscoverQuery, DiscoverResult, Part
from semreg.registry.instances import Instance
from semreg.registry.registry import Change

Question = DiscoverQuery | ConjunctiveQuery


def part(catalogue: Catalogue, instances: Mapping[str, Instance], q: Question,
         removed: dict[str, int] | None = None) -> Part:
    if isinstance(q, ConjunctiveQuery):
        return conjunctive.part(catalogue, instances, q, removed)
    return discovery.part(catalogue, instances, q, removed)


def shard_query(q: Question) -> Question:
    return conjunctive.shard_query(q) if isinstance(q, ConjunctiveQuery) else discovery.shard_query(q)


def merge(q: Question, parts: Sequence[Part], widened: bool = False) -> DiscoverResult:
    if isinstance(q, ConjunctiveQuery):
        return conjunctive.merge(q, parts, widened)
    return discovery.merge(q, parts, widened)


def body(result: DiscoverResult) -> bytes:
    return conjunctive.body(result) if isinstance(result.query, ConjunctiveQuery) else discovery.body(result)


def relevant(hierarchy: Hierarchy, q: Question, matched: frozenset[Tag], changes: Iterable[Change]) -> bool:
    if isinstance(q, ConjunctiveQuery):
        return conjunctive.relevant(hierarchy, q, matched, changes)
    return discovery.relevant(hierarchy, q, matched, changes)


def text(q: Question) -> str:
    """The question in words, for a log line."""
    return q.text if isinstance(q, ConjunctiveQuery) else q.tag.text


def patterns(q: Question) -> tuple[Tag, ...]:
    return q.patterns if isinstance(q, ConjunctiveQuery) else (q.tag,)
