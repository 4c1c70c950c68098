"""A cluster on this machine: one etcd and `semreg serve` nodes on free loopback ports, each with its own
data directory and log, for the cluster benchmark and the multi-node tests.

A node keeps its id, port and data directory across `kill()` / `restart()`, as a node restarted by its
supervisor would; `pause()` and `resume()` stop and continue it (SIGSTOP, SIGCONT) to play a node that
hangs past its lease. Everything started is stopped by `close()`.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

import httpx

from semreg.bench.peers import PeerProcess, Peers, free_ports

SECRET = "local-cluster-secret-0123456789abcdef"


class ClusterNode:
    def __init__(self, name: str, port: int, data_dir: Path, log_path: Path, argv: list[str],
                 cluster_port: int = 0, consul_port: int = 0) -> None:
        self.name = name
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.cluster_url = f"http://127.0.0.1:{cluster_port}"  # the node-to-node listener
        self.consul_url = f"http://127.0.0.1:{consul_port}" if consul_port else None  # the Consul listener, if any
        self.data_dir = data_dir
        self.log_path = log_path
        self.argv = argv
        self.process: PeerProcess | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None and self.process.proc is not None
        return self.process.proc.pid

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.proc is not None and self.process.proc.poll() is None

    def start(self, timeout_s: float = 120.0, ready: bool = True) -> ClusterNode:
        """Start the process; with `ready`, wait for its `/readyz` (joined and caught up)."""
        check = _ready if ready else _listening
        self.process = PeerProcess(self.name, self.argv, self.url, check, self.log_path)
        self.process.start(timeout_s)
        return self

    def kill(self) -> None:
        """SIGKILL: no hand-off, no goodbye; its lease lapses in etcd."""
        if self.running:
            os.killpg(self.pid, signal.SIGKILL)
            assert self.process is not None and self.process.proc is not None
            self.process.proc.wait(10)

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM: a graceful leave (records handed to their other owners, then the key deleted)."""
        if self.process is None:
            return None
        self.process.stop(timeout_s)
        return self.process.proc.returncode if self.process.proc is not None else None

    def pause(self) -> None:
        os.killpg(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self.pid, signal.SIGCONT)

    def client(self, **kw: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=kw.pop("timeout", 30.0), **kw)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def _ready(url: str) -> bool:
    return httpx.get(url + "/readyz", timeout=1.0).status_code == 200


def _listening(url: str) -> bool:
    httpx.get(url + "/healthz", timeout=1.0)
    return True


class LocalCluster:
    """etcd plus nodes. `add()` starts a node that joins; `nodes` keeps every node ever added."""

    def __init__(self, workdir: Path, *, replicas: int = 2, lease_s: int = 2, extra: tuple[str, ...] = (),
                 name: str = "local", consul: bool = False) -> None:
        self.workdir = workdir
        self.consul = consul  # each node with a Consul listener of its own
        self.replicas = replicas
        self.lease_s = lease_s
        self.extra = extra
        self.name = name
        self.peers = Peers(workdir)
        self.secret = workdir / "cluster.secret"
        self.nodes: list[ClusterNode] = []
        self.etcd: PeerProcess | None = None

    def start(self, n: int) -> list[ClusterNode]:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.secret.write_text(SECRET + "\n")
        self.etcd = self.peers.etcd()
        return [self.add() for _ in range(n)]

    def add(self, *extra: str, ready: bool = True) -> ClusterNode:
        assert self.etcd is not None, "start() first"
        name = f"n{len(self.nodes) + 1}"
        ports = free_ports(3 if self.consul else 2)
        port, cluster_port, consul_port = ports[0], ports[1], ports[2] if self.consul else 0
        base = self.workdir / name
        base.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "semreg", "serve", "--host", "127.0.0.1", "--port", str(port),
                "--data-dir", str(base / "data"), "--etcd", self.etcd.url, "--cluster", self.name,
                "--node-id", name, "--cluster-secret", str(self.secret), "--replicas", str(self.replicas),
                "--member-lease", str(self.lease_s), "--cluster-listen", f"127.0.0.1:{cluster_port}",
                *(("--consul-listen", f"127.0.0.1:{consul_port}") if consul_port else ()), *self.extra, *extra]
        node = ClusterNode(name, port, base / "data", base / "semreg.log", argv, cluster_port, consul_port)
        self.nodes.append(node)
        return node.start(ready=ready)

    def restart(self, node: ClusterNode, timeout_s: float = 120.0) -> ClusterNode:
        node.kill()
        return node.start(timeout_s)

    def stop_etcd(self) -> None:
        assert self.etcd is not None
        self.etcd.stop()

    def start_etcd(self) -> None:
        assert self.etcd is not None
        self.etcd.start()

    @property
    def running(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.running]

    def views(self, nodes: list[ClusterNode] | None = None) -> dict[str, dict]:
        out = {}
        for node in nodes if nodes is not None else self.running:
            with contextlib.suppress(httpx.HTTPError):
                out[node.name] = httpx.get(node.url + "/v1/cluster", timeout=2.0).json()
        return out

    def converged(self, nodes: list[ClusterNode] | None = None) -> bool:
        """Every node (of `nodes`, default the running ones) answers, lists exactly those nodes alive, and
        they all show the same ring checksum."""
        nodes = nodes if nodes is not None else self.running
        views = self.views(nodes)
        if len(views) != len(nodes):
            return False
        want = sorted(n.name for n in nodes)
        for view in views.values():
            alive = sorted(m["id"] for m in view["members"] if m["status"] in ("alive", "suspect"))
            if alive != want:
                return False
        return len({v["checksum"] for v in views.values()}) == 1

    def close(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(Exception):
                if node.running:
                    node.resume()
                node.kill()
        self.peers.close()
