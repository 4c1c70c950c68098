"""A write acknowledged at a quorum: sent to every owner of its records, answered as soon as `needed` of them
hold each record (`Placement.needed`, `min(2, k)`), the other sends left to finish in the background.

A stopped owner still accepts connections (its kernel queues them), so a request to it hangs until its
timeout rather than failing: waiting for every owner would hold each write that long. Here answers are
taken as they come; once every record has enough of them the write is acknowledged, and the sends still
on their way become stragglers (`Stragglers`): tracked, bounded, cancelled on shutdown. A send that fails,
whether before the acknowledgement or after, leaves a hint for its member (`Placement.hint`): the
member gets the newest copy when it answers again, and anti-entropy is the backstop. A failed send is
also tried once more on the owners looked up again, past the members that failed (stand-ins).

`lookup` is the read a write's check makes: the first owner to answer with a copy decides that the
instance exists, without waiting for the others; `newest_copy` is the read of one instance, the newest copy
of every owner's answer. While an owner does not answer and the others hold no
copy, the rest of the ring is asked too (`elsewhere`): an owner back from being away may not hold yet what a
stand-in took in its place.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from semreg.errors import NotFound, SemregError, Unavailable
from semreg.registry.discovery import newest
from semreg.registry.placement import Placement
from semreg.registry.shard import Removed, Shard, ShardUnavailable

log = logging.getLogger("semreg.coordinator")

MAX_STRAGGLERS = 256  # sends still on their way after their write was acknowledged, each a connection
ROUNDS = 2  # sends to the owners, then once more to the owners looked up again past those that failed

# send(member, shard, ids, first): the write of these records to this member; `first` when it is the
# first owner of them (it answers with the stored instances)
Send = Callable[[str, Shard, list[str], bool], Awaitable[Any]]


class Stragglers:
    """Sends still on their way when their write was acknowledged: each failure a hint for its member. At
    most `limit` at once (past it, a send to another node is called off and left to its hint); cancelled
    on shutdown."""

    def __init__(self, limit: int = MAX_STRAGGLERS) -> None:
        self.limit = limit
        self.closed = False
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def keep(self, task: asyncio.Task[Any], placement: Placement, member: str, ids: list[str], local: bool) -> None:
        """Track `task`, a send of `ids` to `member`. A local send is never called off (it is this node's
        own store write, short)."""
        if self.closed or (len(self._tasks) >= self.limit and not local):
            task.cancel()
        self._tasks.add(task)
        task.add_done_callback(lambda done: self._done(done, placement, member, ids))

    def _done(self, task: asyncio.Task[Any], placement: Placement, member: str, ids: list[str]) -> None:
        self._tasks.discard(task)
        error = None if task.cancelled() else task.exception()
        if error is not None and not isinstance(error, (ShardUnavailable, SemregError)):
            log.error("a write to a member failed after it was acknowledged", exc_info=error,
                      extra={"member": member, "ids": ids[:5]})
        if task.cancelled() or error is not None:
            placement.hint(member, ids)

    async def close(self) -> None:
        self.closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class Quorum:
    """One write of the records `ids` to their owners, through `send`."""

    def __init__(self, placement: Placement, stragglers: Stragglers, ids: list[str], send: Send) -> None:
        self.placement = placement
        self.stragglers = stragglers
        self.ids = ids
        self.send = send
        self.acks: dict[str, set[str]] = {i: set() for i in ids}  # members that hold each record
        self.asked: dict[str, set[str]] = {i: set() for i in ids}  # members that hold it or are asked now
        self.shards: dict[str, Shard] = {}
        self.failed: set[str] = set()
        self._flying: dict[asyncio.Task[Any], tuple[str, list[str]]] = {}
        self._rounds = 0

    def held(self, member: str, ids: list[str]) -> None:
        """`member` holds these records already (it wrote them before this write began): it counts towards each,
        and is not sent them."""
        for i in ids:
            self.acks[i].add(member)
            self.asked[i].add(member)

    def short(self) -> list[str]:
        """The records fewer owners hold than a write needs."""
        return [i for i in self.ids if len(self.acks[i]) < self.placement.needed(i)]

    async def run(self, answered: Callable[[str, list[str], Any], None]) -> list[str]:
        """Send, taking answers as they come (`answered(member, ids, answer)`), until every record is held
        by enough owners, or nothing more can be tried; the records still short of them (none when the
        write is acknowledged). Sends still on their way are left to the stragglers."""
        self._launch()
        try:
            while self.short():
                if not self._flying:
                    break
                done, _ = await asyncio.wait(self._flying, return_when=asyncio.FIRST_COMPLETED)
                if self._take([t for t in self._flying if t in done], answered):
                    self._launch()
        finally:
            for task, (member, ids) in self._flying.items():
                self.stragglers.keep(task, self.placement, member, ids, member == self.placement.here)
            self._flying.clear()
        return self.short()

    def _take(self, done: list[asyncio.Task[Any]], answered: Callable[[str, list[str], Any], None]) -> bool:
        """The answers of finished sends, in the order they were sent; whether one failed."""
        failed = False
        for task in done:
            member, ids = self._flying.pop(task)
            error = task.exception()
            if error is None:
                for i in ids:
                    self.acks[i].add(member)
                answered(member, ids, task.result())
                continue
            for i in ids:
                self.asked[i].discard(member)
            if not isinstance(error, (ShardUnavailable, SemregError)):
                raise error
            self.failed.add(member)
            self.placement.hint(member, ids)
            failed = True
        return failed

    def _launch(self) -> None:
        """Send the records still short of owners to the owners not yet asked (looked up past the members
        that failed), one request a member; at most `ROUNDS` times."""
        if self._rounds >= ROUNDS:
            return
        groups: dict[tuple[str, bool], list[str]] = {}
        for i in self.short():
            for n, (member, shard) in enumerate(self.placement.owners(i, frozenset(self.failed))):
                if member not in self.asked[i]:
                    self.shards[member] = shard
                    groups.setdefault((member, n == 0), []).append(i)
        if not groups:
            return
        self._rounds += 1
        for (member, first), ids in groups.items():
            for i in ids:
                self.asked[i].add(member)
            task = asyncio.ensure_future(self._sent(member, self.send(member, self.shards[member], ids, first)))
            self._flying[task] = (member, ids)

    async def _sent(self, member: str, sending: Awaitable[Any]) -> Any:
        try:
            answer = await sending
        except ShardUnavailable:
            self.placement.failed(member)
            raise
        self.placement.answered(member)
        return answer


async def lookup(placement: Placement, instance_id: str) -> Any:
    """Whether an instance is registered, for a write's check: the first copy an owner answers with (the
    others are not waited for), else `NotFound` once every owner asked said so (a stand-in for a failed
    owner holds nothing of what that owner held, so its word alone is not enough); `Unavailable` when
    no owner answered. When an owner did not answer, the other members are asked first (`elsewhere`)."""
    owners = placement.owners(instance_id)
    asking = {asyncio.ensure_future(shard.get(instance_id)): member for member, shard in owners}
    answers, removed, unreachable = 0, 0, False
    try:
        while asking:
            done, _ = await asyncio.wait(asking, return_when=asyncio.FIRST_COMPLETED)
            for task in [t for t in asking if t in done]:
                member = asking.pop(task)
                error = task.exception()
                if isinstance(error, ShardUnavailable):
                    placement.failed(member)
                    unreachable = True
                    continue
                if error is not None and not isinstance(error, NotFound):
                    raise error
                placement.answered(member)
                answers += 1
                if isinstance(error, Removed):
                    removed = max(removed, error.revision)
                if error is None:
                    return task.result()
    finally:
        for task in asking:
            task.cancel()
            task.add_done_callback(_retrieved)
    if unreachable:
        found, removed_elsewhere, answered = await elsewhere(placement, instance_id, {m for m, _ in owners})
        if found is not None and found.revision > max(removed, removed_elsewhere):
            return found
    if not answers:
        raise Unavailable(f"no owner of '{instance_id}' answered; try again.", retry_after_s=1)
    raise NotFound(f"no instance '{instance_id}' is registered.")


async def newest_copy(placement: Placement, instance_id: str) -> Any:
    """The read of one instance: the newest copy its owners hold, unless a removal they hold is newer; while
    an owner does not answer and no other holds a live copy, the other members too (`elsewhere`).
    `Unavailable` when no owner answered and nothing was found; else `NotFound`."""
    owners = placement.owners(instance_id)
    answers = await asyncio.gather(*(shard.get(instance_id) for _, shard in owners), return_exceptions=True)
    found: Any = None
    unreachable: list[str] = []
    removed = 0
    for (member, _), answer in zip(owners, answers):
        if isinstance(answer, ShardUnavailable):
            placement.failed(member)
            unreachable.append(member)
        elif isinstance(answer, Removed):
            removed = max(removed, answer.revision)
        elif isinstance(answer, NotFound):
            continue
        elif isinstance(answer, BaseException):
            raise answer
        else:
            found = answer if found is None else newest(found, answer)
    if (found is None or found.revision <= removed) and unreachable:
        other, removed_elsewhere, _ = await elsewhere(placement, instance_id, {m for m, _ in owners})
        removed = max(removed, removed_elsewhere)
        if other is not None:
            found = other if found is None else newest(found, other)
    if found is not None and found.revision > removed:
        return found
    if unreachable and len(unreachable) == len(owners):
        raise Unavailable(f"no owner of '{instance_id}' answered; try again.", retry_after_s=1)
    raise not_registered(instance_id)


def not_registered(instance_id: str) -> NotFound:
    """What a read of an unknown instance answers (and a reader kept out of its environment, the same)."""
    return NotFound(f"no instance '{instance_id}' is registered.")


async def elsewhere(placement: Placement, instance_id: str, asked: set[str]) -> tuple[Any, int, bool]:
    """An owner did not answer, and the owners that did hold no copy: the other members are asked. An owner
    back from being away holds nothing yet of what was written meanwhile; a stand-in took the write in its
    place (with the owner now not answering, W acknowledgements) and holds the copy until it has handed it
    back. The newest copy they hold (None: none), the newest removal's revision among them, and whether
    any of them answered."""
    others = [(member, shard) for member, shard in placement.readers() if member not in asked]
    answers = await asyncio.gather(*(shard.get(instance_id) for _, shard in others), return_exceptions=True)
    found: Any = None
    removed, answered = 0, False
    for (member, _), answer in zip(others, answers):
        if isinstance(answer, ShardUnavailable):
            placement.failed(member)
            continue
        if isinstance(answer, BaseException) and not isinstance(answer, NotFound):
            raise answer
        placement.answered(member)
        answered = True
        if isinstance(answer, Removed):
            removed = max(removed, answer.revision)
        elif not isinstance(answer, BaseException):
            found = answer if found is None else newest(found, answer)
    return found, removed, answered


def _retrieved(task: asyncio.Future[Any]) -> None:
    """A task let go: its outcome read, so that none is reported as never retrieved."""
    if not task.cancelled():
        task.exception()
