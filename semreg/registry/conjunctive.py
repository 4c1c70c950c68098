"""Conjunctive discovery: the instances that match every one of several patterns (`POST /v1/discover` with
`"all"`), optionally only those whose needs the caller can supply (`"provided"`).

Per pattern, an instance's match is its best-ranked tag matching that pattern with a degree the question
accepts: exactly the `match` its view would carry in a `GET /v1/discover` of that pattern alone. An instance
answers when every pattern has one, and its matches are combined by `combine`: the worst degree (in the
order of `semreg.reasoning.matching.DEGREES`) and the summed distance. The answer's `tag` is the instance's
tag for the worst-matched pattern (the worst degree, then the largest distance, then the first pattern), so a
client reading `tag`, `degree` and `distance` as from `GET /v1/discover` reads the weakest link; `patterns`
adds every pattern's own match, in the order of `all`.

`provided` (as OWLS-MX treats a request's inputs): the tags the caller can supply. An instance's tag is
*needed* when its predicate is, or is a sub-property of, the predicate of some provided tag (a provided tag
has a predicate: it says which of an instance's tags it stands for). Each needed tag must be *covered*: some
provided tag is equal to it or narrower (every component of the provided tag equivalent to, or below, the
instance's; a wildcard in the instance's tag accepts anything, one in a provided tag is no more specific than
a term). An instance with an uncovered needed tag does not answer. `provided` filters; it changes no degree.

With `similar` in `match` (and its floor, `min_similarity`): a pattern may match as similar (its `similarity` on
its own match); a similar match's distance holds its similarity (`semreg.reasoning.matching`), so it adds
nothing to the summed distance, which stays the logical patterns' path length. The conjunction then carries
its patterns' mean `similarity` (a logical match's computed too, `semreg.registry.closeness`) and, with
`provided`, how well the caller's tags fit the instance's needs: `provided` grades instead of filtering (a
near miss is what was asked for). The learned matchmaker (`semreg.registry.matchmaker`) scores each
conjunction from its signals; within a degree the instances rank by that score, then by distance; with
`rank=score` (`semreg.reasoning.matching.with_ranking`) by the score alone, the degrees mixed: measured on
OWLS-TC 3 (docs/design/benchmarks.md).

A shard's part (`part`) evaluates the conjunction over its own instances (an instance and all its tags live
on each of its owners); `merge` combines the parts as `semreg.registry.discovery.merge` does, each instance
at its newest copy's combined match.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import orjson

from semreg.rdf.terms import ANY, Tag
from semreg.reasoning.matching import (
    BROADER,
    EXACT,
    NARROWER,
    RANK,
    SIMILAR,
    Relations,
    by_score,
    component_match,
    floor_of,
    similarity_of,
    tag_match,
)
from semreg.reasoning.reasoner import Hierarchy
from semreg.reasoning.signals import Signals
from semreg.reasoning.similarity import index_of
from semreg.registry import discovery, matchmaker
from semreg.registry.catalogue import Catalogue, Match
from semreg.registry.closeness import Pairs, provided_closeness
from semreg.registry.discovery import DiscoverQuery, DiscoverResult, Member, Part
from semreg.registry.instances import UP, Instance
from semreg.registry.registry import Change
from semreg.registry.selector import Selector
from semreg.work.lane import checkpoint, paced

MAX_PATTERNS = 64  # patterns in `all`, and tags in `provided`
# `combine`'s: the model, the patterns' signals, whether `provided` covers, the needed tags' signals, and how many
# of the instance's tags the question neither asks nor provides for
Scoring = tuple[matchmaker.Model, Sequence[Signals], bool | None, Sequence[Signals], int]


class Combined(NamedTuple):
    """An instance's match of a conjunction: the worst-matched pattern's tag, the worst degree, the summed
    distance, and each pattern's own match in the order of the question. Indexed as a `Match`. With `similar`
    asked: `similarity`, the patterns' mean closeness (`semreg.registry.closeness`), and `provided`, how well
    the caller's tags fit the instance's needs (when the question has some); None otherwise."""

    tag: Tag
    degree: str
    distance: int
    patterns: tuple[Match, ...]
    similarity: float | None = None
    provided: float | None = None
    score: float | None = None  # the learned matchmaker's (`semreg.registry.matchmaker`), with `similar` asked
    signals: matchmaker.Features | None = None  # what it scored, in the order of `matchmaker.FEATURES`

    @property
    def ranking(self) -> float:
        """What ranks the instances of one degree: the matchmaker's score when it scored, else the closeness."""
        return self.closeness if self.score is None else self.score

    @property
    def closeness(self) -> float:
        """What ranks the instances of one degree when `similar` is asked: the patterns' similarity, or its mean
        with `provided`'s (the signature's closeness: outputs and inputs alike); 0 otherwise."""
        if self.similarity is None:
            return 0.0
        return self.similarity if self.provided is None else round((self.similarity + self.provided) / 2, 3)


