"""The key-value store the cluster keeps its shared state in: etcd, or a fake one for tests.

What the cluster needs of it, as etcd offers it: keys on a lease that lapses unless kept alive, reads of
a prefix at a revision, and a watch of a prefix from a revision on. `EtcdKV` talks to etcd's gRPC API
(`aetcd`) and moves to the next endpoint when one fails. `MemoryKV` is the same behaviour in memory,
with leases that lapse on the injected clock, so membership is tested without a network or a delay.

Errors: anything that means "etcd cannot answer now" is raised as `KVUnavailable`, after at most the
store's timeout: no call, watch or close waits on etcd forever.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from semreg.clock import Clock, Interrupted, LoopClock, within

log = logging.getLogger("semreg.kv")

PUT, DELETE = "put", "delete"
LEASE_GONE = "requested lease not found"  # etcd's words (ErrGRPCLeaseNotFound)


class KVUnavailable(Exception):
    """The store cannot answer (down, unreachable, or our lease is gone)."""


class LeaseGone(KVUnavailable):
    """The store answered: the lease a write named has lapsed or was revoked (etcd's "requested lease not
    found"), an answer rather than an outage, so it is raised at once, without trying another endpoint."""


@dataclass(frozen=True)
class Event:
    kind: str  # put | delete
    key: str
    value: bytes
    revision: int


class KV(Protocol):
    async def grant(self, ttl_s: int) -> int: ...

    async def keepalive(self, lease: int) -> bool: ...  # False: the lease has lapsed

    async def revoke(self, lease: int) -> None: ...

    async def put(self, key: str, value: bytes, lease: int | None = None) -> int: ...

    async def create(self, key: str, value: bytes, lease: int | None = None) -> bool: ...  # False: it exists

    async def delete(self, key: str) -> int: ...

    async def get_prefix(self, prefix: str) -> tuple[int, list[tuple[str, bytes]]]: ...

    def watch_prefix(self, prefix: str, start_revision: int) -> AsyncIterator[Event]: ...

    async def close(self) -> None: ...


def parse_endpoints(urls: str) -> list[tuple[str, int]]:
    """`http://127.0.0.1:2379,127.0.0.1:22379` → [(host, port), ...]."""
    out = []
    for url in urls.split(","):
        url = url.strip()
        if not url:
            continue
        hostport = url.split("://", 1)[-1].rstrip("/")
        host, sep, port = hostport.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"'{url}' is not an etcd endpoint; give http://HOST:PORT")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("give at least one etcd endpoint, e.g. http://127.0.0.1:2379")
    return out


