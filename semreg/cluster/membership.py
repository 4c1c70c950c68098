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
A whole-etcd outage moves nobody's ring (etcd gives every lease its time again when it is back), so writes
go on meanwhile. But once this node *knows* its lease lapsed (a keep-alive says so, or its own key went
without a goodbye) the others may have moved its records: it is fenced (`writable` is false) until it
has repaired what it holds (`before_rejoin`), joined on a fresh lease and read the member list at least
as far as its new key.

The keep-alive loop and the watch are supervised (`semreg.cluster.supervisor`): whatever ends one of them
is logged and it starts again, `trouble` saying why meanwhile. The watch also reads the list afresh every
`RESYNC_S` and whenever `refresh()` asks (a peer said this node's ring is stale), so a watch that went
quiet without an error cannot leave the node on an old ring for long.
Time is the injected clock's; every wait is on it, so the protocol is tested without sleeping.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import orjson

from semreg.clock import Clock, sleep
from semreg.cluster import slots
from semreg.cluster.kv import DELETE, KV, KVUnavailable, LeaseGone
from semreg.cluster.member_key import Declared, encoded
from semreg.cluster.pacemaker import Pacemaker
from semreg.cluster.ring import Ring
from semreg.cluster.supervisor import Supervisor

log = logging.getLogger("semreg.membership")

ALIVE, SUSPECT, FAULTY, LEFT = "alive", "suspect", "faulty", "left"
RESYNC_S = 10.0  # the member list is read afresh this often, whatever the watch says (one small read)
WATCH, LEASE = "membership-watch", "membership-lease"


@dataclass(frozen=True)
class Member:
    id: str
    address: str
    status: str
    since: float  # wall seconds when it took this status
    sparql: bool = True  # serves /sparql (a key without the field: a node of an earlier version, which does)


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

    def serving_sparql(self) -> tuple[str, ...]:
        """The members on the ring that serve `/sparql` (`--sparql`), in ring order."""
        return tuple(m for m in self.ring.members if (member := self.members.get(m)) is not None and member.sparql)


class Membership:
    def __init__(self, kv: KV, cluster: str, node_id: str, address: str, clock: Clock, *, lease_ttl_s: int = 10,
                 forget_after_s: float = 300.0, on_view: Callable[[View], None] | None = None,
                 before_rejoin: Callable[[], Awaitable[None]] | None = None, sparql: bool = True,
                 pacemaker: Pacemaker | None = None, on_slot: Callable[[int], None] | None = None) -> None:
        """`before_rejoin`: run when our lease lapsed (we were paused, or cut off), before joining again:
        the others went on without us meanwhile. `sparql`: whether this node serves `/sparql` (its key says
        so, and members without it forward their queries to one that does). `pacemaker`: refreshes the
        lease from a thread of its own as well (`semreg.cluster.pacemaker`), so a busy event loop keeps it.
        `on_slot`: told the revision slot claimed at each join (`semreg.cluster.slots`), before the key is
        put that makes this node a member."""
        self.kv = kv
        self.cluster = cluster
        self.prefix = f"/semreg/{cluster}/members/"
        self.node_id = node_id
        self.address = address
        self.clock = clock
        self.lease_ttl_s = lease_ttl_s
        self.forget_after_s = forget_after_s
        self.on_view = on_view
        self.before_rejoin = before_rejoin
        self.sparql = sparql
        self.pacemaker = pacemaker
        self.view = View()
        self.degraded = False
        self.joined = False
        self.lease: int | None = None
        self.on_slot = on_slot
        self.slot: int | None = None  # the revision slot held on the current lease (None: not joined yet)
        self._declared: dict[str, Declared] = {}  # member id → its key's value, as etcd holds it now
        self._gone: dict[str, Member] = {}  # members out of the ring, kept for the listing
        self._suspects: frozenset[str] = frozenset()
        self._tasks = Supervisor(clock, owner=node_id)
        self._stopping = False
        self._joined_at = 0  # the revision our key was last put at
        self._fence: float | None = None  # writes wait until the view reaches this revision (inf: not joined yet)
        self._repair_due = False
        self._refresh = asyncio.Event()
        self._read_at: int | None = None  # the revision the watch is to follow from (None: read the list first)

    # -- life cycle ------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Read the member list and watch it, then join (`observe`, then `join`)."""
        self._stopping = False
        await self.observe()
        await self.join()

    async def observe(self) -> None:
        """Read the member list and keep it current, without being in it yet."""
        if not self._tasks.running(WATCH):
            self._read_at = await self._reload()
            self._tasks.start(WATCH, "member list's watch", self._watch_loop)

    async def join(self) -> None:
        """Put our key on a fresh lease, and keep the lease alive."""
        await self._join()
        self._tasks.start(LEASE, "membership lease's keep-alive", self._keepalive_loop)
        if self.pacemaker is not None:
            self.pacemaker.start()

    async def leave(self) -> None:
        """Say goodbye: mark our key `left`, then drop it with its lease (peers take our records).

        A lease that lapsed just before (a keep-alive held up past it on a loaded machine) already made the
        peers list us failed: the goodbye is then said on a lease of its own, so they list us as left, which
        an operator stopping a node expects to read."""
        self._stopping = True
        if self.pacemaker is not None:
            self.pacemaker.hold(None)
        if self.lease is not None:
            with contextlib.suppress(KVUnavailable):
                try:
                    await self.kv.put(self._key(self.node_id), self._value("left"), lease=self.lease)
                except LeaseGone:
                    self.lease = await self.kv.grant(self.lease_ttl_s)
                    await self.kv.put(self._key(self.node_id), self._value("left"), lease=self.lease)
                    log.info("said goodbye on a new lease: ours had lapsed", extra={"node": self.node_id})
                await self.kv.revoke(self.lease)
        await self.stop()

    async def stop(self) -> None:
        self._stopping = True
        if self.pacemaker is not None:  # its thread ends within one etcd call's timeout
            await asyncio.to_thread(self.pacemaker.stop)
        await self._tasks.stop()

    def _key(self, member_id: str) -> str:
        return self.prefix + member_id

    def _value(self, state: str) -> bytes:
        return encoded(self.node_id, self.address, state, self.sparql)

    async def _join(self) -> None:
        lease = await self.kv.grant(self.lease_ttl_s)
        self.slot = await slots.claim(self.kv, self.cluster, self.node_id, lease)
        if self.on_slot is not None:
            self.on_slot(self.slot)
        revision = await self.kv.put(self._key(self.node_id), self._value("alive"), lease=lease)
        self.lease, self._joined_at, self.joined, self._repair_due = lease, revision, True, False
        if self.pacemaker is not None:
            self.pacemaker.hold(lease)
        log.info("joined the cluster", extra={"node": self.node_id, "address": self.address, "lease": self.lease})
        if self._fence is not None:
            self._fence = revision  # writes again once the view shows our new key
            self.refresh()
            self._unfence_if_seen()

    # -- what this node may do, and why it may not -------------------------------------------------------
    @property
    def writable(self) -> bool:
        """False from the moment this node knows its lease lapsed until it joined again and read the list."""
        return self._fence is None

    @property
    def trouble(self) -> str:
        """Why the membership is not running as it should ('' when it is)."""
        if self._fence is not None:
            return ("its membership lease lapsed: rejoining the ring (no writes until it has read the member "
                    "list again)")
        return next(iter(self._tasks.trouble.values()), "")

    @property
    def restarts(self) -> int:
        return self._tasks.restarts

    def refresh(self) -> None:
        """Read the member list afresh now (a peer said our ring is stale, or we joined again)."""
        self._refresh.set()

    def _lapsed(self, why: str) -> None:
        """We know our lease lapsed: fence writes, and join again (repairing first, the first time)."""
        if self._stopping:
            return
        if self.pacemaker is not None:
            self.pacemaker.hold(None)
        if self._fence is None:
            self._repair_due = True
            log.warning("the membership lease lapsed; no writes until this node joined again and read the member "
                        "list", extra={"node": self.node_id, "why": why})
        self._fence = math.inf
        self.refresh()

    def _unfence_if_seen(self) -> None:
        if self._fence is not None and self.view.revision >= self._fence:
            self._fence = None
            log.info("back on the ring: the member list read again; taking writes",
                     extra={"node": self.node_id, "revision": self.view.revision})

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
            if self.pacemaker is not None:
                self.pacemaker.loop_alive()
            try:
                await self._keep()
                backoff = 0.5
            except KVUnavailable as exc:
                if not self.degraded:
                    log.warning("etcd cannot be reached; serving on the last ring known",
                                extra={"node": self.node_id, "error": str(exc)[:200]})
                self.degraded = True
                backoff = min(backoff * 2, self.lease_ttl_s / 3)
            self._tasks.healthy(LEASE)  # running as it should, etcd or not

    async def _keep(self) -> None:
        """One round: keep the lease alive; once it lapsed (or our key went), repair what this node holds,
        then join again on a fresh lease."""
        alive = self.lease is not None and await self.kv.keepalive(self.lease)
        if self.degraded:
            log.info("etcd answers again", extra={"node": self.node_id})
            self.degraded = False
            self.refresh()  # the watch may have missed what changed meanwhile, or stalled across a restart
        if not alive:
            self._lapsed("etcd says the lease is gone")
        if self._fence == math.inf:
            log.warning("joining again", extra={"node": self.node_id})
            if self._repair_due and self.before_rejoin is not None:
                await self.before_rejoin()
            self._repair_due = False
            await self._join()
        now = self.clock.wall()
        if any(now - gone.since > self.forget_after_s for gone in self._gone.values()):
            self._publish(self.view.revision)  # drop the ones listed long enough

    # -- watching the member list ----------------------------------------------------------------------
    async def _reload(self) -> int:
        revision, kvs = await self.kv.get_prefix(self.prefix)
        declared: dict[str, Declared] = {}
        for key, value in kvs:
            try:
                declared[key[len(self.prefix):]] = orjson.loads(value)
            except orjson.JSONDecodeError:
                log.warning("ignored an unreadable member key", extra={"key": key})
        for member_id in set(self._declared) - set(declared):
            self._went(member_id)
        self._declared = declared
        if self.joined and self.node_id not in declared and revision > self._joined_at:
            self._lapsed("its key is not in the member list")
        self._publish(revision)
        return revision

    async def _watch_loop(self) -> None:
        """Read the list, follow its changes; read it again when the watch ends, when asked, and every
        `RESYNC_S`."""
        revision, self._read_at = self._read_at, None
        while not self._stopping:
            if revision is None:
                self._refresh.clear()
                try:
                    revision = await self._reload()
                except KVUnavailable:
                    self.degraded = True
                    await sleep(self.clock, 1.0)
                    continue
            self._tasks.healthy(WATCH)
            ended = await self._follow_until_due(revision)
            revision = None
            if ended:  # the watch ended (etcd went away): read the list afresh once it answers
                await sleep(self.clock, 1.0)

    async def _follow_until_due(self, revision: int) -> bool:
        """Follow the list's changes after `revision`: True once the watch ended by itself, False once a
        fresh read is asked for or due. What ends the watch otherwise is raised (the supervisor's)."""
        loop = asyncio.get_running_loop()
        follow = loop.create_task(self._follow(revision))
        asked = loop.create_task(self._refresh.wait())
        due = loop.create_task(sleep(self.clock, RESYNC_S))
        try:
            await asyncio.wait((follow, asked, due), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (follow, asked, due):
                task.cancel()
            follow.add_done_callback(_retrieved)
        if not follow.done():
            return False
        if follow.cancelled():
            raise asyncio.CancelledError("the watch was cancelled from elsewhere")
        error = follow.exception()
        if error is not None and not isinstance(error, KVUnavailable):
            raise error
        return True

    async def _follow(self, revision: int) -> None:
        async for event in self.kv.watch_prefix(self.prefix, revision + 1):
            member_id = event.key[len(self.prefix):]
            if event.kind == DELETE:
                if member_id == self.node_id and event.revision > self._joined_at and self.joined:
                    self._lapsed("its key was deleted")
                self._went(member_id)
                self._declared.pop(member_id, None)
            else:
                try:
                    self._declared[member_id] = orjson.loads(event.value)
                except orjson.JSONDecodeError:
                    continue
                self._gone.pop(member_id, None)
            self._publish(event.revision)

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
            members[member_id] = Member(member_id, str(value.get("address", "")), status, since,
                                        value.get("sparql", True) is not False)
        for member_id, gone in list(self._gone.items()):
            if member_id in members:
                continue
            if now - gone.since > self.forget_after_s:
                del self._gone[member_id]
                continue
            members[member_id] = gone
        ring = self.view.ring if sorted(ring_ids) == list(self.view.ring.members) else Ring(ring_ids)
        self.view = View(members, revision, ring)
        self._unfence_if_seen()
        if self.on_view is not None:
            self.on_view(self.view)


def _retrieved(task: asyncio.Task[None]) -> None:
    """A watch cancelled for a fresh read: its outcome was decided already."""
    if not task.cancelled():
        task.exception()
