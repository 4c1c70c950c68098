"""The server's app in this process, reached over HTTP through `httpx.ASGITransport`, on a fake clock.

`InProcess` runs the app (its lifespan included) on an event loop of its own thread, so that tests keep
a plain blocking style: `srv.client().get(...)` sends a request and returns its response. Time is a
`FakeClock`: leases expire, checks fall due and blocking reads time out only when the test calls
`srv.advance(seconds)`, and `srv.settle()` returns once the work a change started (watch recomputation)
is done, so "nothing woke" is checked as a fact, not after a delay.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import httpx

from semreg.clock import FakeClock
from semreg.config import Settings
from semreg.node import Node
from semreg.registry.health import HealthChecker
from semreg.registry.probes import Probe
from semreg.storage.store import Store

BASE_URL = "http://semreg.test"
THREAD_PREFIX = "in-process-app"  # threads that live as long as an app a module shares


class Client:
    """A blocking HTTP client over the app (the same calls as `httpx.Client`)."""

    def __init__(self, server: InProcess, headers: dict[str, str] | None = None, app: str = "public") -> None:
        self.server = server
        self.headers = headers or {}
        self.app = app  # which of the node's apps it calls: the public one, or the Consul API's

    def request(self, method: str, url: str, **kw: Any) -> httpx.Response:
        return self.submit(method, url, **kw).result(60)

    def submit(self, method: str, url: str, **kw: Any) -> concurrent.futures.Future:
        """Send without waiting for the answer (a blocking read the test will wake)."""
        headers = {**self.headers, **kw.pop("headers", {})}
        http = self.server.http if self.app == "public" else self.server.consul_http
        return self.server.run_soon(http.request(method, url, headers=headers, **kw))

    def get(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("GET", url, **kw)

    def put(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("PUT", url, **kw)

    def post(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("POST", url, **kw)

    def delete(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("DELETE", url, **kw)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class InProcess:
    def __init__(self, settings: Settings | None = None, *, probe: Probe | None = None, store: Store | None = None,
                 **overrides: Any) -> None:
        base = settings or Settings(data_dir=None)
        # no shedding by the real loop's lateness in a world of fake time (tests of shedding turn it on)
        self.settings = base.replace(**{"sparql_prestart": False, "shed_late_share": 0, **overrides})
        self.clock = FakeClock()
        health = HealthChecker(lambda *a: None, self.clock, probe=probe) if probe is not None else None
        self.node = Node(self.settings, store=store, clock=self.clock, health=health)
        self.app = self.node.app
        self._loop = asyncio.new_event_loop()
        # the loop's worker threads (reasoning, store waits) live as long as the app, under one name
        self._executor = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix=f"{THREAD_PREFIX}-worker")
        self._loop.set_default_executor(self._executor)
        self._thread = threading.Thread(target=self._loop.run_forever, name=THREAD_PREFIX, daemon=True)
        self._lifespan: Any = None
        self._listening: Any = None  # (uvicorn server, its serve() future) once `listen` was called
        self.http: httpx.AsyncClient
        self.consul_http: httpx.AsyncClient

    def start(self) -> InProcess:
        self._thread.start()
        try:
            self.run(self._open())
        except BaseException:
            self._end_loop()
            raise
        return self

    async def _open(self) -> None:
        self._lifespan = self.app.router.lifespan_context(self.app)
        await self._lifespan.__aenter__()
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(self.app, client=("127.0.0.1", 40000)),
                                      base_url=BASE_URL, timeout=60)
        if self.node.consul_app is not None:  # started with consul_listen: its app, served here too
            self.consul_http = httpx.AsyncClient(transport=httpx.ASGITransport(self.node.consul_app,
                                                                               client=("127.0.0.1", 40001)),
                                                 base_url=BASE_URL, timeout=60)

    def listen(self) -> str:
        """Serve the app on a loopback port too, through uvicorn as `semreg serve` does, for programs such as
        curl (still on the fake clock); returns its base URL."""
        import uvicorn

        from support.server import free_port, wait_for

        port = free_port()
        # no `server:` header, as semreg.node.listeners serves: the documentation shows the headers a reader gets
        server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=port, lifespan="off", log_config=None,
                                               access_log=False, server_header=False))
        self._listening = (server, self.run_soon(server.serve()))
        wait_for(lambda: server.started or self._listening[1].done(), what="uvicorn listening")
        if not server.started:
            self._listening[1].result()  # it failed: say why
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        if self._listening is not None:
            server, serving = self._listening
            server.should_exit = True
            serving.result(30)
        try:
            self.run(self._close())
        finally:
            self._end_loop()

    def _end_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._executor.shutdown(wait=True)

    async def _close(self) -> None:
        await self.http.aclose()
        if self.node.consul_app is not None:
            await self.consul_http.aclose()
        await self.node.coordinator.hub.settle()
        await self._lifespan.__aexit__(None, None, None)

    def client(self, token: str | None = None) -> Client:
        return Client(self, {"Authorization": f"Bearer {token}"} if token else None)

    def consul(self, token: str | None = None) -> Client:
        """A client of the node's Consul-compatible app (the node started with `consul_listen`), with its token in
        `X-Consul-Token` as Consul's clients send it."""
        return Client(self, {"X-Consul-Token": token} if token else None, app="consul")

    # -- the loop and the clock ------------------------------------------------------------------------
    def run_soon(self, coro: Coroutine) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def run(self, coro: Coroutine, timeout_s: float = 60) -> Any:
        return self.run_soon(coro).result(timeout_s)

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` on the app's loop (what touches the node's state must)."""
        async def on_loop() -> Any:
            return fn()
        return self.run(on_loop())

    def advance(self, seconds: float) -> None:
        """Move the clock (running the timers that fall due), then let what they started finish."""
        self.call(lambda: self.clock.advance(seconds))
        self.settle()

    def settle(self) -> None:
        """Return once pending loop work is done: callbacks posted from other threads, recomputations."""
        async def settled() -> None:
            for _ in range(3):
                await asyncio.sleep(0)
            await self.node.coordinator.hub.settle()
        self.run(settled())

    def __enter__(self) -> InProcess:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
