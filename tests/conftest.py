from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED = ROOT.parent / "shared"
DATA = SHARED / "data"
ONTOLOGIES = ROOT / "ontologies"

sys.path.insert(0, str(HERE))

from server import ServerProcess  # noqa: E402


@pytest.fixture
def start_server(tmp_path_factory):
    """Start real servers: `start_server(data_dir=None, *args)`; each stopped at the end of the test."""
    started: list[ServerProcess] = []

    def start(*args: str, data_dir: Path | None | str = "fresh", env: dict[str, str] | None = None,
              port: int | None = None) -> ServerProcess:
        base = tmp_path_factory.mktemp("server")
        directory = base / "data" if data_dir == "fresh" else data_dir
        server = ServerProcess(directory, *args, env=env, port=port).start(base / "logs")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def module_server(tmp_path_factory):
    """One fresh on-disk server shared by a test module."""
    base = tmp_path_factory.mktemp("module-server")
    server = ServerProcess(base / "data").start(base / "logs")
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def no_leaked_threads(request):
    """Fail a test that leaves threads running (heartbeat threads, pools, servers it did not stop)."""
    import threading
    import time

    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5
    while True:
        leaked = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert not leaked, f"{request.node.name} left threads running: {sorted(t.name for t in leaked)}"
