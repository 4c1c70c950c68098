"""`Client`: the blocking client, on `httpx.Client`; safe to share between threads."""
from __future__ import annotations

import logging
import socket
import threading
import time
import weakref
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import Any, Self

import httpx

from semreg.client.base import ClientBase, Steps, T
from semreg.client.calls import Call, WatchState, checked, describe_transport_error, instance_body, local_error
from semreg.client.errors import SemregClientError
from semreg.client.heartbeat import LoadFn, Registration
from semreg.client.queries import SavedQueryCalls
from semreg.client.transport import backoff_s

log = logging.getLogger("semreg.client")


class Client(ClientBase, SavedQueryCalls):
    """A registry client. `url`: one URL, a list, or a comma-separated string of them.

    Keyword options: `retry` (a `RetryPolicy`), `cache_ttl_s` / `cache_jitter` (the discover cache;
    0 turns freshness caching off, the stale fallback stays), `watch_cache` (keep cached discover
    results current with background watches), `clock`, `sleep` and `rng` (injected in tests),
    `http_transport` (an `httpx.BaseTransport`, e.g. `httpx.MockTransport`), `headers`, `environment`
    (registrations go to it, and reads see it, unless a call names another; default: the registry's).
    """

    def __init__(self, url: str | Iterable[str] = "http://127.0.0.1:8080", token: str | None = None,
                 timeout_s: float = 5.0, *, sleep: Callable[[float], None] = time.sleep,
                 http_transport: httpx.BaseTransport | None = None, **options: Any) -> None:
        super().__init__(url, token, timeout_s, **options)
        self.sleep = sleep
        self.http = httpx.Client(headers=self.headers, follow_redirects=False, transport=http_transport)
        self._closed = threading.Event()
        self._watchers: dict[Hashable, threading.Thread] = {}
        self._watchers_lock = threading.Lock()
        # Sockets of the connections this client opened, so close() can wake a thread blocked in a
        # long poll: closing a socket does not interrupt a recv() in another thread; shutdown() does.
        self._sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()

    # -- driving operations ------------------------------------------------------------------------
    def _call(self, steps: Steps[T]) -> T:
        try:
            call = next(steps)
            while True:
                try:
                    response = self._send(call)
                except SemregClientError as exc:
                    call = steps.throw(exc)
                else:
                    call = steps.send(response)
        except StopIteration as stop:
            return stop.value

    def _send(self, call: Call) -> httpx.Response:
        plan = self.transport.plan(call.is_idempotent)
        while (attempt := plan.next()) is not None:
            if attempt.delay_s > 0:
                self.sleep(attempt.delay_s)
            try:
                response = self.http.request(call.method, attempt.url + call.path,
                                             timeout=call.timeout_s or self.timeout_s,
                                             extensions={"trace": self._trace}, **call.request_kwargs(False))
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

    # -- registration and watching -----------------------------------------------------------------
    def register(self, id: str, service: str, address: str, port: int, tags: Iterable[Any] = (), ttl: float = 30,
                 weight: int = 1, capacity: int | None = None, meta: Mapping[str, str] | None = None,
                 check: Mapping[str, Any] | None = None, scheme: str = "http", deregister_after: float | None = None,
                 load: LoadFn | None = None, environment: str | None = None) -> Registration:
        """Register (one request, however many tags) and keep the instance alive with heartbeats every
        ttl/3 on a daemon thread; use the handle as a context manager or call `close()` to deregister."""
        body = instance_body(service, address, port, tags, ttl, weight, capacity, meta, check, scheme,
                             deregister_after, environment)
        return Registration(self, id, body, load).open()

    def watch(self, s: str, p: str | None = None, o: str | None = None, match: str | Iterable[str] | None = None,
              service: str | None = None, status: str | None = None, limit: int | None = None,
              wait_s: float = 30.0, tags: bool = False, environment: str | None = None,
              meta: Mapping[str, str] | None = None) -> Iterator[dict[str, Any]]:
        """Yield the current discover result, then each new one as the registry reports a change.

        Raises `Unreachable` when no registry answers; close the generator to stop watching.
        """
        state = WatchState(wait_s)
        params = self._selected({"s": s, "p": p, "o": o, "match": match, "service": service, "status": status,
                                "limit": limit, "tags": "true" if tags else None}, environment, meta)
        while True:
            result = self._watch_step(state, params)
            if result is not None:
                yield result

    def _start_cache_watch(self, key: Hashable, params: dict[str, Any]) -> None:
        if not self.watch_cache or self._closed.is_set():
            return
        with self._watchers_lock:
            if key in self._watchers:
                return
            thread = self._watchers[key] = threading.Thread(target=self._cache_watch, args=(key, params),
                                                            daemon=True, name="semreg-cache-watch")
        thread.start()

    def _cache_watch(self, key: Hashable, params: dict[str, Any]) -> None:
        """Long-poll one cached query and keep its entry pinned fresh; on failure, unpin and back off."""
        state = WatchState(self.watch_wait_s)
        failures = 0
        while not self._closed.is_set():
            try:
                self._watch_step(state, params)
            except Exception as exc:
                if self._closed.is_set():
                    return
                self.cache.unpin(key)
                state.index = None
                failures += 1
                log.debug("cache watch failed: %s", exc)
                self._closed.wait(backoff_s(min(failures, 8), self.transport.policy, self.rng) + 0.5)
                continue
            failures = 0
            if state.latest is not None and not self._closed.is_set():
                # a wait that ended without a change still brings newer loads and leases
                self.cache.put(key, state.latest, pinned=True)

    def _trace(self, event: str, info: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.complete":
            sock = getattr(info.get("return_value"), "get_extra_info", lambda name: None)("socket")
            if sock is not None:
                self._sockets.add(sock)

    # -- life cycle --------------------------------------------------------------------------------
    def close(self) -> None:
        """Close connections and stop cache watches, interrupting their long polls."""
        self._closed.set()
        for sock in list(self._sockets):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the pool
        self.http.close()  # before joining: a watch retrying now fails at once instead of polling again
        with self._watchers_lock:
            watchers = list(self._watchers.values())
        for thread in watchers:
            if thread is not threading.current_thread():
                thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
