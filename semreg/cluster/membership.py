"""Who is in the cluster: this node's membership key on an etcd lease, and a watch on everyone's.

Each node puts `/semreg/{cluster}/members/{id}` (its id and advertised address) on a lease it keeps
alive. A lease that lapses takes its key with it: that member has failed. Every node reads the member
prefix at a revision and watches it from there, so every node derives the same ring from the same
member list (`semreg.cluster.ring`), with no gossip of its own.

Member status, as `/v1/cluster` shows it:
- `alive`: leased in etcd and reachable from here;
- `suspect`: leased, but requests from this node to it fail (`suspect()`, from the cluster layer); it
  stays in the ring, since every node must agree on the ring and this is one node's view;
- `faulty`: its lease lapsed (its key went without a goodbye); out of the ring, listed for a while;
- `left`: it said goodbye (a graceful leave writes `left` before deleting its key); out of the ring.

When etcd cannot be reached the node keeps the last view it had (`degraded`), keeps retrying, and when
etcd answers again reads the member list afresh and, if its own lease lapsed meanwhile, joins again.
Time is the injected clock's; every wait is on it, so the protocol is tested without sleeping.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import orjson

from semreg.clock import Clock, sleep
from semreg.cluster.kv import DELETE, KV, KVUnavailable
from semreg.cluster.ring import Ring

log = logging.getLogger("semreg.membership")

ALIVE, SUSPECT, FAULTY, LEFT = "alive", "suspect", "faulty", "left"


@dataclass(frozen=True)
class Member:
    id: str
    address: str
    status: str
    since: float  # wall seconds when it took this status


@dataclass(frozen=True)
class View:
    """The member list at an etcd revision, and the ring every node derives from it."""

    members: dict[str, Member] = field(default_factory=dict)
    revision: int = 0
    ring: Ring = field(default_factory=lambda: Ring([]))

    @property
    def checksum(self) -> int:
        return self.ring.checksum

    def address(self, member_id: str) -> str | None:
        m = self.members.get(member_id)
        return m.address if m is not None else None


class Membership:
    def __init__(self, kv: KV, cluster: str, node_id: str, address: str, clock: Clock, *, lease_ttl_s: int = 10,
                 forget_after_s: float = 300.0, on_view: Callable[[View], None] | None = None,
                 before_rejoin: Callable[[], Awaitable[None]] | None = None) -> None:
        """`before_rejoin`: run when our lease lapsed (we were paused, or cut off), before joining again:
        the others went on without us meanwhile."""
        self.kv = kv
        self.prefix = f"/semreg/{cluster}/members/"
        self.node_id = node_id
        self.address = address
        self.clock = clock
        self.lease_ttl_s = lease_ttl_s
        self.forget_after_s = forget_after_s
        self.on_view = on_view
        self.before_rejoin = before_rejoin
        self.view = View()
        self.degraded = False
        self.joined = False
        self.lease: int | None = None
        self._declared: dict[str, dict] = {}  # member id → its key's value, as etcd holds it now
        self._gone: dict[str, Member] = {}  # members out of the ring, kept for the listing
        self._suspects: frozenset[str] = frozenset()
        self._tasks: list[asyncio.Task] = []
        self._stopping = False

    # -- life cycle ------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Read the member list and watch it, then join (`observe`, then `join`)."""
        await self.observe()
        await self.join()

    async def observe(self) -> None:
        """Read the member list and keep it current, without being in it yet."""
        if not any(t.get_name() == "membership-watch" for t in self._tasks):
            await self._reload()
            self._tasks.append(asyncio.get_running_loop().create_task(self._watch_loop(), name="membership-watch"))

    async def join(self) -> None:
        """Put our key on a fresh lease, and keep the lease alive."""
        await self._join()
        self._tasks.append(asyncio.get_running_loop().create_task(self._keepalive_loop(), name="membership-lease"))

    async def leave(self) -> None:
        """Say goodbye: mark our key `left`, then drop it with its lease (peers take our records)."""
        self._stopping = True
        if self.lease is not None:
            with contextlib.suppress(KVUnavailable):
                await self.kv.put(self._key(self.node_id), self._value("left"), lease=self.lease)
                await self.kv.revoke(self.lease)
        await self.stop()

    async def stop(self) -> None:
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []

    def _key(self, member_id: str) -> str:
        return self.prefix + member_id

    def _value(self, state: str) -> bytes:
        return orjson.dumps({"id": self.node_id, "address": self.address, "state": state})

    async def _join(self) -> None:
        self.lease = await self.kv.grant(self.lease_ttl_s)
        await self.kv.put(self._key(self.node_id), self._value("alive"), lease=self.lease)
        self.joined = True
        log.info("joined the cluster", extra={"node": self.node_id, "address": self.address, "lease": self.lease})

    # -- local reachability ----------------------------------------------------------------------------
    @property
    def suspects(self) -> frozenset[str]:
        return self._suspects

    def suspect(self, member_id: str) -> None:
        if member_id != self.node_id and member_id not in self._suspects:
            self._suspects = self._suspects | {member_id}
            self._publish(self.view.revision)

    def unsuspect(self, member_id: str) -> None:
        if member_id in self._suspects:
            self._suspects = self._suspects - {member_id}
            self._publish(self.view.revision)

    # -- keeping the lease -----------------------------------------------------------------------------
    async def _keepalive_loop(self) -> None:
        backoff = 0.5
        while not self._stopping:
            await sleep(self.clock, self.lease_ttl_s / 3 if not self.degraded else backoff)
            try:
                assert self.lease is not None
                if not await self.kv.keepalive(self.lease):
                    log.warning("the membership lease lapsed; joining again", extra={"node": self.node_id})
                    if self.before_rejoin is not None:
                        await self.before_rejoin()
                    await self._join()
                if self.degraded:
                    log.info("etcd answers again", extra={"node": self.node_id})
                self.degraded = False
                backoff = 0.5
                now = self.clock.wall()
                if any(now - gone.since > self.forget_after_s for gone in self._gone.values()):
                    self._publish(self.view.revision)  # drop the ones listed long enough
            except KVUnavailable as exc:
                if not self.degraded:
                    log.warning("etcd cannot be reached; serving on the last ring known",
                                extra={"node": self.node_id, "error": str(exc)[:200]})
                self.degraded = True
                backoff = min(backoff * 2, self.lease_ttl_s / 3)

    # -- watching the member list ----------------------------------------------------------------------
    async def _reload(self) -> int:
        revision, kvs = await self.kv.get_prefix(self.prefix)
        declared = {}
        for key, value in kvs:
            try:
                declared[key[len(self.prefix):]] = orjson.loads(value)
            except orjson.JSONDecodeError:
                log.warning("ignored an unreadable member key", extra={"key": key})
        for member_id in set(self._declared) - set(declared):
            self._went(member_id)
        self._declared = declared
        self._publish(revision)
        return revision

    async def _watch_loop(self) -> None:
        revision = self.view.revision
        while not self._stopping:
            try:
                async for event in self.kv.watch_prefix(self.prefix, revision + 1):
                    member_id = event.key[len(self.prefix):]
                    if event.kind == DELETE:
                        self._went(member_id)
                        self._declared.pop(member_id, None)
                    else:
                        try:
                            self._declared[member_id] = orjson.loads(event.value)
                        except orjson.JSONDecodeError:
                            continue
                        self._gone.pop(member_id, None)
                    revision = event.revision
                    self._publish(revision)
            except KVUnavailable:
                self.degraded = True
            if self._stopping:
                return
            # the watch ended (etcd went away): read the list afresh once it answers, then watch again
            while not self._stopping:
                await sleep(self.clock, 1.0)
                try:
                    revision = await self._reload()
                    break
                except KVUnavailable:
                    continue

    def _went(self, member_id: str) -> None:
        last = self._declared.get(member_id) or {}
        status = LEFT if last.get("state") == "left" else FAULTY
        self._gone[member_id] = Member(member_id, str(last.get("address", "")), status, self.clock.wall())
        self._suspects = self._suspects - {member_id}
        if member_id != self.node_id:
            log.info("member " + ("left" if status == LEFT else "failed"), extra={"member": member_id})

    def _publish(self, revision: int) -> None:
        now = self.clock.wall()
        members: dict[str, Member] = {}
        ring_ids = []
        for member_id, value in self._declared.items():
            if value.get("state") == "left":
                members[member_id] = Member(member_id, str(value.get("address", "")), LEFT, now)
                continue
            ring_ids.append(member_id)
            status = SUSPECT if member_id in self._suspects else ALIVE
            previous = self.view.members.get(member_id)
            since = previous.since if previous is not None and previous.status == status else now
            members[member_id] = Member(member_id, str(value.get("address", "")), status, since)
        for member_id, gone in list(self._gone.items()):
            if member_id in members:
                continue
            if now - gone.since > self.forget_after_s:
                del self._gone[member_id]
                continue
            members[member_id] = gone
        ring = self.view.ring if sorted(ring_ids) == list(self.view.ring.members) else Ring(ring_ids)
        self.view = View(members, revision, ring)
        if self.on_view is not None:
            self.on_view(self.view)
