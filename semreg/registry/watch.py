"""Per-query change detection for blocking reads (`?index=N&wait=30s`) and the response cache.

A `Topic` is one query's current result: its signature (what a watcher cares about), its serialised
body, and its own index, the hub index at which its signature last changed. A request with `index=N`
blocks only while `N >= topic.index`, and a topic's index moves only when its own signature changes, so
a write elsewhere never wakes it (unlike a single global index, which wakes every watcher).

Results are computed by the topic's owner (`compute`, a coroutine: a result may be gathered from other
shards); the hub only decides when. A change marks every topic stale; a stale topic is recomputed at
its next read, except one with waiters that the change is relevant to, which is recomputed at once and
wakes its waiters if its signature moved. Concurrent reads of a stale topic share one computation; a change
that arrives while one runs is followed by another computation, never folded into one that may predate it.

Which watched topics a change is relevant to is found after the change, not inside it: the changes that
arrive while a sweep runs wait for the next one, and a sweep runs as essential request work on the node's lane
(`semreg.work.lane`: in slices, a topic at a time, never shed), with the recomputations it starts marked
essential too. A batch of 10,000 registrations beside 300 watches is millions of tag checks: they no longer
hold the loop that answers heartbeats.

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
from semreg.work.lane import ESSENTIAL, Lane, checkpoint

Signature = Hashable
Compute = Callable[[], Awaitable[tuple[Signature, Any]]]  # → (signature, payload used to build the body)
Render = Callable[[Any], bytes]  # payload → the JSON body
MAX_IDLE_TOPICS = 4096  # topics kept without a waiter; a new question every request must not grow memory
MAX_BODY_BYTES = 64 * 1024 * 1024  # rendered bodies kept; past it, idle topics go, least recent first
RENDERED_AT_ONCE = 256  # instances or tags an answer names that are rendered at once; more, as request work
MAX_SHAPES = 16  # other shapes of one topic's answer kept beside its body (Consul's views of it, say)
_EVERYTHING = object()  # a change that may move every result (a new closure, members came or went)


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
    shapes: dict[Hashable, bytes] = field(default_factory=dict)  # the answer in other shapes, dropped with the body
    membership_gen: int = -1
    view_gen: int = -1
    waiters: set[asyncio.Future[None]] = field(default_factory=set)
    refreshing: asyncio.Future[bool] | None = None  # the running computation: whether the signature moved
    refreshing_gen: int = -1  # the hub's membership generation the running computation started at


class WatchHub:
    def __init__(self, clock: Clock, start_index: int | None = None, lane: Lane | None = None) -> None:
        self.clock = clock
        self.lane = lane
        self.indexes = Indexes(start_index or max(1, int(clock.wall() * 1_000_000)))
        self.membership_gen = 0  # bumped on every change that can alter a result
        self.view_gen = 0  # bumped on every change of a view (heartbeats included)
        self._topics: OrderedDict[Hashable, Topic] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()
        self.wakeups = 0
        self.body_bytes = 0
        self._pending: list[Any] = []  # changes no sweep has looked at yet
        self._pending_since = 0  # the membership generation before the first of them
        self._sweeping = False

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
            body = await self._render(t)
            if t.body is None:  # else another read rendered it meanwhile
                t.body = body
                self.body_bytes += len(body)
            if self.body_bytes > MAX_BODY_BYTES or len(self._topics) > MAX_IDLE_TOPICS:
                self._evict(keep=t)
        return t

    async def _render(self, t: Topic) -> bytes:
        """The topic's body: at once when its answer is short, else as request work, in slices."""
        payload = t.payload
        size = len(getattr(payload, "members", None) or getattr(payload, "items", None) or ())
        if self.lane is None or size <= RENDERED_AT_ONCE:
            return t.render(payload)
        return await self.lane.run(t.render, payload, what="this answer")

    async def shaped(self, t: Topic, key: Hashable, build: Render, as_work: bool = False) -> bytes:
        """`t`'s answer in another shape (its payload rendered otherwise: Consul's entries of it, say), built once
        for as long as its body is kept, and dropped with it when anything the answer shows changes. `t` is a
        topic `topic()` just handed out; `key` names the shape and everything besides the payload it depends on.
        A long answer is built as request work, in slices, as bodies are; so is any when `as_work` (a shape whose
        cost grows with more than the answer)."""
        hit = t.shapes.get(key)
        if hit is not None:
            return hit
        payload = t.payload
        size = len(getattr(payload, "members", None) or getattr(payload, "items", None) or ())
        body = build(payload) if self.lane is None or (size <= RENDERED_AT_ONCE and not as_work) \
            else await self.lane.run(build, payload, what="this answer")
        if t.payload is payload and t.body is not None and key not in t.shapes:  # else it changed meanwhile
            if len(t.shapes) >= MAX_SHAPES:
                self.body_bytes -= len(t.shapes.pop(next(iter(t.shapes))))
            t.shapes[key] = body
            self.body_bytes += len(body)
            if self.body_bytes > MAX_BODY_BYTES:
                self._evict(keep=t)
        return body

    def _drop_body(self, t: Topic) -> None:
        if t.body is not None:
            self.body_bytes -= len(t.body)
            t.body = None
        if t.shapes:
            self.body_bytes -= sum(len(b) for b in t.shapes.values())
            t.shapes.clear()

    async def _refresh(self, t: Topic, bump: bool, at_least: int = -1) -> bool:
        """Recompute `t`; True when its signature changed. Concurrent callers share one computation, unless it
        started before generation `at_least` (a change it may not see): then another follows it."""
        changed = False
        while t.refreshing is not None:
            started = t.refreshing_gen
            try:
                changed = await asyncio.shield(t.refreshing) or changed
            except Exception:
                if started >= at_least:
                    raise
            if started >= at_least:
                return changed
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        t.refreshing = done
        try:
            membership, view = self.membership_gen, self.view_gen
            t.refreshing_gen = membership
            signature, payload = await t.compute()
            moved = signature != t.signature
            t.payload = payload
            self._drop_body(t)
            t.membership_gen = membership
            t.view_gen = view
            if moved:
                t.signature = signature
                if bump:
                    t.index = self.indexes.moved(t.scope, t.index)
            done.set_result(moved)
            return moved or changed
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
        """Note a change, which touched `environments` (None: not known, as everything); the watched topics it is
        relevant to are recomputed (and maybe woken) by a sweep."""
        if everything or environments is None:
            self.indexes.changed_everything()
        else:
            self.indexes.changed(environments)
        self.view_gen += 1
        if not membership:
            return
        if not self._pending:
            self._pending_since = self.membership_gen
        self.membership_gen += 1
        self._pending.append(_EVERYTHING if everything else changes)
        if not self._sweeping:  # one sweep is on its way for what is pending; one running takes nothing new
            self._sweeping = True
            self._start(self._sweep())

    def _start(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _sweep(self) -> None:
        """Look at the changes pending when it starts against the watched topics: a topic a change is relevant
        to is recomputed as soon as that is found. The changes noted meanwhile have a sweep of their own, which
        does not wait for this one (a small write is not held behind a batch of 10,000)."""
        ESSENTIAL.set(True)  # in this task: the recomputations it starts, too
        if self.lane is not None:
            await self.lane.run(self._take_and_look, what="a watch", essential=True)
        else:
            self._take_and_look()

    def _take_and_look(self) -> None:
        batches, since, gen = self._pending, self._pending_since, self.membership_gen
        self._pending = []
        self._sweeping = False
        batches.sort(key=lambda b: 0 if b is _EVERYTHING else len(b))  # the cheapest to look at first
        for t in [t for t in self._topics.values() if t.waiters]:
            checkpoint()
            if any(b is _EVERYTHING or t.relevant(b) for b in batches):
                self._start(self._refresh_and_wake(t, gen))
            elif t.membership_gen == since and t.refreshing is None:
                t.membership_gen = gen  # none of these changes moves it: current as it is

    async def _refresh_and_wake(self, t: Topic, gen: int) -> None:
        try:
            if await self._refresh(t, bump=True, at_least=gen):
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
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        t.waiters.add(fut)
        timer = self.clock.call_at(self.clock.monotonic() + timeout_s,
                                   lambda: None if fut.done() else fut.set_result(None))
        try:
            await fut
        finally:
            timer.cancel()
            t.waiters.discard(fut)
