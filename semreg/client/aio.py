"""`AsyncClient`: the same operations as `Client`, as coroutines on `httpx.AsyncClient`."""
from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Iterable, Mapping
from typing import Any, Self, cast

import httpx

from semreg.client.base import ClientBase, Steps, T
from semreg.client.calls import Call, WatchState, checked, describe_transport_error, instance_body, local_error
from semreg.client.errors import SemregClientError
from semreg.client.heartbeat import AsyncRegistration, LoadFn
from semreg.client.queries import SavedQueryCalls
from semreg.client.transport import backoff_s

log = logging.getLogger("semreg.client")


class AsyncClient(ClientBase, SavedQueryCalls):
    """The asynchronous registry client: every operation of `Client` is awaited here.

    `register(...)` returns an `AsyncRegistration` (`async with`, or `await` it), `watch(...)` an async
    iterator. Options as for `Client`; `sleep` is a coroutine function (default `asyncio.sleep`) and
    `http_transport` an `httpx.AsyncBaseTransport`.
    """

    def __init__(self, url: str | Iterable[str] = "http://127.0.0.1:8080", token: str | None = None,
                 timeout_s: float = 5.0, *, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 http_transport: httpx.AsyncBaseTransport | None = None, **options: Any) -> None:
        super().__init__(url, token, timeout_s, **options)
        self.sleep = sleep
        self.http = httpx.AsyncClient(headers=self.headers, follow_redirects=False, transport=http_transport)
        self._watchers: dict[Hashable, asyncio.Task[None]] = {}
        self._closed = False

    async def _call(self, steps: Steps[T]) -> T:
        try:
            call = next(steps)
            while True:
                try:
                    response = await self._send(call)
                except SemregClientError as exc:
                    call = steps.throw(exc)
                else:
                    call = steps.send(response)
        except StopIteration as stop:
            return stop.value

    async def _send(self, call: Call) -> httpx.Response:
        plan = self.transport.plan(call.is_idempotent)
        while (attempt := plan.next()) is not None:
            if attempt.delay_s > 0:
                await self.sleep(attempt.delay_s)
            try:
                response = await self.http.request(call.method, attempt.url + call.path,
                                                   timeout=call.timeout_s or self.timeout_s,
                                                   **call.request_kwargs(True))
            except httpx.TransportError as exc:
                failure = describe_transport_error(exc)
                if failure is None:
                    raise local_error(exc) from exc
                plan.failed(attempt, *failure)
                continue
            if plan.answered(attempt, response.status_code, response, call.final_statuses):
                return checked(response, call)
        if plan.last_response is not None:
            return checked(plan.last_response, call)
        raise plan.unreachable()

    def register(self, id: str, service: str, address: str, port: int, tags: Iterable[Any] = (), ttl: float = 30,
                 weight: int = 1, capacity: int | None = None, meta: Mapping[str, str] | None = None,
                 check: Mapping[str, Any] | None = None, scheme: str = "http", deregister_after: float | None = None,
                 load: LoadFn | None = None, environment: str | None = None) -> AsyncRegistration:
        """An `AsyncRegistration`: registers on `async with` (or `await`), heartbeats every ttl/3 in a
        task, deregisters on exit. `load` may be a plain or a coroutine function."""
        body = instance_body(service, address, port, tags, ttl, weight, capacity, meta, check, scheme,
                             deregister_after, environment)
        return AsyncRegistration(self, id, body, load)

    async def watch(self, s: str, p: str | None = None, o: str | None = None,
                    match: str | Iterable[str] | None = None, service: str | None = None, status: str | None = None,
                    limit: int | None = None, wait_s: float = 30.0, tags: bool = False, environment: str | None = None,
                    meta: Mapping[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
        """Yield the current discover result, then each new one; see `Client.watch`."""
        state = WatchState(wait_s)
        params = self._selected({"s": s, "p": p, "o": o, "match": match, "service": service, "status": status,
                                "limit": limit, "tags": "true" if tags else None}, environment, meta)
        while True:
            result = await cast(Awaitable[dict[str, Any] | None], self._watch_step(state, params))
            if result is not None:
                yield result

    def _start_cache_watch(self, key: Hashable, params: dict[str, Any]) -> None:
        if not self.watch_cache or self._closed or key in self._watchers:
            return
        self._watchers[key] = asyncio.create_task(self._cache_watch(key, params), name="semreg-cache-watch")

    async def _cache_watch(self, key: Hashable, params: dict[str, Any]) -> None:
        state = WatchState(self.watch_wait_s)
        failures = 0
        while not self._closed:
            try:
                await cast(Awaitable[dict[str, Any] | None], self._watch_step(state, params))
            except SemregClientError as exc:
                self.cache.unpin(key)
                state.index = None
                failures += 1
                log.debug("cache watch failed: %s", exc)
                await asyncio.sleep(backoff_s(min(failures, 8), self.transport.policy, self.rng) + 0.5)
                continue
            failures = 0
            if state.latest is not None:
                self.cache.put(key, state.latest, pinned=True)

    async def aclose(self) -> None:
        """Cancel cache watches and close connections."""
        self._closed = True
        for task in self._watchers.values():
            task.cancel()
        for task in self._watchers.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._watchers.clear()
        await self.http.aclose()

    close = aclose

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
