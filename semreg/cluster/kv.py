"""The key-value store the cluster keeps its shared state in: etcd, or a fake one for tests.

What the cluster needs of it, as etcd offers it: keys on a lease that lapses unless kept alive, reads of
a prefix at a revision, and a watch of a prefix from a revision on. `EtcdKV` talks to etcd's gRPC API
(`aetcd`) and moves to the next endpoint when one fails. `MemoryKV` is the same behaviour in memory,
with leases that lapse on the injected clock, so membership is tested without a network or a delay.

Errors: anything that means "etcd cannot answer now" is raised as `KVUnavailable`.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from semreg.clock import Clock

log = logging.getLogger("semreg.kv")

PUT, DELETE = "put", "delete"


class KVUnavailable(Exception):
    """The store cannot answer (down, unreachable, or our lease is gone)."""


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


class EtcdKV:
    """etcd over gRPC; each call goes to the current endpoint and, on failure, the next one is used."""

    def __init__(self, endpoints: list[tuple[str, int]], timeout_s: float = 5.0) -> None:
        self.endpoints = endpoints
        self.timeout_s = timeout_s
        self._current = 0
        self._client: Any = None

    async def _conn(self) -> Any:
        if self._client is None:
            import aetcd

            host, port = self.endpoints[self._current]
            client = aetcd.Client(host=host, port=port, timeout=int(max(1, self.timeout_s)), connect_wait_timeout=2)
            try:
                await asyncio.wait_for(client.connect(), self.timeout_s)
            except Exception as exc:
                await self._drop(client)
                raise KVUnavailable(f"etcd at {host}:{port} cannot be reached: {exc}") from exc
            self._client = client
        return self._client

    async def _drop(self, client: Any = None) -> None:
        client = client or self._client
        self._client = None
        self._current = (self._current + 1) % len(self.endpoints)
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    async def _call(self, fn: str, *args: Any, **kw: Any) -> Any:
        for _ in range(len(self.endpoints)):
            client = await self._conn()
            try:
                return await asyncio.wait_for(getattr(client, fn)(*args, **kw), self.timeout_s)
            except (asyncio.CancelledError, KeyboardInterrupt):
                raise
            except Exception as exc:
                log.warning("etcd call failed", extra={"call": fn, "error": f"{type(exc).__name__}: {exc}"[:300]})
                await self._drop()
        raise KVUnavailable(f"no etcd endpoint answered {fn}")

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

    async def delete(self, key: str) -> int:
        response = await self._call("delete", key.encode())
        return int(response.header.revision) if response is not None else 0

    async def get_prefix(self, prefix: str) -> tuple[int, list[tuple[str, bytes]]]:
        response = await self._call("get_prefix", prefix.encode())
        return int(response.header.revision), [(kv.key.decode(), bytes(kv.value)) for kv in response]

    async def watch_prefix(self, prefix: str, start_revision: int) -> AsyncIterator[Event]:
        client = await self._conn()
        try:
            watch = await asyncio.wait_for(client.watch_prefix(prefix.encode(), start_revision=start_revision),
                                           self.timeout_s)
        except Exception as exc:
            await self._drop()
            raise KVUnavailable(f"etcd watch failed: {exc}") from exc
        try:
            async for event in watch:
                kind = PUT if str(event.kind).upper().endswith("PUT") else DELETE
                yield Event(kind, event.kv.key.decode(), bytes(event.kv.value), int(event.kv.mod_revision))
        except (asyncio.CancelledError, GeneratorExit):
            raise
        except Exception as exc:
            await self._drop()
            raise KVUnavailable(f"etcd watch ended: {exc}") from exc
        finally:
            with contextlib.suppress(Exception):
                await watch.cancel()

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()


class MemoryKV:
    """etcd's semantics in memory, leases lapsing on `clock`; `down` makes every call fail."""

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
            raise KVUnavailable("requested lease not found")
        self.data[key] = (value, lease)
        revision = self._bump()
        self._emit(Event(PUT, key, value, revision))
        return revision

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
        self.down = False
