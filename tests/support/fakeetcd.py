"""etcd's Python client (`aetcd.Client`) as `EtcdKV` uses it, over a `MemoryKV`, on the fake clock.

What matters of the real one is reproduced: every call takes `latency_s` on the clock; closing a client
cancels the calls in flight on it, and those end in `CancelledError` in the tasks awaiting them, whose
tasks were not cancelled (what gRPC does when another task closes a shared channel); closing delivers the
end to its watches; `down()` makes calls and watch streams fail as a refused connection does. Failure
modes: `close_hangs` and `cancel_hangs` (a client's close, a watch's cancel, that never return).
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import aetcd.client
import aetcd.transactions

from semreg.clock import FakeClock
from semreg.cluster.kv import DELETE, KVUnavailable, LeaseGone, MemoryKV
from support.faultykv import first_of


class RpcError(Exception):
    """What aetcd raises when etcd does not answer."""


class FakeEtcd:
    def __init__(self, kv: MemoryKV, clock: FakeClock, latency_s: float = 0.1) -> None:
        self.kv = kv
        self.clock = clock
        self.latency_s = latency_s
        self.clients: list[FakeClient] = []
        self.close_hangs = False
        self.cancel_hangs = False
        self.cancelled_calls = 0  # calls cancelled under a task that did not ask for it

    def client(self, host: str, port: int, timeout_s: float) -> FakeClient:
        client = FakeClient(self)
        self.clients.append(client)
        return client

    def in_flight(self, call: str) -> int:
        return sum(1 for c in self.clients for name, _ in c.calls if name == call)


class FakeClient:
    def __init__(self, etcd: FakeEtcd) -> None:
        self.etcd = etcd
        self.calls: list[tuple[str, asyncio.Future]] = []
        self.closed = False
        self.close_started = False
        self.close_cancelled = False
        self._ended = asyncio.Event()

    async def connect(self) -> None:
        return None

    async def close(self) -> None:
        self.close_started = True
        if self.etcd.close_hangs:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.close_cancelled = True
                raise
        self.closed = True
        self._ended.set()
        for _, waiter in self.calls:
            if not waiter.done():
                self.etcd.cancelled_calls += 1
                waiter.cancel()  # the task awaiting it sees CancelledError, as with a closed gRPC channel

    async def _rpc(self, name: str) -> None:
        """Take `latency_s` on the clock; fail as a closed channel or an unreachable etcd does."""
        if self.closed:
            raise RpcError("the channel is closed")
        waiter = asyncio.get_running_loop().create_future()
        timer = self.etcd.clock.call_at(self.etcd.clock.monotonic() + self.etcd.latency_s,
                                        lambda: waiter.done() or waiter.set_result(None))
        self.calls.append((name, waiter))
        try:
            await waiter
        finally:
            timer.cancel()
            self.calls.remove((name, waiter))

    async def _do(self, name: str, call: Callable[[], Awaitable[Any]]) -> Any:
        await self._rpc(name)
        try:
            return await call()
        except LeaseGone as exc:
            raise RpcError(f"etcdserver: {exc}") from exc  # etcd's answer, not an outage
        except KVUnavailable as exc:
            raise RpcError(f"failed to connect to all addresses: {exc}") from exc

    async def lease(self, ttl: int) -> Any:
        return SimpleNamespace(id=await self._do("lease", lambda: self.etcd.kv.grant(ttl)))

    async def refresh_lease(self, lease: int) -> Any:
        alive = await self._do("refresh_lease", lambda: self.etcd.kv.keepalive(lease))
        return SimpleNamespace(TTL=self.etcd.kv.leases[lease][1] if alive else 0)

    async def revoke_lease(self, lease: int) -> None:
        await self._do("revoke_lease", lambda: self.etcd.kv.revoke(lease))

    async def put(self, key: bytes, value: bytes, lease: int | None = None) -> Any:
        revision = await self._do("put", lambda: self.etcd.kv.put(key.decode(), value, lease))
        return SimpleNamespace(header=SimpleNamespace(revision=revision))

    @property
    def transactions(self) -> Any:
        return aetcd.client.Transactions()

    async def transaction(self, compare: list[Any], success: list[Any], failure: list[Any]) -> Any:
        """The one transaction `EtcdKV` makes: put a key if its create revision is 0 (it does not exist)."""
        [created], [put] = compare, success
        assert isinstance(created, aetcd.transactions.Create) and created.value == 0 and not failure
        assert isinstance(put, aetcd.transactions.Put) and put.key == created.key
        made = await self._do("transaction", lambda: self.etcd.kv.create(put.key.decode(), put.value, put.lease))
        return made, []

    async def delete(self, key: bytes) -> Any:
        revision = await self._do("delete", lambda: self.etcd.kv.delete(key.decode()))
        return SimpleNamespace(header=SimpleNamespace(revision=revision))

    async def get_prefix(self, prefix: bytes) -> Any:
        revision, kvs = await self._do("get_prefix", lambda: self.etcd.kv.get_prefix(prefix.decode()))
        return Range([SimpleNamespace(key=k.encode(), value=v) for k, v in kvs], revision)

    async def watch_prefix(self, prefix: bytes, start_revision: int) -> FakeWatch:
        await self._rpc("watch_prefix")
        return FakeWatch(self, prefix.decode(), start_revision)


class Range(list):
    def __init__(self, kvs: list[Any], revision: int) -> None:
        super().__init__(kvs)
        self.header = SimpleNamespace(revision=revision)


class FakeWatch:
    """A watch stream: its events, an `RpcError` when etcd goes down, the end when its client closes."""

    def __init__(self, client: FakeClient, prefix: str, start_revision: int) -> None:
        self.client = client
        self.prefix = prefix
        self.start_revision = start_revision
        self.cancelled = False

    async def cancel(self) -> None:
        if self.client.etcd.cancel_hangs:
            await asyncio.Event().wait()
        self.cancelled = True

    def __aiter__(self) -> Any:
        return self._events()

    async def _events(self) -> Any:
        inner = self.client.etcd.kv.watch_prefix(self.prefix, self.start_revision).__aiter__()
        try:
            while not self.client.closed and not self.cancelled:
                following = asyncio.ensure_future(inner.__anext__())
                await first_of(following, self.client._ended)
                if following.cancelled():
                    return  # the client closed: the stream ends without an error, as aetcd's does
                try:
                    event = following.result()
                except KVUnavailable as exc:
                    raise RpcError(f"the watch stream broke: {exc}") from exc
                kind = "EventType.DELETE" if event.kind == DELETE else "EventType.PUT"
                yield SimpleNamespace(kind=kind, kv=SimpleNamespace(key=event.key.encode(), value=event.value,
                                                                   mod_revision=event.revision))
        finally:
            await inner.aclose()