def combine(matches: Sequence[Match], similarities: Sequence[float] | None = None,
            provided: float | None = None, scored: Scoring | None = None) -> Combined:
    """One match per pattern → the conjunction's: worst degree, summed distance (the one place they combine).
    A similar match's distance holds its similarity (`semreg.reasoning.matching`), not a path: it adds nothing
    to the sum. `similarities`: each pattern's closeness, when `similar` is asked; `scored`: the matchmaker's
    model and what it reads besides degree and distance (each pattern's signals, whether `provided` covers)."""
    worst = max(matches, key=lambda m: (RANK[m[1]], m[2]))  # the first of equals: max keeps it
    distance = sum(m[2] for m in matches if m[1] != SIMILAR)
    similarity = None if similarities is None else round(sum(similarities) / len(similarities), 3)
    if scored is None:
        return Combined(worst[0], worst[1], distance, tuple(matches), similarity, provided)
    model, signals, is_covered, inputs, unasked = scored
    x = tuple([round(v, 4) for v in matchmaker.features(worst[1], distance, signals, provided, is_covered, inputs,
                                                        unasked)])
    return Combined(worst[0], worst[1], distance, tuple(matches), similarity, provided, model.score(x), x)


def rank(m: Combined) -> tuple[int, float, int, Tag, tuple[Match, ...]]:
    """Degree, the matchmaker's score descending (with `similar` asked; measured on OWLS-TC,
    docs/design/benchmarks.md), distance, the worst tag's text, then the patterns' tags: the order of
    `semreg.reasoning.matching`, made total."""
    return RANK[m.degree], -m.ranking, m.distance, m.tag, m.patterns


def rank_by_score(m: Combined) -> tuple[float, int, int, Tag, tuple[Match, ...]]:
    """`rank=score`: the matchmaker's score descending, the degrees mixed; then as `rank`."""
    return -m.ranking, RANK[m.degree], m.distance, m.tag, m.patterns


def ranking(q: ConjunctiveQuery) -> Callable[[Combined], tuple[Any, ...]]:
    return rank_by_score if by_score(q.match) else rank


