"""A shard: what one partition of the registry does, behind one protocol.

`Shard` is the seam a node's coordinator talks to: register (create or replace), deregister,
heartbeat, read instances, resolve a discovery over its instances (`semreg.registry.discovery.Part`),
count and look up tags, record a route, and report its changes (per-query watching is the
coordinator's, over those changes). The shard of this process is `semreg.registry.local_shard`; a shard
on another node answers the same calls over HTTP (`semreg.cluster.peer`) and raises `ShardUnavailable`
when it does not answer, or `StaleRing` when it refuses a write sent on a ring it has moved past.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from semreg.errors import Conflict, NotFound
from semreg.rdf.terms import Tag
from semreg.registry import discovery
from semreg.registry.catalogue import Match
from semreg.registry.instances import Instance, Registration
from semreg.registry.questions import Question
from semreg.registry.registry import Change
from semreg.registry.selector import Selector

Listener = Callable[[list[Change]], None]
T = TypeVar("T")


@dataclass
class Held(Generic[T]):
    """A shard's answer to a read, with the removals it must not be read without: `removed` maps the id of
    each instance it removed lately (a tombstone some other node may not hold yet) to the revision of the
    removal. A copy from anywhere older than that is of a removed registration, and a merged read leaves it
    out (`semreg.registry.coordinator`)."""

    items: T
    removed: dict[str, int] = field(default_factory=dict)


class Removed(NotFound):
    """The shard holds no such instance, but a tombstone of it: a copy older than `revision` is stale."""

    def __init__(self, message: str, revision: int) -> None:
        super().__init__(message)
        self.revision = revision


class ShardUnavailable(Exception):
    """The shard did not answer: another node's, reached over the network (refused, reset, past its
    timeout). The coordinator then tries another owner, or answers with what the others said."""

    def __init__(self, member: str, reason: str) -> None:
        super().__init__(f"{member}: {reason}")
        self.member = member
        self.reason = reason


class StaleRing(Conflict):
    """An owner refused a write: its member list is at a newer etcd revision than the sender's, with another
    ring (the others moved past the sender's ring). The write does not count that owner; the sender reads
    the member list again, and the write fails if too few owners took it (503, try again)."""


class Shard(Protocol):
    async def put(self, regs: list[Registration]) -> list[tuple[Instance, bool]]: ...

    async def delete(self, instance_id: str) -> None: ...

    async def heartbeat(self, instance_id: str, load: float | None, status: str | None) -> Instance: ...

    async def get(self, instance_id: str) -> Instance: ...  # Removed when it holds a tombstone of it

    async def registered_by(self, ids: list[str]) -> dict[str, tuple[int, str | None, str]]: ...
    # a tombstone held as (-revision, None, "")

    async def instances(self, service: str | None) -> Held[list[Instance]]: ...

    async def resolve(self, q: Question) -> discovery.Part: ...

    async def holders(self, tags: list[Tag], with_tags: bool = True) -> Held[dict[Tag, list[Instance]]]: ...

    async def matching_tags(self, query: Tag, match: frozenset[str]) -> list[Match]: ...

    async def tag_holders(self, selector: Selector) -> Held[Mapping[Tag, Collection[str]]]: ...

    async def names_term(self, iri: str) -> bool: ...

    async def record_route(self, instance_id: str) -> None: ...

    def subscribe(self, listener: Listener) -> None: ...
