"""The registry's writes over the shards: a registration (or a batch), a removal and an admin status, each sent to
the owners of its instances and acknowledged at a quorum (`semreg.registry.quorum`).

The answer is that of the owners that acknowledged: an instance is new (201) only if none of them held
it already (a stand-in for a failed owner has nothing to replace), and the view returned is the instance
as stored, from its first owner, or, when that one is not among the first to answer, from one that is.

An admin status (a drain, maintenance) is decided by one owner, the first to answer (the one running the lease,
unless it is down), which writes it down as a new revision of the record; that record then goes on to the other
owners as a write does, and the change is acknowledged once enough of them hold it, the deciding owner counted
(`spread_status`). Each owner takes it by its revision (`restore_records`), so one that already holds it, or
something newer, changes nothing. An owner that is cut off right after deciding, and whose copy is then superseded
or lost, takes no acknowledged status with it.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from semreg.errors import BadRequest, NotFound, Unavailable
from semreg.registry.instances import Registration
from semreg.registry.placement import Placement
from semreg.registry.quorum import Quorum, Stragglers, lookup
from semreg.registry.shard import Shard, ShardUnavailable


async def register(placement: Placement, stragglers: Stragglers, regs: list[Registration], views: bool = True
                   ) -> list[tuple[Any, bool]]:
    """Every owner of each instance stores it; acknowledged once enough of them hold it durably. Each
    with whether it is new, and (with `views`) the instance as stored, else None."""
    if not regs:
        return []
    placement.check_writable()  # not while this node's membership lease is known to have lapsed
    ids = [r.id for r in regs]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise BadRequest(f"the instance id '{dup}' appears more than once in the batch.", field="instances")
    by_id = {reg.id: reg for reg in regs}
    revisions = {reg.id: placement.next_revision() for reg in regs}
    results: dict[str, tuple[Any, bool]] = {}
    existed: set[str] = set()

    def send(member: str, shard: Shard, ids: list[str], first: bool) -> Any:
        # the first owner answers with the stored instance (when the caller wants it back), the others
        # with whether they stored it: a view of 1,000 tags need not cross twice
        return shard.put_records([(by_id[i], revisions[i]) for i in ids], views and first)

    def answered(member: str, ids: list[str], stored: list[tuple[Any, bool]]) -> None:
        for iid, (inst, created) in zip(ids, stored):
            if not created:
                existed.add(iid)
            if inst is not None and (iid not in results or member == placement.owners(iid)[0][0]):
                results[iid] = (inst, created)

    quorum = Quorum(placement, stragglers, ids, send)
    short = await quorum.run(answered)
    if short:
        raise Unavailable(f"'{short[0]}' is held by {len(quorum.acks[short[0]])} of the "
                          f"{placement.needed(short[0])} owners a write needs; try again.", retry_after_s=1)
    if views:
        for iid in [i for i in ids if i not in results]:  # its first owner was not among the first to answer
            results[iid] = (await stored_view(placement, quorum, iid), True)
    # created only if no owner that acknowledged had it
    return [(results.get(iid, (None, True))[0], iid not in existed) for iid in ids]


async def stored_view(placement: Placement, quorum: Quorum, instance_id: str) -> Any:
    """The instance as one of the owners that acknowledged it holds it now (this node's own copy first);
    what its owners hold when none of those answers."""
    for member in sorted(quorum.acks[instance_id], key=lambda m: m != placement.here):
        try:
            return await quorum.shards[member].get(instance_id)
        except ShardUnavailable:
            placement.failed(member)
        except NotFound:
            continue  # removed meanwhile, there
    return await lookup(placement, instance_id)


async def deregister(placement: Placement, stragglers: Stragglers, instance_id: str) -> None:
    """A tombstone on every owner (stand-ins for the ones that fail), enough of them durably."""
    placement.check_writable()  # not while this node's membership lease is known to have lapsed
    await lookup(placement, instance_id)  # 404 when no owner has it
    revision = placement.next_revision()

    def send(member: str, shard: Shard, ids: list[str], first: bool) -> Any:
        return shard.delete_record(instance_id, revision)

    quorum = Quorum(placement, stragglers, [instance_id], send)
    if await quorum.run(lambda member, ids, answer: None):
        raise Unavailable(f"the removal of '{instance_id}' reached {len(quorum.acks[instance_id])} of the "
                          f"{placement.needed(instance_id)} owners it needs; try again.")


async def admin_status(placement: Placement, stragglers: Stragglers, instance_id: str, revision: int,
                       call: Callable[[Shard], Awaitable[Any]]) -> Any:
    """A status to the first owner that answers, which decides it (it knows the status held, and whether
    `replaces` allows the change); when it wrote it down, the record goes on to the other owners, and the
    answer waits until enough of them hold it (`spread_status`), as a registration's does. A status written
    down is at `revision` or later (after a newer registration held there), one left as it was at the revision
    held before: unchanged, it is answered at once, as a renewal."""
    member, shard, inst = await first_owner(placement, instance_id, call)
    if inst.revision >= revision:
        await spread_status(placement, stragglers, instance_id, member, shard)
    return inst


async def first_owner(placement: Placement, instance_id: str, call: Callable[[Shard], Awaitable[Any]]
                      ) -> tuple[str, Shard, Any]:
    """`call` on the first owner that answers (a heartbeat's: the one running the lease, unless it is down):
    that owner, its shard and the answer."""
    unreachable = []
    for member, shard in placement.owners(instance_id):
        try:
            inst = await call(shard)
        except ShardUnavailable:
            placement.failed(member)
            unreachable.append(member)
            continue
        except NotFound:
            continue
        placement.answered(member)
        return member, shard, inst
    if unreachable:
        raise Unavailable(f"no owner of '{instance_id}' answered; try again.", retry_after_s=1)
    raise NotFound(f"no instance '{instance_id}' is registered; register it again.")


async def spread_status(placement: Placement, stragglers: Stragglers, instance_id: str, holder: str, shard: Shard
                        ) -> None:
    """An admin status that the owner `holder` (on `shard`) has just written down, sent on to the other owners:
    back once enough of them hold its record, `holder` counted, as a registration is; `Unavailable` when too few
    do (the sends still on their way go on, and an owner that missed it gets a hint, as a write's do)."""
    if placement.needed(instance_id) <= 1:
        return
    try:
        records = await shard.export([instance_id])
    except ShardUnavailable:
        placement.failed(holder)
        records = []
    if not records:  # it did not answer, or let go of its copy since (it is no owner on its own ring): no copy to send
        raise Unavailable(f"the status of '{instance_id}' was set on one owner, whose copy could not be read since; "
                          f"try again.", retry_after_s=1)

    def send(member: str, shard: Shard, ids: list[str], first: bool) -> Any:
        return shard.restore_records(records)

    quorum = Quorum(placement, stragglers, [instance_id], send)
    quorum.held(holder, [instance_id])
    if await quorum.run(lambda member, ids, answer: None):
        raise Unavailable(f"the status of '{instance_id}' is held by {len(quorum.acks[instance_id])} of the "
                          f"{placement.needed(instance_id)} owners a change needs; try again.", retry_after_s=1)