@dataclass(frozen=True)
class ConjunctiveQuery:
    patterns: tuple[Tag, ...]
    match: frozenset[str]
    provided: tuple[Tag, ...] | None = None  # None: no rule on what the caller supplies
    service: str | None = None
    any_status: bool = False
    limit: int | None = None
    tags: bool = False
    selector: Selector = Selector()
    report_excluded: bool = False  # as `DiscoverQuery.report_excluded`

    @property
    def key(self) -> tuple[Hashable, ...]:
        return ("all", self.patterns, self.provided, self.match, self.service, self.any_status, self.limit,
                self.tags, self.selector)

    @property
    def text(self) -> str:
        return " & ".join(t.text for t in self.patterns)

    def part(self, catalogue: Catalogue, instances: Mapping[str, Instance], removed: dict[str, int] | None = None
             ) -> Part:
        return part(catalogue, instances, self, removed)

    def shard_query(self) -> ConjunctiveQuery:
        return shard_query(self)

    def merge(self, parts: Sequence[Part], widened: bool = False) -> DiscoverResult:
        return merge(self, parts, widened)

    def relevant(self, hierarchy: Hierarchy, matched: frozenset[Tag], changes: Iterable[Change]) -> bool:
        return relevant(hierarchy, self, matched, changes)

    def body(self, result: DiscoverResult) -> bytes:
        return body(result)

    def single(self, pattern: Tag) -> DiscoverQuery:
        """The discovery of one of its patterns, with the same filters and no limit."""
        return DiscoverQuery(pattern, self.match, self.service, self.any_status, None, self.tags, self.selector,
                             self.report_excluded)

    def as_json(self) -> dict[str, Any]:
        """The answer's `query`: the patterns, and what the caller provides when it said."""
        found: dict[str, Any] = {"all": [t.as_json() for t in self.patterns]}
        if self.provided is not None:
            found["provided"] = [t.as_json() for t in self.provided]
        return found


def covered(tags: Iterable[Tag], provided: Sequence[Tag], rel: Relations, seen: dict[Tag, bool] | None = None) -> bool:
    """Whether every tag of an instance that `provided` stands for (its predicate at or below a provided
    tag's) is equal to or broader than some provided tag. `seen` remembers each tag's verdict (instances share
    tags)."""
    seen = {} if seen is None else seen
    for tag in tags:
        fine = seen.get(tag)
        if fine is None:
            needed = tag.p != ANY and any((m := component_match(tag.p, given.p, rel)) is not None
                                          and m[0] in (EXACT, NARROWER) for given in provided)
            fine = seen[tag] = not needed or any((m := tag_match(tag, given, rel)) is not None
                                                 and m[0] in (EXACT, BROADER) for given in provided)
        if not fine:
            return False
    return True


def part(catalogue: Catalogue, instances: Mapping[str, Instance], q: ConjunctiveQuery,
         removed: dict[str, int] | None = None) -> Part:
    """A shard's part: each instance's best match for each pattern (as `semreg.registry.discovery.part` finds
    them), kept when it has one for every pattern and `provided` covers it (with `similar` asked: graded by how
    well `provided` fits it instead), grouped by its combined match."""
    if q.report_excluded:  # the parts of several shards: every pattern's instances, the left out included
        best, eligible, matched, excluded = _every_pattern(catalogue, instances, q)
    else:
        best, eligible, matched = _narrowing(catalogue, instances, q)
        excluded = {}
    groups: dict[Combined, list[Member]] = {}
    combined = _Combiner(catalogue.hierarchy, q)
    for k, iid in enumerate(sorted(set(best[0]).intersection(*best[1:]))):
        if k % 256 == 255:
            checkpoint()
        inst = eligible[iid]
        m = combined([firsts[iid] for firsts in best], inst.reg.tags)
        if m is not None:
            groups.setdefault(m, []).append(inst)
    key = ranking(q)
    return Part(sorted(groups.items(), key=lambda g: key(g[0])), frozenset(matched), excluded, removed or {})


