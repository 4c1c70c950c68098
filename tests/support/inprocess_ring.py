"""A ring of nodes in this process: every node's app on one event loop (a thread of its own), one fake clock
and one etcd in memory (`MemoryKV`) for all, each node reaching that etcd through a `FaultyKV` the test can
cut, hold or mute. Nodes reach each other over loopback ports (each node's cluster listener, served by uvicorn
as `semreg serve` serves it); a test's requests go through `httpx.ASGITransport`. Leases lapse only when the
test calls `advance(seconds)`.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from semreg.clock import FakeClock
from semreg.cluster import tls
from semreg.cluster.kv import MemoryKV
from semreg.config import Settings
from semreg.node import Node
from support.faultykv import FaultyKV
from support.paths import ONTOLOGIES
from support.server import free_port, wait_for

SECRET = "in-process-ring-secret-0123456789abcdef"
WORKER_PREFIX = "in-process-ring-worker"  # the ring loop's executor threads, started on demand


class RingNode:
    def __init__(self, name: str, ring: InProcessRing, port: int, **overrides: Any) -> None:
        self.name = name
        self.ring = ring
        self.tls = tls.server_options(overrides["cluster_tls_cert"], overrides["cluster_tls_key"],
                                      overrides["cluster_tls_ca"]) if "cluster_tls_cert" in overrides else {}
        self.url = f"{'https' if self.tls else 'http'}://127.0.0.1:{port}"
        self.port = port
        self.kv = FaultyKV(ring.etcd)
        settings = Settings(data_dir=None).replace(**{
            "sparql_prestart": False, "etcd": "memory", "cluster": "test", "node_id": name, "advertise": self.url,
            "replicas": ring.replicas, "member_lease_ttl_s": ring.lease_s, "cluster_secret_file": ring.secret,
            "shed_late_share": 0,  # no shedding by the real loop's lateness in a world of fake time
            **overrides})
        self.node = Node(settings, clock=ring.clock, kv=self.kv)
        self.app = self.node.app
        self.cluster = self.node.cluster
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(self.app, client=("127.0.0.1", 40000)),
                                      base_url=f"http://{name}.test", timeout=60)
        # the node-to-node listener's app (served on `port`, which the others reach), for a test's requests
        self.internal = httpx.AsyncClient(transport=httpx.ASGITransport(self.node.cluster_app,
                                                                        client=("127.0.0.1", 40001)),
                                          base_url=f"http://{name}.cluster.test", timeout=60)
        self._lifespan: Any = None
        self._server: Any = None
        self._serving: Any = None

    async def open(self) -> None:
        self._lifespan = self.app.router.lifespan_context(self.app)
        await self._lifespan.__aenter__()
        await self.listen()

    async def listen(self) -> None:
        """Serve the node-to-node listener on `port` (again, after `stop_listening`)."""
        self._server = uvicorn.Server(uvicorn.Config(self.node.cluster_app, host="127.0.0.1", port=self.port,
                                                     lifespan="off", **self.tls, log_config=None, access_log=False,
                                                     # as the node's own cluster listener (semreg.node.listeners):
                                                     # a peer's long poll in flight never holds a close
                                                     timeout_graceful_shutdown=5))
        self._serving = asyncio.ensure_future(self._server.serve())
        # answering before the caller goes on: a test that moves the ring's clock meanwhile would otherwise have
        # the others back off (in ring time) for as long as a loaded machine takes to bind the socket
        while not self._server.started and not self._serving.done():
            await asyncio.sleep(0.005)

    async def close(self) -> None:
        self.node.stopping()
        await self.stop_listening()
        await self.http.aclose()
        await self.internal.aclose()
        await self._lifespan.__aexit__(None, None, None)

    async def stop_listening(self) -> None:
        """Close the node-to-node listener, the node itself going on: to the others it no longer answers
        (a connection is refused), as a node that is down."""
        if self._server is not None:
            self._server.should_exit = True
            while not self._serving.done():  # the others' followers ask again at once: answer them too
                self.node.changelog.release()
                await asyncio.wait((self._serving,), timeout=0.01)

    def request(self, method: str, url: str, **kw: Any) -> httpx.Response:
        return self.ring.run(self.http.request(method, url, **kw))

    def internal_request(self, method: str, url: str, **kw: Any) -> httpx.Response:
        """A request to the node-to-node listener."""
        return self.ring.run(self.internal.request(method, url, **kw))

    def put(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("PUT", url, **kw)

    def get(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("GET", url, **kw)

    def delete(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("DELETE", url, **kw)

    def readyz(self) -> tuple[int, dict[str, Any]]:
        r = self.get("/readyz")
        return r.status_code, r.json()


class InProcessRing:
    def __init__(self, workdir: Path, *, replicas: int = 2, lease_s: int = 9) -> None:
        self.clock = FakeClock()
        self.etcd = MemoryKV(self.clock)
        self.replicas = replicas
        self.lease_s = lease_s
        workdir.mkdir(parents=True, exist_ok=True)
        self.secret = workdir / "cluster.secret"
        self.secret.write_text(SECRET + "\n")
        self.nodes: dict[str, RingNode] = {}
        self._loop = asyncio.new_event_loop()
        self._executor = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix=WORKER_PREFIX)
        self._loop.set_default_executor(self._executor)
        self._thread = threading.Thread(target=self._loop.run_forever, name="in-process-ring", daemon=True)
        self._thread.start()

    def add(self, name: str, **overrides: Any) -> RingNode:
        """A node that joins the ring; returned once it is ready."""
        node = self.call(lambda: RingNode(name, self, free_port(), **overrides))
        self.nodes[name] = node
        self.run(node.open())
        wait_for(lambda: node.node.ready, 30, f"{name} ready")
        self.settle()
        return node

    def upload(self, node: RingNode) -> None:
        """The example ontology through `node`: answered once every member applied it, on the ring's clock."""
        pending = self.start(node.http.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                                           headers={"Content-Type": "text/turtle"}))
        while not pending.done():
            self.advance(0.1, step=0.1)
        assert pending.result().status_code in (200, 201)

    def remove(self, name: str) -> None:
        """Stop node `name` as SIGTERM does: hand its records over, say goodbye."""
        self.run(self.nodes.pop(name).close())
        self.settle()

    def close(self) -> None:
        try:
            for name in list(self.nodes):
                self.remove(name)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()
            self._executor.shutdown(wait=True)

    # -- the loop and the clock ------------------------------------------------------------------------
    def run(self, coro: Coroutine, timeout_s: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout_s)

    def start(self, coro: Coroutine) -> concurrent.futures.Future:
        """`coro` on the ring's loop, not waited for (one that waits on the clock: the test advances it)."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` on the ring's loop (what touches a node's state must)."""
        async def on_loop() -> Any:
            return fn()
        return self.run(on_loop())

    def settle(self) -> None:
        async def settled() -> None:
            for _ in range(20):
                await asyncio.sleep(0)
            for node in self.nodes.values():
                await node.node.coordinator.hub.settle()
        self.run(settled())

    def advance(self, seconds: float, step: float = 0.5) -> None:
        """Move the clock in steps (leases lapse, loops wake), letting what each step started finish."""
        moved = 0.0
        while moved < seconds:
            self.call(lambda: (self.clock.advance(step), self.etcd.tick()))
            moved += step
            self.settle()

    def answered(self, node: RingNode, method: str, url: str, **kw: Any) -> httpx.Response:
        """The answer to a request that waits on the ring's clock (an ontology change answers once every member
        applied it), the clock moving meanwhile."""
        pending = self.start(node.http.request(method, url, **kw))
        while not pending.done():
            self.advance(0.1, step=0.1)
            if not pending.done():
                concurrent.futures.wait([pending], timeout=0.05)
        return pending.result()

    def converged(self) -> bool:
        checksums = {n.cluster.ring.checksum for n in self.nodes.values()}
        return len(checksums) == 1 and all(
            sorted(n.cluster.ring.members) == sorted(self.nodes) for n in self.nodes.values())
