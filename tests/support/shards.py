"""Shards and a placement in this process, for the write path's tests: a shard holds records by revision
as an owner would, and can be told to hang (its calls wait on a future the test resolves, or never) or to
fail (`ShardUnavailable`, as a node that does not answer). `put` and `remove` write to a real shard as a
node alone's coordinator would, each with the shard's next revision."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from semreg.errors import NotFound
from semreg.registry.instances import Registration
from semreg.registry.local_shard import LocalShard
from semreg.registry.shard import ShardUnavailable


def reg(iid: str = "a", **kw: Any) -> Registration:
    return Registration(**{"id": iid, "service": "svc", "address": "10.0.0.1", "port": 80, **kw})


async def put(shard: LocalShard, regs: list[Registration]) -> None:
    await shard.put_records([(r, shard.revisions.next()) for r in regs])


async def remove(shard: LocalShard, instance_id: str) -> None:
    assert await shard.delete_record(instance_id, shard.revisions.next())


@dataclass
class Copy:
    """An instance as a shard answers with it."""

    id: str
    revision: int
    holder: str
    state_version: int = 0
    routes_since_report: int = 0


class Counter:
    def __init__(self) -> None:
        self.last = 0

    def next(self) -> int:
        self.last += 1
        return self.last


class FakeShard:
    def __init__(self, name: str) -> None:
        self.name = name
        self.revisions = Counter()  # what a placement numbers this node's writes with
        self.records: dict[str, tuple[dict[str, Any], int]] = {}  # id -> (record, revision); a removal: deleted
        self.hang: asyncio.Future | None = None  # when set, every call waits on it first
        self.down = False
        self.calls: list[str] = []

    async def _enter(self, call: str) -> None:
        self.calls.append(call)
        if self.hang is not None:
            await asyncio.shield(self.hang)
        if self.down:
            raise ShardUnavailable(self.name, "down")

    def _newer(self, iid: str, revision: int) -> bool:
        return iid not in self.records or self.records[iid][1] < revision

    async def put_records(self, items: list[tuple[Registration, int]], views: bool = True) -> list[tuple[Any, bool]]:
        await self._enter("put")
        out: list[tuple[Any, bool]] = []
        for r, revision in items:
            if not self._newer(r.id, revision):
                out.append((None, False))
                continue
            created = r.id not in self.records or bool(self.records[r.id][0].get("deleted"))
            self.records[r.id] = (r.record(), revision)
            out.append((Copy(r.id, revision, self.name) if views else None, created))
        return out

    async def delete_record(self, instance_id: str, revision: int) -> bool:
        await self._enter("delete")
        if not self._newer(instance_id, revision):
            return False
        self.records[instance_id] = ({"id": instance_id, "deleted": True}, revision)
        return True

    async def get(self, instance_id: str) -> Any:
        await self._enter("get")
        held = self.records.get(instance_id)
        if held is None or held[0].get("deleted"):
            raise NotFound(f"no instance '{instance_id}'")
        return Copy(instance_id, held[1], self.name)

    async def export(self, ids: list[str]) -> list[tuple[dict[str, Any], int]]:
        return [self.records[i] for i in ids if i in self.records]

    async def restore_records(self, items: list[tuple[dict[str, Any], int]]) -> int:
        await self._enter("restore")
        applied = 0
        for rec, revision in items:
            if self._newer(rec["id"], revision):
                self.records[rec["id"]] = (rec, revision)
                applied += 1
        return applied

    def revision(self, iid: str) -> int | None:
        held = self.records.get(iid)
        return held[1] if held is not None else None


class FakePeer(FakeShard):
    """Another node's shard: what it exports is a request."""

    async def export(self, ids: list[str]) -> list[tuple[dict[str, Any], int]]:
        await self._enter("export")
        return await FakeShard.export(self, ids)


class FakePlacement:
    """Owners in a fixed order (the first `replicas` not avoided, past suspects), as the ring's are."""

    def __init__(self, shards: list[FakeShard], replicas: int = 3, here: str = "") -> None:
        """`here`: the member this node is (none of them, by default: every shard answers as another node's)."""
        self.here = here
        self.shards = {s.name: s for s in shards}
        self.replicas = replicas
        self.suspects: set[str] = set()
        self.hints: list[tuple[str, list[str]]] = []
        self.answers: list[str] = []  # members, each time one answered
        self._revision = 0

    def owners(self, instance_id: str, avoid: frozenset[str] = frozenset()) -> list[tuple[str, Any]]:
        members = [m for m in self.shards if m not in avoid and m not in self.suspects][:self.replicas]
        return [(m, self.shards[m]) for m in members]

    def accountable(self, instance_id: str) -> list[tuple[str, Any]]:
        return [(m, self.shards[m]) for m in list(self.shards)[:self.replicas]]

    def needed(self, instance_id: str) -> int:
        return min(2, self.replicas, len(self.shards))

    def readers(self) -> list[tuple[str, Any]]:
        return list(self.shards.items())

    def members(self) -> list[tuple[str, Any]]:
        return list(self.shards.items())

    def failed(self, member: str) -> None:
        self.suspects.add(member)

    def answered(self, member: str) -> None:
        self.answers.append(member)
        self.suspects.discard(member)

    def hint(self, member: str, ids: list[str]) -> None:
        self.hints.append((member, list(ids)))

    def check_writable(self) -> None:
        return None

    def missing(self, failed: Any) -> list[str]:
        return sorted(failed)

    def next_revision(self) -> int:
        self._revision += 1
        return self._revision