class _Combiner:
    """An instance's combined match in one question, or None when `provided` (without `similar`) leaves it out;
    what instances share (a tag's verdict, a pair's closeness) is remembered for the question."""

    def __init__(self, h: Hierarchy, q: ConjunctiveQuery) -> None:
        self.h, self.q, self.floor = h, q, floor_of(q.match)
        self.covered: dict[Tag, bool] = {}
        self.pairs: Pairs = {}
        self.signals: dict[tuple[Tag, Tag], tuple[Signals, float]] = {}  # a pair's `matchmaker.reading`
        self.needs: dict[Tag, Signals | None] = {}  # a tag's `matchmaker.need`, None when not needed
        self.combined: dict[tuple[tuple[Match, ...], tuple[Tag, ...]], Combined] = {}
        self.model = matchmaker.shipped() if self.floor is not None else None

    def __call__(self, matches: list[Match], tags: Iterable[Tag]) -> Combined | None:
        q, h, floor = self.q, self.h, self.floor
        if floor is None:
            if q.provided is not None and not covered(tags, q.provided, h, self.covered):
                return None
            return combine(matches)
        assert self.model is not None
        tags = tuple(tags)
        key = (tuple(matches), tags)  # instances of the same tags (and so the same matches) score alike
        found = self.combined.get(key)
        if found is None:
            provided, is_covered, inputs = self._fit(tags)
            signals = [self._reading(m[0], pattern)[0] for m, pattern in zip(matches, q.patterns)]
            matched = {m[0] for m in matches}
            unasked = sum(1 for tag in tags if tag not in matched and self.needs.get(tag) is None)
            found = self.combined[key] = combine(
                matches, [self._similarity(m, pattern) for m, pattern in zip(matches, q.patterns)], provided,
                (self.model, signals, is_covered, inputs, unasked))
        return found

    def _fit(self, tags: tuple[Tag, ...]) -> tuple[float | None, bool | None, list[Signals]]:
        """How `provided` fits an instance of these tags: its closeness, whether it covers them, the needed tags'
        signals (`matchmaker.need`)."""
        q, h = self.q, self.h
        if q.provided is None:
            return None, None, []
        assert self.floor is not None
        needs = self.needs
        for tag in tags:
            if tag not in needs:
                needs[tag] = matchmaker.need(index_of(h), tag, q.provided)
        inputs = [n for n in map(needs.__getitem__, tags) if n is not None]
        return (provided_closeness(h, tags, q.provided, self.floor, self.pairs),
                covered(tags, q.provided, h, self.covered), inputs)

    def _reading(self, tag: Tag, pattern: Tag) -> tuple[Signals, float]:
        key = (tag, pattern)
        found = self.signals.get(key)
        if found is None:
            found = self.signals[key] = matchmaker.reading(index_of(self.h), tag, pattern)
        return found

    def _similarity(self, m: Match, pattern: Tag) -> float:
        """A pattern's match's closeness: a similar match's own, a logical match's computed (with its signals)."""
        return similarity_of(m[2]) if m[1] == SIMILAR else self._reading(m[0], pattern)[1]


Best = list[dict[str, Match]]  # per pattern, each instance's best match


def _firsts(one: Part, eligible: dict[str, Any]) -> dict[str, Match]:
    """Each instance of a pattern's part at its first (best-ranked) match."""
    firsts: dict[str, Match] = {}
    for m, group in one.matches:
        for inst in group:
            if inst.id not in firsts:
                firsts[inst.id] = m
                eligible[inst.id] = inst
    return firsts


def _every_pattern(catalogue: Catalogue, instances: Mapping[str, Instance], q: ConjunctiveQuery
                   ) -> tuple[Best, dict[str, Any], set[Tag], dict[str, int]]:
    """Each pattern's part in full, with the instances its selector leaves out."""
    best: Best = []
    eligible: dict[str, Any] = {}
    matched: set[Tag] = set()
    excluded: dict[str, int] = {}
    for pattern in q.patterns:
        one = discovery.part(catalogue, instances, q.single(pattern))
        matched |= one.matched_tags
        excluded.update(one.excluded)
        best.append(_firsts(one, eligible))
    return best, eligible, matched, excluded


