"""What an overview restricted to some environments counts (a token bound to environments, or `?environment=`),
kept per environment as the registry changes instead of counted over every instance at each change.

Counting every instance at each change an open overview waited on held the event loop ~0.1 s at 100,000
instances and ~1 s at a million, for each console open with a bound token. Per environment: the instances,
by status, by service, and how many hold each tag (so the distinct tags of several environments are the
union of their keys). Kept by the registry as it changes, of the instances whose lease runs on its node
(`semreg.registry.registry`): every one on a node alone, the ones it is the first owner of in a ring.

A member of a ring answers them as a `Tally` (`tally`): its counts, and its distinct tags as 64-bit hashes
(`tag_hashes`, packed), so that a coordinator sums the members' counts and takes the size of the union of
their hashes; `tags_version` moves when a tag is first held or last let go of here, so that hashes made for an
older version are known stale.
"""
from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import mmh3

from semreg.rdf.terms import Tag
from semreg.registry.instances import STATUSES, Instance


class _Counts:
    __slots__ = ("statuses", "services", "tags")

    def __init__(self) -> None:
        self.statuses: dict[str, int] = dict.fromkeys(STATUSES, 0)
        self.services: dict[str, int] = {}
        self.tags: dict[Tag, int] = {}

    @property
    def instances(self) -> int:
        return sum(self.statuses.values())


@dataclass(frozen=True)
class Tally:
    """One member's counts of the instances whose lease runs there, in some environments: by status (every
    status, zeros included), by service and by environment (those with an instance), and its distinct tags
    as 64-bit hashes packed little-endian (`tag_hashes`), or None when the asker said it holds them as of
    `tags_state` (which process, and its `tags_version`: `semreg.registry.tag_union`). `ring`: the members of
    the ring it counted on (none on a node alone)."""

    by_status: dict[str, int]
    services: dict[str, int]
    environments: dict[str, int]
    tags: bytes | None = b""
    ring: tuple[str, ...] = field(default=())
    tags_state: str = ""

    @property
    def instances(self) -> int:
        return sum(self.environments.values())


class EnvironmentCounts:
    def __init__(self, instances: Iterable[Instance]) -> None:
        self._by_environment: dict[str, _Counts] = {}
        self.tags_version = 0  # moves when a tag is first held or last let go of, in any environment
        for inst in instances:
            self.add(inst)

    def add(self, inst: Instance) -> None:
        reg = inst.reg
        counts = self._by_environment.get(reg.environment)
        if counts is None:
            counts = self._by_environment[reg.environment] = _Counts()
        counts.statuses[inst.status] += 1
        counts.services[reg.service] = counts.services.get(reg.service, 0) + 1
        tags = counts.tags
        for tag in reg.tags:
            n = tags.get(tag, 0)
            tags[tag] = n + 1
            if not n:
                self.tags_version += 1

    def remove(self, inst: Instance) -> None:
        reg = inst.reg
        counts = self._by_environment[reg.environment]
        counts.statuses[inst.status] -= 1
        if not counts.instances:
            del self._by_environment[reg.environment]
            self.tags_version += 1
            return
        _less(counts.services, reg.service)
        for tag in reg.tags:
            if not _less(counts.tags, tag):
                self.tags_version += 1

    def restatus(self, inst: Instance, before: str) -> None:
        statuses = self._by_environment[inst.reg.environment].statuses
        statuses[before] -= 1
        statuses[inst.status] += 1

    def summary(self, environments: frozenset[str], order: tuple[str, ...]) -> dict[str, Any]:
        """The counts of the instances in `environments`, as `semreg.registry.listing.counted` gives them
        (`by_status` in `order`)."""
        chosen = [(name, c) for name in sorted(environments) if (c := self._by_environment.get(name)) is not None]
        statuses = dict.fromkeys(order, 0)
        services: dict[str, int] = {}
        for _, counts in chosen:
            for status, n in counts.statuses.items():
                statuses[status] += n
            for service, n in counts.services.items():
                services[service] = services.get(service, 0) + n
        tags = len(chosen[0][1].tags) if len(chosen) == 1 else len(set().union(*(c.tags for _, c in chosen)))
        return {"instances": sum(c.instances for _, c in chosen), "by_status": statuses,
                "services": dict(sorted(services.items())), "environments": {name: c.instances for name, c in chosen},
                "tags": tags}


    def tally(self, environments: frozenset[str] | None, order: tuple[str, ...], tags: bytes | None = b"",
              ring: tuple[str, ...] = (), tags_state: str = "") -> Tally:
        """The counts of the instances in `environments` (None: every one), `by_status` in `order`, with `tags`
        (their `tag_hashes`, made apart: see `tag_lists`)."""
        names = sorted(self._by_environment) if environments is None else sorted(environments)
        chosen = [(name, c) for name in names if (c := self._by_environment.get(name)) is not None]
        statuses = dict.fromkeys(order, 0)
        services: dict[str, int] = {}
        for _, counts in chosen:
            for status, n in counts.statuses.items():
                statuses[status] += n
            for service, n in counts.services.items():
                services[service] = services.get(service, 0) + n
        return Tally(statuses, dict(sorted(services.items())), {name: c.instances for name, c in chosen}, tags, ring,
                     tags_state)

    def tag_lists(self, environments: frozenset[str] | None) -> list[list[Tag]]:
        """The tags held in each of `environments` (None: every one), copied (a C-level copy of each
        environment's keys: the lists can be read in another thread)."""
        if environments is None:
            return [list(c.tags) for c in self._by_environment.values()]
        return [list(c.tags) for name in sorted(environments) if (c := self._by_environment.get(name)) is not None]

    def tag_count(self, environments: frozenset[str] | None) -> int:
        """An upper bound of the distinct tags in `environments`: the sum of each one's."""
        if environments is None:
            return sum(len(c.tags) for c in self._by_environment.values())
        return sum(len(c.tags) for name in environments if (c := self._by_environment.get(name)) is not None)


def tag_hashes(lists: Iterable[Iterable[Tag]]) -> bytes:
    """The distinct tags of `lists` as 64-bit hashes (murmur3 of the tag's text), packed little-endian: 8
    bytes a tag. Two tags share a hash with a chance of about n²/2⁶⁵ (2·10⁻⁷ at 3 million distinct tags)."""
    hashes = {mmh3.hash64(tag.text, signed=False)[0] for one in lists for tag in one}
    packed = array("Q", hashes)
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def unpacked(tags: bytes) -> "array[int]":
    """The hashes `tag_hashes` packed."""
    hashes = array("Q")
    hashes.frombytes(tags)
    if sys.byteorder == "big":
        hashes.byteswap()
    return hashes


def _less(counts: dict[Any, int], key: Any) -> int:
    """One fewer of `key` (gone at none); how many are left."""
    n = counts[key] - 1
    if n:
        counts[key] = n
    else:
        del counts[key]
    return n
