"""`semreg serve` as a process made of services: a service that fails to start ends the start-up with status 3,
and what had started is stopped again (the store flushed, the log's `node stopped`), whichever service it was."""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from semreg.bench.peers import free_ports

pytestmark = pytest.mark.process


def serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "semreg", "serve", "--host", "127.0.0.1", *args],
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def taken():
    """A loopback port another socket holds (TCP, listening)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock.getsockname()[1]
    sock.close()


def test_a_cluster_listener_that_cannot_listen_fails_the_start_up_and_stops_what_started(tmp_path, taken):
    """It used to end the process from inside uvicorn's start-up (`SystemExit`), the node stopped by the
    cancellation of the app's lifespan, with tracebacks in the log and no word of which part failed."""
    secret = tmp_path / "cluster.secret"
    secret.write_text("a-secret-of-more-than-sixteen-characters\n")
    port, = free_ports(1)
    done = serve("--port", str(port), "--data-dir", str(tmp_path / "data"), "--no-sparql", "--etcd",
                 "http://127.0.0.1:1", "--cluster-listen", f"127.0.0.1:{taken}", "--cluster-secret", str(secret),
                 "--log-format", "text")
    said = done.stderr
    assert done.returncode == 3, said[-3000:]
    assert "service failed to start" in said and "service=cluster listener" in said, said[-3000:]
    assert "service stopped service=store" in said and said.rstrip().endswith("node stopped"), said[-3000:]
    assert "service started service=membership" not in said  # never on the ring
    assert "Traceback" not in said


def test_a_public_port_taken_fails_the_start_up_with_status_3_and_stops_what_started(tmp_path, taken):
    done = serve("--port", str(taken), "--memory", "--no-sparql", "--log-format", "text")
    said = done.stderr
    assert done.returncode == 3, said[-3000:]
    assert "service failed to start" in said and "service=public listener" in said, said[-3000:]
    assert "service stopped service=registry" in said and said.rstrip().endswith("node stopped"), said[-3000:]
    assert "Traceback" not in said