def _narrowing(catalogue: Catalogue, instances: Mapping[str, Instance], q: ConjunctiveQuery
               ) -> tuple[Best, dict[str, Any], set[Tag]]:
    """The same answer with less work: the pattern whose tags have the fewest holders is resolved in full,
    and each other pattern looks only at the instances still in the running."""
    expansions = []
    for pattern in q.patterns:
        checkpoint()
        expansions.append(catalogue.expand(pattern, q.match))
    matched = {m[0] for found in expansions for m in found}
    holders = catalogue.holders
    sizes = [sum(len(holders.get(m[0], ())) for m in found) for found in expansions]
    order = sorted(range(len(q.patterns)), key=sizes.__getitem__)
    eligible: dict[str, Any] = {}
    best: list[dict[str, Match]] = [{} for _ in q.patterns]
    best[order[0]] = running = _firsts(discovery.part(catalogue, instances, q.single(q.patterns[order[0]])), eligible)
    for k in order[1:]:
        firsts: dict[str, Match] = {}
        for m in expansions[k]:
            checkpoint()
            if len(firsts) == len(running):
                break
            for iid in catalogue.holder_ids(m[0]):
                if iid in running and iid not in firsts:
                    firsts[iid] = m
        best[k] = running = firsts
    return best, eligible, matched


def shard_query(q: ConjunctiveQuery) -> ConjunctiveQuery:
    """What each of several shards is asked (as `semreg.registry.discovery.shard_query`)."""
    return replace(q, any_status=True, report_excluded=not q.selector.everything)


def merge(q: ConjunctiveQuery, parts: Sequence[Part], widened: bool = False) -> DiscoverResult:
    """The answer one shard holding every part's instances would give: each instance once, at its newest
    copy's combined match, ranked, cut at `q.limit`."""
    if len(parts) == 1 and not widened:
        return discovery.ranked(q, parts[0].matches, parts[0].matched_tags, match_json)
    copies: dict[str, tuple[Member, Combined]] = {}
    for p in parts:
        for m, group in paced(p.matches):
            for inst in group:
                known = copies.get(inst.id)
                if known is None or discovery.newest(known[0], inst) is inst:
                    copies[inst.id] = (inst, m)
    left_out = discovery.superseded(parts, {iid: inst for iid, (inst, _) in copies.items()})
    groups: dict[Combined, list[Member]] = {}
    for iid in sorted(copies):
        inst, m = copies[iid]
        if iid not in left_out and (q.any_status or inst.status == UP):
            groups.setdefault(m, []).append(inst)
    matched = frozenset().union(*(p.matched_tags for p in parts))
    key = ranking(q)
    return discovery.ranked(q, sorted(groups.items(), key=lambda g: key(g[0])), matched, match_json)


def match_json(m: Combined, signals: bool = True) -> bytes:
    """`{"tag", "degree", "distance", "patterns": [{"tag", "degree", "distance"}, ...]}`, and with `similar` asked
    the conjunction's `similarity` (and `provided`, when the question has it), its `score` and (`signals`: in the
    answer's `matches`, not on each instance's view, which would grow the answer by half) what it scored."""
    head = b"".join((b'{"tag":', orjson.dumps(m.tag.as_json()), b',"degree":"', m.degree.encode(), b'","distance":',
                     str(m.distance).encode()))
    if m.similarity is not None:
        head += b',"similarity":' + orjson.dumps(m.similarity)
    if m.provided is not None:
        head += b',"provided":' + orjson.dumps(m.provided)
    if m.score is not None:
        head += b',"score":' + orjson.dumps(m.score)
    if signals and m.signals is not None:
        head += b',"signals":' + orjson.dumps(dict(zip(matchmaker.FEATURES, m.signals)))
    return head + b',"patterns":[' + b",".join(discovery.match_json(p) for p in m.patterns) + b"]}"


def body(result: DiscoverResult) -> bytes:
    """The answer, shaped as `GET /v1/discover`'s: `query` holds `all` (and `provided`), each match its
    `patterns`."""
    return discovery.body(result, orjson.dumps(result.query.as_json()), lambda m: match_json(m, False))


def relevant(hierarchy: Hierarchy, q: ConjunctiveQuery, matched: frozenset[Tag], changes: Iterable[Change]) -> bool:
    """Whether a change touches a tag some pattern matched or would match: an instance that enters or leaves
    the answer has such a tag (`provided` only filters instances that match every pattern)."""
    changes = list(changes)
    return any(discovery.relevant(hierarchy, q.single(pattern), matched, changes) for pattern in q.patterns)