class _Connection:
    """One client of `EtcdKV`, shared by every call until one of them fails; `retired` ends its watches."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.retired = asyncio.Event()


def _aetcd_client(host: str, port: int, timeout_s: float) -> Any:
    import aetcd

    return aetcd.Client(host=host, port=port, timeout=int(max(1, timeout_s)), connect_wait_timeout=2)


class EtcdKV:
    """etcd over gRPC; each call goes to the current endpoint and, on failure, the next one is used.

    Every call, watch start, watch cancel and close is bounded by `timeout_s` on `clock` (`within`). One
    client serves every task; when a call on it fails it is retired: closed in the background, which makes
    gRPC cancel the other tasks' calls on it. Those end in `CancelledError` though their tasks were not
    cancelled: they are failures of the call (`KVUnavailable`), never a reason for a task to stop."""

    def __init__(self, endpoints: list[tuple[str, int]], timeout_s: float = 5.0, *, clock: Clock | None = None,
                 client: Callable[[str, int, float], Any] = _aetcd_client) -> None:
        self.endpoints = endpoints
        self.timeout_s = timeout_s
        self.clock: Clock = clock or LoopClock()
        self._new_client = client
        self._current = 0
        self._connection: _Connection | None = None
        self._closing: set[asyncio.Task[None]] = set()

    async def _conn(self) -> _Connection:
        if self._connection is None:
            host, port = self.endpoints[self._current]
            connection = _Connection(self._new_client(host, port, self.timeout_s))
            try:
                await within(self.clock, connection.client.connect(), self.timeout_s)
            except Exception as exc:
                self._current = (self._current + 1) % len(self.endpoints)
                self._retire(connection)
                raise KVUnavailable(f"etcd at {host}:{port} cannot be reached: {_said(exc)}") from exc
            if self._connection is not None:  # another task connected meanwhile: share its client
                self._retire(connection)
            else:
                self._connection = connection
        assert self._connection is not None
        return self._connection

    def _drop(self, connection: _Connection) -> None:
        """A call on `connection` failed: the next call opens a client to the next endpoint."""
        if connection is self._connection:
            self._connection = None
            self._current = (self._current + 1) % len(self.endpoints)
        self._retire(connection)

    def _retire(self, connection: _Connection) -> None:
        if connection.retired.is_set():
            return
        connection.retired.set()
        task = asyncio.get_running_loop().create_task(self._close(connection.client))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close(self, client: Any) -> None:
        try:
            await within(self.clock, client.close(), self.timeout_s)
        except Exception as exc:
            log.warning("an etcd client did not close; left behind", extra={"error": _said(exc)})

    async def _call(self, fn: str, *args: Any, **kw: Any) -> Any:
        return await self._call_with(lambda client: getattr(client, fn)(*args, **kw), fn)

    async def _call_with(self, call: Callable[[Any], Awaitable[Any]], name: str) -> Any:
        """`call(client)` on the first endpoint that answers; `LeaseGone` when etcd says the lease is."""
        for _ in range(len(self.endpoints)):
            connection = await self._conn()
            try:
                return await within(self.clock, call(connection.client), self.timeout_s)
            except Exception as exc:
                if LEASE_GONE in str(exc):
                    raise LeaseGone(f"etcd: {LEASE_GONE}") from exc
                log.warning("etcd call failed", extra={"call": name, "error": _said(exc)})
                self._drop(connection)
        raise KVUnavailable(f"no etcd endpoint answered {name}")

    async def grant(self, ttl_s: int) -> int:
        lease = await self._call("lease", ttl_s)
        return int(lease.id)

    async def keepalive(self, lease: int) -> bool:
        response = await self._call("refresh_lease", lease)
        return int(getattr(response, "TTL", 0) or 0) > 0

    async def revoke(self, lease: int) -> None:
        await self._call("revoke_lease", lease)

    async def put(self, key: str, value: bytes, lease: int | None = None) -> int:
        response = await self._call("put", key.encode(), value, lease=lease)
        return int(response.header.revision)

    async def create(self, key: str, value: bytes, lease: int | None = None) -> bool:
        """Put `key` only if it does not exist (one etcd transaction: its create revision is 0)."""
        async def txn(client: Any) -> Any:
            ops = client.transactions
            return await client.transaction(compare=[ops.create(key.encode()) == 0],
                                            success=[ops.put(key.encode(), value, lease=lease)], failure=[])
        succeeded, _ = await self._call_with(txn, "transaction")
        return bool(succeeded)

    async def delete(self, key: str) -> int:
        response = await self._call("delete", key.encode())
        return int(response.header.revision) if response is not None else 0

    async def get_prefix(self, prefix: str) -> tuple[int, list[tuple[str, bytes]]]:
        response = await self._call("get_prefix", prefix.encode())
        return int(response.header.revision), [(kv.key.decode(), bytes(kv.value)) for kv in response]

    async def watch_prefix(self, prefix: str, start_revision: int) -> AsyncIterator[Event]:
        """The events from `start_revision` on; `KVUnavailable` when the watch or its client ends (a
        compacted revision, etcd gone, the client retired after another call failed)."""
        connection = await self._conn()
        try:
            watch = await within(self.clock, connection.client.watch_prefix(prefix.encode(),
                                                                            start_revision=start_revision),
                                 self.timeout_s)
        except Exception as exc:
            self._drop(connection)
            raise KVUnavailable(f"etcd watch failed: {_said(exc)}") from exc
        try:
            events = watch.__aiter__()
            while True:
                event = await _next_event(events, connection)
                kind = PUT if str(event.kind).upper().endswith("PUT") else DELETE
                yield Event(kind, event.kv.key.decode(), bytes(event.kv.value), int(event.kv.mod_revision))
        except (asyncio.CancelledError, GeneratorExit):
            raise
        except Exception as exc:
            self._drop(connection)
            raise KVUnavailable(f"etcd watch ended: {_said(exc)}") from exc
        finally:
            with contextlib.suppress(Exception):
                await within(self.clock, watch.cancel(), self.timeout_s)

    async def close(self) -> None:
        if self._connection is not None:
            self._retire(self._connection)
            self._connection = None
        if self._closing:
            await asyncio.wait(set(self._closing))


async def _next_event(events: AsyncIterator[Any], connection: _Connection) -> Any:
    """The watch's next event; an error once its client is retired (a retired client's watch may never
    hear of it) or once the watch ends."""
    following = asyncio.ensure_future(events.__anext__())
    retired = asyncio.ensure_future(connection.retired.wait())
    try:
        await asyncio.wait((following, retired), return_when=asyncio.FIRST_COMPLETED)
    finally:
        retired.cancel()
        if not following.done():
            following.cancel()
            following.add_done_callback(lambda f: f.cancelled() or f.exception())
    if not following.done():
        raise KVUnavailable("the watch's etcd client was closed")
    if following.cancelled():
        raise Interrupted("the watch was cancelled under it")
    try:
        return following.result()
    except StopAsyncIteration:
        raise KVUnavailable("the watch ended") from None


def _said(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


class MemoryKV:
    """etcd's semantics in memory, leases lapsing on `clock`; `fail()` makes every call fail and ends every
    watch, until `recover()`."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.revision = 1
        self.data: dict[str, tuple[bytes, int | None]] = {}  # key → (value, lease)
        self.leases: dict[int, tuple[float, int]] = {}  # id → (expires at, ttl)
        self._next_lease = 100
        self._changed = asyncio.Event()
        self.history: list[Event] = []
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise KVUnavailable("the store is down")
        self._expire()

    def _expire(self) -> None:
        now = self.clock.monotonic()
        for lease, (expires, _) in list(self.leases.items()):
            if expires <= now:
                del self.leases[lease]
                for key, (_, owner) in list(self.data.items()):
                    if owner == lease:
                        self._emit(Event(DELETE, key, b"", self._bump()))
                        del self.data[key]

    def _bump(self) -> int:
        self.revision += 1
        return self.revision

    def _emit(self, event: Event) -> None:
        self.history.append(event)
        self._changed.set()
        self._changed = asyncio.Event()

    def tick(self) -> None:
        """Let leases lapse now (the test moved the clock)."""
        if not self.down:
            self._expire()

    async def grant(self, ttl_s: int) -> int:
        self._check()
        self._next_lease += 1
        self.leases[self._next_lease] = (self.clock.monotonic() + ttl_s, ttl_s)
        return self._next_lease

    async def keepalive(self, lease: int) -> bool:
        self._check()
        if lease not in self.leases:
            return False
        ttl = self.leases[lease][1]
        self.leases[lease] = (self.clock.monotonic() + ttl, ttl)
        return True

    async def revoke(self, lease: int) -> None:
        self._check()
        self.leases[lease] = (self.clock.monotonic(), 0)
        self._expire()

    async def put(self, key: str, value: bytes, lease: int | None = None) -> int:
        self._check()
        if lease is not None and lease not in self.leases:
            raise LeaseGone(LEASE_GONE)
        self.data[key] = (value, lease)
        revision = self._bump()
        self._emit(Event(PUT, key, value, revision))
        return revision

    async def create(self, key: str, value: bytes, lease: int | None = None) -> bool:
        self._check()
        if key in self.data:
            return False
        await self.put(key, value, lease)
        return True

    async def delete(self, key: str) -> int:
        self._check()
        if key not in self.data:
            return self.revision
        del self.data[key]
        revision = self._bump()
        self._emit(Event(DELETE, key, b"", revision))
        return revision

    async def get_prefix(self, prefix: str) -> tuple[int, list[tuple[str, bytes]]]:
        self._check()
        return self.revision, sorted((k, v) for k, (v, _) in self.data.items() if k.startswith(prefix))

    async def watch_prefix(self, prefix: str, start_revision: int) -> AsyncIterator[Event]:
        self._check()
        seen = start_revision - 1
        while True:
            for event in self.history:
                if event.revision > seen and event.key.startswith(prefix):
                    seen = event.revision
                    yield event
            waiter = self._changed
            await waiter.wait()
            if self.down:
                raise KVUnavailable("the store went down")

    async def close(self) -> None:
        return None

    def fail(self) -> None:
        """Go down: every call fails and watches end, until `recover`."""
        self.down = True
        self._changed.set()
        self._changed = asyncio.Event()

    def recover(self) -> None:
        """Answer again. As etcd's leader does once elected, give every lease its whole time again: nobody
        lost their lease to an outage of etcd itself."""
        self.down = False
        now = self.clock.monotonic()
        self.leases = {lease: (now + ttl, ttl) for lease, (_, ttl) in self.leases.items()}
