"""Copies of instances from several shards, merged into what one shard holding them all would hold: the
newest copy of each, and none of an instance removed at a later revision than every copy seen
(`semreg.registry.shard.Held` carries each shard's recent removals)."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from semreg.registry.discovery import newest
from semreg.registry.shard import Held
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


def removals_of(answers: Iterable[Held[Any]]) -> dict[str, int]:
    """The removals every shard's answer came with, merged: the latest of each instance."""
    out: dict[str, int] = {}
    for answer in answers:
        for iid, revision in answer.removed.items():
            if revision > out.get(iid, 0):
                out[iid] = revision
    return out
