"""A real `semreg serve` process on a free loopback port, for tests that go over HTTP."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from semreg.bench.peers import free_port


def wait_for(condition: Callable[[], object], timeout_s: float = 15.0, what: str = "condition") -> object:
    """Poll `condition` until it is truthy (returned), or fail naming `what`: tests wait for states,
    never for fixed delays."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what} did not happen within {timeout_s} s")


class ServerProcess:
    """`python -m semreg serve` with its own data directory; `start()` waits for `/readyz`."""

    def __init__(self, data_dir: Path | None, *args: str, env: dict[str, str] | None = None, port: int | None = None):
        self.port = port or free_port()
        self.data_dir = data_dir
        self.args = args
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen | None = None
        self.log_path: Path | None = None

    def command(self) -> list[str]:
        store = ["--data-dir", str(self.data_dir)] if self.data_dir is not None else ["--memory"]
        return [sys.executable, "-m", "semreg", "serve", "--host", "127.0.0.1", "--port", str(self.port), *store,
                *self.args]

    def start(self, log_dir: Path, timeout_s: float = 60.0) -> "ServerProcess":
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"server-{self.port}.log"
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                     start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"semreg serve exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/readyz", timeout=1).status_code == 200:
                    return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"semreg serve was not ready within {timeout_s} s:\n{self.log()[-3000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """SIGTERM, then SIGKILL if it does not exit in time; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def client(self, **kw) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=kw.pop("timeout", 30), **kw)
