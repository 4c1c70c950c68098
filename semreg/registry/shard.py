"""A shard: what one partition of the registry does, behind one interface.

`Shard` is the seam between the registry and a ring: what a coordinator's writes and reads, and a ring's
repair and hand-off, ask of any member's shard. The shard of this process (`semreg.registry.local_shard`)
implements it, and so does a shard on another node, over HTTP (`semreg.cluster.peer`), which raises
`ShardUnavailable` when it does not answer, or `StaleRing` when it refuses a write sent on a ring it has
moved past. A placement (`semreg.registry.placement`) answers with shards: which to write an instance to,
which to read.

- **Writes**: copies of registrations and removals with their revisions (`put_records`, `delete_record`;
  a copy older than what the shard holds is ignored), heartbeats, admin statuses set without a heartbeat
  (`set_status`), routes, and statuses another owner made (`apply_states`).
- **Reads**: an instance, who registered some, a service's instances, a discovery's part, each tag's
  holders, the tags matching a pattern, every tag, whether a term is registered, and the overview's counts
  of the instances whose lease it runs (`counts`: summed over the members, each instance counted once). A read of several
  instances comes with the shard's recent removals (`Held`); a read of one removed lately raises `Removed`.
- **Repair and hand-off**: the revisions held (`inventory`), their durable form (`export`), copies from
  another owner (`restore_records`), and digests per arc of a ring (`digests`, `semreg.registry.digests`).

`OwnShard` is what a ring drives of this node's own shard besides: its changes, which instances it runs
the leases of, letting go of copies it no longer owns, and when it last compared its records with a ring.
Its recent removals (`semreg.registry.removals`) are handed to the ring apart.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from semreg.errors import Conflict, NotFound
from semreg.rdf.terms import Tag
from semreg.registry import discovery
from semreg.registry.catalogue import Match
from semreg.registry.digests import Arcs, Digest
from semreg.registry.environment_counts import Tally
from semreg.registry.instances import Instance, Registration
from semreg.registry.questions import Question
from semreg.registry.registry import Change
from semreg.registry.selector import Registered, Selector

Listener = Callable[[list[Change]], None]
T = TypeVar("T", covariant=True)
# an instance's status as its lease's owner sends it to the other owners: (id, revision, state version, admin
# status, expired, check passing)
State = tuple[str, int, int, str, bool, bool]
Record = tuple[dict[str, Any], int]  # a durable record (an instance's, or a tombstone's) with its revision


class Copy(discovery.Member, Protocol):
    """An instance as a shard answers with it: this node's `Instance`, or another node's copy
    (`semreg.cluster.wire.RemoteMember`)."""

    @property
    def reg(self) -> Registered: ...


@dataclass(frozen=True)
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
    """What any member's shard answers: this node's own (`LocalShard`) and another's (`RemoteShard`) alike."""

    # -- writes: every owner of an instance is sent each, with the revision the coordinator gave it ----------
    async def put_records(self, items: list[tuple[Registration, int]], views: bool = True
                          ) -> Sequence[tuple[Copy | None, bool]]: ...
    # each with whether it was new there; the copy as stored (None without `views`, or when it held newer)

    async def delete_record(self, instance_id: str, revision: int) -> bool: ...  # False: it held newer

    async def heartbeat(self, instance_id: str, load: float | None, status: str | None,
                        revision: int | None = None) -> Copy: ...
    # an admin status that changes is written down at `revision`, dated by the coordinator when the request came
    # (one carried out late, after a removal, is then older than the removal's tombstone everywhere)

    async def set_status(self, instance_id: str, status: str, replaces: Collection[str] | None = None,
                         revision: int | None = None) -> Copy: ...
    # the admin status alone, only in place of one of `replaces` when given: the lease is not renewed (a
    # heartbeat's status would bring a lapsed instance back)

    async def record_route(self, instance_id: str) -> None: ...

    async def apply_states(self, states: list[State]) -> int: ...  # statuses another owner made; how many newer

    # -- reads -----------------------------------------------------------------------------------------------
    async def get(self, instance_id: str) -> Copy: ...  # Removed when it holds a tombstone of it

    async def registered_by(self, ids: list[str]) -> dict[str, tuple[int, str | None, str]]: ...
    # of these ids, those held: (revision, the token that registered it, its environment); a tombstone held as
    # (-revision, None, "")

    async def instances(self, service: str | None) -> Held[Sequence[Copy]]: ...

    async def resolve(self, q: Question) -> discovery.Part: ...

    async def holders(self, tags: list[Tag], with_tags: bool = True) -> Held[Mapping[Tag, Sequence[Copy]]]: ...

    async def matching_tags(self, query: Tag, match: frozenset[str]) -> list[Match]: ...

    async def tag_holders(self, selector: Selector) -> Held[Mapping[Tag, Collection[str]]]: ...

    async def names_term(self, iri: str) -> bool: ...

    async def counts(self, environments: frozenset[str] | None, known: str | None = None) -> Tally: ...
    # the counts of the instances in `environments` (None: all) whose lease runs here: in a ring those it is the
    # first owner of on its ring (`Tally.ring`), once the last ring change's leases are where it put them; without
    # the tag hashes when the asker holds them as of `known` (`semreg.registry.tag_union`)

    # -- repair and hand-off -----------------------------------------------------------------------------------
    async def inventory(self, ids: Iterable[str] | None = None) -> dict[str, int]: ...
    # id → revision of these ids (everything held when None), a tombstone's negated

    async def export(self, ids: Iterable[str]) -> list[Record]: ...  # the durable form of those held

    async def restore_records(self, items: list[Record]) -> int: ...  # copies from another owner; how many newer

    async def digests(self, ring: Arcs, arcs: list[int]) -> dict[int, Digest] | None: ...
    # of what it holds, per arc of `ring` asked; None when the shard places over another ring


class OwnShard(Shard, Protocol):
    """This node's own shard as a ring drives it, besides what every shard answers."""

    def subscribe(self, listener: Listener) -> None: ...  # its changes, as they are applied

    def held(self, instance_id: str) -> Instance | None: ...  # the instance as held now

    def state(self, instance_id: str) -> State | None: ...  # its status, as the other owners take it

    def set_primary(self, primary: Callable[[str], bool], ring: tuple[str, ...] = ()) -> None: ...
    # which leases and checks run here: those `primary` says, on the ring of members `ring`

    async def drop(self, ids: Iterable[str], held: Mapping[str, int] | None = None) -> int: ...
    # let go of copies owned elsewhere now (with `held`, only those still at the revision given)

    async def last_on_ring(self) -> float | None: ...  # when it last compared its records with a ring

    def on_ring(self) -> None: ...  # it did, now

    def forget_tombstones(self) -> int: ...  # those past their keep
