"""Per-query change detection for blocking reads (`?index=N&wait=30s`) and the response cache.

A `Topic` is one query's current result: its signature (what a watcher cares about), its serialised
body, and its own index, the hub index at which its signature last changed. A request with `index=N`
blocks only while `N >= topic.index`, and a topic's index moves only when its own signature changes, so
a write elsewhere never wakes it (unlike a single global index, which wakes every watcher).

Results are computed by the topic's owner (`compute`, a coroutine: a result may be gathered from other
shards); the hub only decides when. A change marks every topic stale; a stale topic is recomputed at
its next read, except one with waiters that the change is relevant to, which is recomputed at once and
wakes its waiters if its signature moved. Concurrent reads of a stale topic share one computation.

A topic's index is its scope's (`semreg.registry.indexes`): a read of one environment is numbered by
that environment's changes alone, so that a reader kept to some environments never counts another's
writes by it; a read of every environment by every change.

Time is the injected clock's (`semreg.clock`): wait timeouts are its timers, and indexes start at its
wall time in microseconds, so they never go backwards across a restart and are never 0.
"""
from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from semreg.clock import Clock
from semreg.registry.indexes import Indexes, Scope

Signature = Hashable
Compute = Callable[[], Awaitable[tuple[Signature, Any]]]  # → (signature, payload used to build the body)
Render = Callable[[Any], bytes]  # payload → the JSON body
MAX_IDLE_TOPICS = 4096  # topics kept without a waiter; a new question every request must not grow memory
MAX_BODY_BYTES = 64 * 1024 * 1024  # rendered bodies kept; past it, idle topics go, least recent first


@dataclass(eq=False)
class Topic:
    key: Hashable
    compute: Compute
    relevant: Callable[[Any], bool]  # does a change possibly alter this topic?
    render: Render
    index: int
    scope: Scope = None  # the environments its result covers, whose changes number its index
    signature: Signature = None
    payload: Any = None
    body: bytes | None = None
    membership_gen: int = -1
    view_gen: int = -1
    waiters: set[asyncio.Future] = field(default_factory=set)
    refreshing: asyncio.Future | None = None


