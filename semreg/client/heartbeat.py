"""Registration handles: keep an instance registered while the handle is open.

A heartbeat (`PUT /v1/instances/{id}/heartbeat`, with the current load when a `load` callable was
given) goes out every ttl/3, so two may be lost before the lease runs out. A heartbeat answered 404
means the registry lost the instance (a restart on a memory store, or `deregister_after` passed while
this process was cut off): the handle registers it again. Closing the handle (or leaving its `with`
block) stops the heartbeats and deregisters, once. `Registration` beats on a daemon thread,
`AsyncRegistration` on an asyncio task; what one beat does is written once, in `_beat_steps`.
"""
from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any, Self

from semreg.client.base import Steps
from semreg.client.errors import NotFound, SemregClientError

log = logging.getLogger("semreg.client")

LoadFn = Callable[[], Any]


def heartbeat_interval_s(ttl_s: float) -> float | None:
    """Seconds between heartbeats for a ttl: a third of it; None when the ttl is 0 (no expiry)."""
    return ttl_s / 3 if ttl_s and ttl_s > 0 else None


class _Handle:
    def __init__(self, client: Any, id: str, body: dict[str, Any], load: LoadFn | None) -> None:
        self.id = id
        self.body = body
        self.load = load
        self.instance: dict[str, Any] | None = None  # the last view the registry sent
        self.alive = False  # registered, and the last heartbeat was acknowledged
        self.closed = False
        self.reregistrations = 0
        self.last_error: SemregClientError | None = None
        self.interval_s = heartbeat_interval_s(float(body.get("ttl", 30)))
        self._client = client

    def _beat_steps(self, load: Any) -> Steps[None]:
        c = self._client
        try:
            renewed = yield from c.heartbeat.steps(c, self.id, load=load)
        except NotFound:
            if self.closed:
                return
            log.info("the registry lost instance %s; registering it again", self.id)
            self.instance = yield from c.put_instance.steps(c, self.id, self.body)
            self.reregistrations += 1
            return
        self.instance = {**(self.instance or {}), **renewed}

    def _failed(self, exc: SemregClientError) -> None:
        self.alive = False
        self.last_error = exc
        log.warning("heartbeat of instance %s failed: %s", self.id, exc)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id} alive={self.alive} closed={self.closed}>"


class Registration(_Handle):
    """An instance kept registered by a background thread; a context manager that deregisters on exit."""

    def __init__(self, client: Any, id: str, body: dict[str, Any], load: LoadFn | None = None) -> None:
        super().__init__(client, id, body, load)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def open(self) -> Registration:
        self.instance = self._client.put_instance(self.id, self.body)
        self.alive = True
        if self.interval_s is not None:
            self._thread = threading.Thread(target=self._run, name=f"semreg-heartbeat-{self.id}", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        assert self.interval_s is not None
        while not self._stop.wait(self.interval_s):
            self.beat()

    def _read_load(self) -> Any:
        if self.load is None:
            return None
        try:
            return self.load()
        except Exception:  # a broken load probe must not stop the heartbeats
            log.exception("the load callable of instance %s failed", self.id)
            return None

    def beat(self) -> None:
        """Send one heartbeat now (re-registering if the registry lost the instance)."""
        with self._lock:
            if self.closed:
                return
            try:
                self._client._call(self._beat_steps(self._read_load()))
            except SemregClientError as exc:
                self._failed(exc)
            else:
                self.alive, self.last_error = True, None

    def close(self) -> None:
        """Stop heartbeating and deregister; idempotent. Never raises: a failure is logged and kept."""
        with self._lock:  # waits for a heartbeat in flight, so it cannot re-register after this
            if self.closed:
                return
            self.closed = True
        self._stop.set()
        try:
            self._client.deregister(self.id)
        except NotFound:
            pass
        except SemregClientError as exc:
            self.last_error = exc
            log.warning("could not deregister instance %s: %s", self.id, exc)
        self.alive = False
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncRegistration(_Handle):
    """An instance kept registered by an asyncio task. `async with client.register(...)`, or
    `reg = await client.register(...)` and later `await reg.close()`."""

    def __init__(self, client: Any, id: str, body: dict[str, Any], load: LoadFn | None = None) -> None:
        super().__init__(client, id, body, load)
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._opened = False

    async def open(self) -> AsyncRegistration:
        if not self._opened:
            self._opened = True
            self.instance = await self._client.put_instance(self.id, self.body)
            self.alive = True
            if self.interval_s is not None:
                self._task = asyncio.create_task(self._run(), name=f"semreg-heartbeat-{self.id}")
        return self

    def __await__(self):
        return self.open().__await__()

    async def _run(self) -> None:
        assert self.interval_s is not None
        while True:
            await asyncio.sleep(self.interval_s)
            await self.beat()

    async def _read_load(self) -> Any:
        if self.load is None:
            return None
        try:
            value = self.load()
            return await value if inspect.isawaitable(value) else value
        except Exception:
            log.exception("the load callable of instance %s failed", self.id)
            return None

    async def beat(self) -> None:
        async with self._lock:
            if self.closed:
                return
            try:
                await self._client._call(self._beat_steps(await self._read_load()))
            except SemregClientError as exc:
                self._failed(exc)
            else:
                self.alive, self.last_error = True, None

    async def close(self) -> None:
        async with self._lock:
            if self.closed:
                return
            self.closed = True
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        try:
            await self._client.deregister(self.id)
        except NotFound:
            pass
        except SemregClientError as exc:
            self.last_error = exc
            log.warning("could not deregister instance %s: %s", self.id, exc)
        self.alive = False

    async def __aenter__(self) -> AsyncRegistration:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
