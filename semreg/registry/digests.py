"""Digests of what a shard holds, per arc of a ring, for anti-entropy: two owners of an arc that hold the
same records at the same revisions (tombstones included) have the same digest, so only the arcs whose
digests differ are compared record by record. Pure.

A digest is (count, xor, sum mod 2**64) of a 64-bit hash of each `id` and revision: independent of
order, and cheap to compute over a node's whole inventory. The ring is anything that puts an id on an arc
(`Arcs`; the cluster's `semreg.cluster.ring.Ring`): the registry knows no ring of its own.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

import mmh3

Digest = tuple[int, int, int]
MASK = (1 << 64) - 1


class Arcs(Protocol):
    """A ring as digests see it: which arc an id falls in, and a checksum that names the ring."""

    @property
    def checksum(self) -> int: ...

    def arc_of(self, key: str) -> int: ...


def record_hash(instance_id: str, revision: int) -> int:
    return mmh3.hash64(f"{instance_id}\0{revision}", signed=False)[0]


def by_arc(ring: Arcs, ids: Iterable[str]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for iid in ids:
        out.setdefault(ring.arc_of(iid), []).append(iid)
    return out


def digests(ring: Arcs, held: Mapping[str, int], arcs: Iterable[int] | None = None) -> dict[int, Digest]:
    """The digest of every arc in `arcs` (all arcs holding something when None) over `held` (id →
    revision, a tombstone's negated); an arc holding nothing is (0, 0, 0)."""
    wanted = set(arcs) if arcs is not None else None
    acc: dict[int, list[int]] = {a: [0, 0, 0] for a in wanted} if wanted is not None else {}
    for iid, revision in held.items():
        arc = ring.arc_of(iid)
        if wanted is not None and arc not in wanted:
            continue
        d = acc.setdefault(arc, [0, 0, 0])
        h = record_hash(iid, revision)
        d[0] += 1
        d[1] ^= h
        d[2] = (d[2] + h) & MASK
    return {arc: (d[0], d[1], d[2]) for arc, d in acc.items()}


def of_ids(ring: Arcs, held: Mapping[str, int], ids: Iterable[str]) -> tuple[dict[int, list[str]], dict[int, Digest]]:
    """The arcs `ids` fall in (with their ids), and this node's digests of those arcs over all it holds."""
    arcs = by_arc(ring, ids)
    return arcs, digests(ring, held, arcs)