class WatchHub:
    def __init__(self, clock: Clock, start_index: int | None = None) -> None:
        self.clock = clock
        self.indexes = Indexes(start_index or max(1, int(clock.wall() * 1_000_000)))
        self.membership_gen = 0  # bumped on every change that can alter a result
        self.view_gen = 0  # bumped on every change of a view (heartbeats included)
        self._topics: OrderedDict[Hashable, Topic] = OrderedDict()
        self._tasks: set[asyncio.Task] = set()
        self.wakeups = 0
        self.body_bytes = 0

    @property
    def index(self) -> int:
        """The index of a read of every environment (it moves with every change)."""
        return self.indexes.every

    @property
    def watches(self) -> int:
        return sum(len(t.waiters) for t in self._topics.values())

    @property
    def topics(self) -> int:
        return len(self._topics)

    def payload(self, key: Hashable) -> Any:
        """The last computed payload of `key`'s topic (None when there is none)."""
        t = self._topics.get(key)
        return t.payload if t is not None else None

    def stale(self, key: Hashable) -> None:
        """Recompute `key`'s topic at its next read, whatever changed (its last answer was partial)."""
        t = self._topics.get(key)
        if t is not None:
            t.membership_gen = -1

    def fresh(self, key: Hashable) -> Topic | None:
        """The topic for `key` if its body is current (the short path for repeated reads), else None."""
        t = self._topics.get(key)
        if t is None or t.body is None or t.membership_gen != self.membership_gen or t.view_gen != self.view_gen:
            return None
        return t

    async def topic(self, key: Hashable, compute: Compute, relevant: Callable[[Any], bool], render: Render,
                    scope: Scope = None) -> Topic:
        """The topic for `key`, its signature and body current (recomputed if anything changed since); its index
        numbered by the changes of `scope` (the environments its result covers; None: every one)."""
        t = self._topics.get(key)
        if t is None:
            t = Topic(key, compute, relevant, render, self.indexes.of(scope), scope)
            self._topics[key] = t
            await self._refresh(t, bump=False)
        else:
            self._topics.move_to_end(key)
            if t.membership_gen != self.membership_gen:
                await self._refresh(t, bump=True)
            elif t.view_gen != self.view_gen:
                self._drop_body(t)
                t.view_gen = self.view_gen
        if t.body is None:
            t.body = t.render(t.payload)
            self.body_bytes += len(t.body)
            if self.body_bytes > MAX_BODY_BYTES or len(self._topics) > MAX_IDLE_TOPICS:
                self._evict(keep=t)
        return t

    def _drop_body(self, t: Topic) -> None:
        if t.body is not None:
            self.body_bytes -= len(t.body)
            t.body = None

    async def _refresh(self, t: Topic, bump: bool) -> bool:
        """Recompute `t`; True when its signature changed. Concurrent callers share one computation."""
        if t.refreshing is not None:
            return await asyncio.shield(t.refreshing)
        done: asyncio.Future = asyncio.get_running_loop().create_future()
        t.refreshing = done
        try:
            membership, view = self.membership_gen, self.view_gen
            signature, payload = await t.compute()
            changed = signature != t.signature
            t.payload = payload
            self._drop_body(t)
            t.membership_gen = membership
            t.view_gen = view
            if changed:
                t.signature = signature
                if bump:
                    t.index = self.indexes.moved(t.scope, t.index)
            done.set_result(changed)
            return changed
        except BaseException as exc:
            done.set_exception(exc)
            done.exception()  # retrieved: a failed computation is the caller's error, not a loop warning
            raise
        finally:
            t.refreshing = None

    def _evict(self, keep: Topic) -> None:
        """Forget idle topics, least recently read first, until under both bounds (constant time a topic:
        a watched one met on the way goes to the back)."""
        topics = self._topics
        passed = 0
        while (len(topics) > MAX_IDLE_TOPICS or self.body_bytes > MAX_BODY_BYTES) and passed < len(topics):
            key, t = next(iter(topics.items()))
            if t is keep or t.waiters or t.refreshing is not None:
                topics.move_to_end(key)
                passed += 1
                continue
            self._drop_body(t)
            del topics[key]

    # -- changes -----------------------------------------------------------------------------------
    def changed(self, changes: Any, *, membership: bool, everything: bool = False,
                environments: Iterable[str] | None = None) -> None:
        """Note a change, which touched `environments` (None: not known, as everything); recompute (and maybe
        wake) the watched topics it is relevant to."""
        if everything or environments is None:
            self.indexes.changed_everything()
        else:
            self.indexes.changed(environments)
        self.view_gen += 1
        if not membership:
            return
        self.membership_gen += 1
        for t in list(self._topics.values()):
            if not t.waiters:
                continue  # recomputed lazily on its next read
            if everything or t.relevant(changes):
                task = asyncio.get_running_loop().create_task(self._refresh_and_wake(t))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            else:
                t.membership_gen = self.membership_gen

    async def _refresh_and_wake(self, t: Topic) -> None:
        try:
            if await self._refresh(t, bump=True):
                self._wake(t)
        except Exception:  # the waiters keep waiting; their next read recomputes and reports the error
            return

    async def settle(self) -> None:
        """Wait until the recomputations that changes started are done (for tests and shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _wake(self, t: Topic) -> None:
        for fut in t.waiters:
            if not fut.done():
                fut.set_result(None)
        self.wakeups += 1
        t.waiters.clear()

    def release_all(self) -> None:
        """Answer every blocking read now, with its current result (the server is stopping)."""
        for t in self._topics.values():
            if t.waiters:
                self._wake(t)

    async def wait(self, t: Topic, index: int, timeout_s: float) -> None:
        """Return when the topic's index moves past `index`, or after `timeout_s` on the hub's clock. An
        index this hub never gave for it (from before a restart, or from another node of a cluster, whose
        indexes are its own) answers at once: the caller's copy is of unknown age."""
        if t.index != index or timeout_s <= 0:
            return
        fut = asyncio.get_running_loop().create_future()
        t.waiters.add(fut)
        timer = self.clock.call_at(self.clock.monotonic() + timeout_s,
                                   lambda: None if fut.done() else fut.set_result(None))
        try:
            await fut
        finally:
            timer.cancel()
            t.waiters.discard(fut)
