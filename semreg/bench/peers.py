"""The processes a benchmark talks to: etcd, the Oxigraph server and semreg, on free loopback ports.

Each peer runs in its own process group (so one `killpg` stops it and anything it forked) with a
temporary data directory and a log file; `Peers` stops every peer it started, in reverse order, from
a `finally`, so an error or Ctrl-C leaves nothing running.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ETCD_BINARY = "/usr/bin/etcd"
INSTALL_HINT = {
    "wrk": "apt-get install -y wrk",
    "etcd": "apt-get install -y etcd-server",
    "oxigraph": f"{sys.executable} -m pip install 'oxigraph>=0.5.13,<0.6'",
}


class BenchError(Exception):
    """A benchmark cannot go on: a tool is missing, a peer did not start, a check failed."""


class MissingTool(BenchError):
    """A program the chosen scenarios need is not installed."""

    def __init__(self, tool: str, detail: str = "") -> None:
        hint = INSTALL_HINT.get(tool, "")
        super().__init__(f"{tool} is not installed{detail}; install it with: {hint}" if hint else f"{tool} is missing")
        self.tool = tool


_handed_out: set[int] = set()  # every port this process has given: a listener may not have bound it yet
_handed_lock = threading.Lock()


def free_ports(n: int) -> list[int]:
    """`n` distinct loopback ports that are free now and that this process has not given before.

    A port is free once the probing socket closes, so two probes in a row can get the same number from
    the system: a node given it for its public and its cluster listener then fails to bind the second.
    The probes stay open until all `n` are chosen, and numbers already given are skipped, since the
    process they went to may still be starting."""
    with contextlib.ExitStack() as probes:
        ports: list[int] = []
        while len(ports) < n:
            probe = probes.enter_context(socket.socket())
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
            with _handed_lock:
                if port in _handed_out:
                    continue
                _handed_out.add(port)
            ports.append(port)
        return ports


def free_port() -> int:
    return free_ports(1)[0]


def find_tool(tool: str) -> str:
    """The path of `wrk`, `etcd` or `oxigraph`; MissingTool with the install command otherwise."""
    if tool == "etcd":
        found = ETCD_BINARY if os.access(ETCD_BINARY, os.X_OK) else shutil.which("etcd")
    elif tool == "oxigraph":
        beside = Path(sys.executable).parent / "oxigraph"  # the venv's bin, even when it is not on PATH
        found = str(beside) if os.access(beside, os.X_OK) else shutil.which("oxigraph")
    else:
        found = shutil.which(tool)
    if not found:
        raise MissingTool(tool)
    return found


def tool_version(tool: str) -> str | None:
    """The first line a tool prints about its version, or None when it is not installed."""
    try:
        path = find_tool(tool)
    except MissingTool:
        return None
    flag = {"wrk": "-v", "etcd": "--version", "oxigraph": "--version"}[tool]
    try:
        out = subprocess.run([path, flag], check=False, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = (out.stdout + out.stderr).strip().splitlines()
    return lines[0].strip() if lines else None


class PeerProcess:
    """One server process: started in its own session, ready when `ready()` says so, stopped by group."""

    def __init__(self, name: str, argv: list[str], url: str, ready: Callable[[str], bool], log_path: Path,
                 env: dict[str, str] | None = None, data_dir: Path | None = None, poll_s: float = 0.05) -> None:
        self.name = name
        self.argv = argv
        self.url = url
        self._ready = ready
        self.log_path = log_path
        self.env = env
        self.data_dir = data_dir
        self.poll_s = poll_s  # how often `start` asks whether it is ready
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 60.0) -> PeerProcess:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=self.env, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"{self.name} exited with status {self.proc.returncode} while starting "
                                 f"({' '.join(self.argv)}):\n{self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if self._ready(self.url):
                    return self
            time.sleep(self.poll_s)
        self.stop()
        raise BenchError(f"{self.name} was not ready within {timeout_s:.0f} s:\n{self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        if not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-chars:]

    def kill(self) -> None:
        """SIGKILL to the process group (a crash: nothing is written on the way out), and its end waited for."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM to the process group, SIGKILL if it is still there after `timeout_s`."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def _http_ok(path: str, expect: Callable[[httpx.Response], bool] = lambda r: r.status_code == 200):
    def ready(url: str) -> bool:
        return expect(httpx.get(url + path, timeout=1.0))
    return ready


class Peers:
    """Starts peers under one temporary directory and stops them all at `close()`."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: list[PeerProcess] = []

    def _dirs(self, name: str) -> tuple[Path, Path]:
        n = sum(1 for p in self.started if p.name == name)
        base = self.workdir / f"{name}-{n}"
        (base / "data").mkdir(parents=True, exist_ok=True)
        return base / "data", base / f"{name}.log"

    def _start(self, peer: PeerProcess, timeout_s: float = 60.0) -> PeerProcess:
        self.started.append(peer)  # before start(): a peer that hangs while starting is still stopped
        return peer.start(timeout_s)

    def etcd(self) -> PeerProcess:
        data, log = self._dirs("etcd")
        client, peer = free_ports(2)
        client_url, peer_url = f"http://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
        argv = [find_tool("etcd"), "--name", "bench", "--data-dir", str(data),
                "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
                "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                "--initial-cluster", f"bench={peer_url}", "--initial-cluster-state", "new"]
        ready = _http_ok("/health", lambda r: r.status_code == 200 and '"true"' in r.text)
        return self._start(PeerProcess("etcd", argv, client_url, ready, log))

    def oxigraph(self, *, union_default_graph: bool = True) -> PeerProcess:
        data, log = self._dirs("oxigraph")
        port = free_port()
        argv = [find_tool("oxigraph"), "serve", "--location", str(data), "--bind", f"127.0.0.1:{port}"]
        if union_default_graph:
            argv.append("--union-default-graph")
        ready = _http_ok("/query?query=ASK%7B%7D")
        return self._start(PeerProcess("oxigraph", argv, f"http://127.0.0.1:{port}", ready, log))

    def semreg(self, *extra: str, data: Path | None = None, poll_s: float = 0.05,
               ready_timeout_s: float = 120.0) -> PeerProcess:
        """A semreg server on a new data directory, or on `data` (one a stopped server left: a restart,
        its log appended to that server's)."""
        if data is None:
            data, log = self._dirs("semreg")
        else:
            log = data.parent / "semreg.log"
        port = free_port()
        argv = [sys.executable, "-m", "semreg", "serve", "--host", "127.0.0.1", "--port", str(port),
                "--data-dir", str(data), *extra]
        peer = PeerProcess("semreg", argv, f"http://127.0.0.1:{port}", _http_ok("/readyz"), log, data_dir=data,
                           poll_s=poll_s)
        return self._start(peer, timeout_s=ready_timeout_s)

    def close(self) -> None:
        errors = []
        for peer in reversed(self.started):
            try:
                peer.stop()
            except Exception as exc:
                errors.append(f"{peer.name}: {exc}")
        self.started.clear()
        if errors:
            raise BenchError("could not stop every peer: " + "; ".join(errors))
