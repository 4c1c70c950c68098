"""Where instances live: the owners of an instance, and the shards a read asks, each a `Shard`
(`semreg.registry.shard`) with the name of its member; `here` names this node's own.

`Single` is a node alone: one local shard owns everything. `semreg.cluster.cluster.Cluster` is the ring's
placement: an instance's owners are the first `replicas` members clockwise from `mmh3(id)`, the first of
them runs its lease, and a read asks every member once.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from semreg.registry.local_shard import LocalShard
from semreg.registry.shard import Shard

LOCAL = "local"


class Placement(Protocol):
    replicas: int

    @property
    def here(self) -> str: ...  # the member this node is (its shard answers in this process)

    def owners(self, instance_id: str, avoid: frozenset[str] = frozenset()) -> list[tuple[str, Shard]]: ...
    # (member, shard), first owner first; with `avoid`, members that failed are passed over for the next
    # ones clockwise (stand-ins, that hand the record to its owners later)

    def accountable(self, instance_id: str) -> list[tuple[str, Shard | None]]: ...
    # its owners, none passed over (None for one that may not be asked): a read of it is whole once one answered

    def needed(self, instance_id: str) -> int: ...  # durable copies a write needs

    def readers(self) -> list[tuple[str, Shard]]: ...  # every member's shard, once

    def members(self) -> list[tuple[str, Shard]]: ...
    # every member's shard, suspects too: for a read of what each member alone answers for (an overview's counts)

    def failed(self, member: str) -> None: ...  # a request to it got no answer

    def answered(self, member: str) -> None: ...

    def hint(self, member: str, ids: list[str]) -> None: ...
    # a write of these records did not reach `member` (it failed, or was called off): bring it the newest
    # copies when it answers again

    def missing(self, failed: Iterable[str]) -> list[str]: ...  # members whose records no answer covered

    def next_revision(self) -> int: ...

    def check_writable(self) -> None: ...  # raises `Unavailable` while this node may not take writes


class Single:
    """A node alone."""

    replicas = 1
    here = LOCAL

    def __init__(self, shard: LocalShard) -> None:
        self.shard = shard

    def owners(self, instance_id: str, avoid: frozenset[str] = frozenset()) -> list[tuple[str, Shard]]:
        return [(LOCAL, self.shard)]

    def accountable(self, instance_id: str) -> list[tuple[str, Shard | None]]:
        return [(LOCAL, self.shard)]

    def needed(self, instance_id: str) -> int:
        return 1

    def readers(self) -> list[tuple[str, Shard]]:
        return [(LOCAL, self.shard)]

    def members(self) -> list[tuple[str, Shard]]:
        return [(LOCAL, self.shard)]

    def failed(self, member: str) -> None:
        return None

    def answered(self, member: str) -> None:
        return None

    def hint(self, member: str, ids: list[str]) -> None:
        return None  # the one shard holds everything

    def missing(self, failed: Iterable[str]) -> list[str]:
        return sorted(failed)  # nothing fails here: a local shard answers or raises

    def next_revision(self) -> int:
        return self.shard.revisions.next()

    def check_writable(self) -> None:
        return None
