"""Copies of instances from several shards, merged into what one shard holding them all would hold: the
newest copy of each, and none of an instance removed at a later revision than every copy seen
(`semreg.registry.shard.Held` carries each shard's recent removals)."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from semreg.rdf.terms import Tag
from semreg.registry.discovery import newest
from semreg.registry.shard import Copy, Held
from semreg.work.lane import checkpoint, sort


def newest_copies(instances: list[Any], removed: dict[str, int]) -> list[Any]:
    """One copy of each instance (the newest), by id; none of an instance removed at a later revision. As request
    work, in slices (`semreg.work.lane`)."""
    found: dict[str, Any] = {}
    for k, inst in enumerate(instances):
        if k % 4096 == 4095:
            checkpoint()
        known = found.get(inst.id)
        found[inst.id] = inst if known is None else newest(known, inst)
    return [inst for i in sort(found) if (inst := found[i]).revision > removed.get(i, 0)]


def newest_holders(answers: Sequence[Held[Mapping[Tag, Sequence[Copy]]]], keep: Callable[[Copy], bool]
                   ) -> dict[Tag, list[Copy]]:
    """Each tag's holders over several shards' answers, as one shard holding them all would list them: of the
    copies listed under the tag, the newest of each instance (in id order), unless removed at a later revision
    or refused by `keep`. Tags listed with the same copies (a lookup of 100 of one instance's 1,000 tags) are
    merged once."""
    removed = removals_of(answers)
    listed: dict[Tag, list[Copy]] = {}
    for answer in answers:
        for tag, copies in answer.items.items():
            known = listed.get(tag)
            if known is None:
                listed[tag] = list(copies)
            else:
                known += copies
    merged: dict[tuple[int, ...], list[Copy]] = {}  # id() of the copies listed → their merge
    out: dict[Tag, list[Copy]] = {}
    for tag, copies in listed.items():
        key = tuple(map(id, copies))
        found = merged.get(key)
        if found is None:
            best: dict[str, Copy] = {}
            for inst in copies:
                other = best.get(inst.id)
                best[inst.id] = inst if other is None else newest(other, inst)
            found = merged[key] = [inst for iid in sorted(best)
                                   if (inst := best[iid]).revision > removed.get(iid, 0) and keep(inst)]
        out[tag] = list(found)
    return out


def removals_of(answers: Iterable[Held[Any]]) -> dict[str, int]:
    """The removals every shard's answer came with, merged: the latest of each instance."""
    out: dict[str, int] = {}
    for answer in answers:
        for iid, revision in answer.removed.items():
            if revision > out.get(iid, 0):
                out[iid] = revision
    return out
