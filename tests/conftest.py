from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from support import tools
from support.inprocess import InProcess
from support.paths import ONTOLOGIES
from support.server import ServerProcess

# The query processes of an in-process app's /sparql: part of the app under test, not a process of the test's.
APP_PROCESSES = ("semreg.sparql.worker",)


def pytest_addoption(parser):
    parser.addoption("--no-processes", action="store_true",
                     help="fail any test that starts a process of its own (what `dev.py test --quick` promises)")


_refusing = False  # set while a test runs (its fixtures included) under --no-processes


def pytest_configure(config):
    if config.getoption("--no-processes"):
        sys.addaudithook(_refuse_processes)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _refusing
    _refusing = item.config.getoption("--no-processes")
    try:
        return (yield)
    finally:
        _refusing = False


def _refuse_processes(event: str, args: tuple) -> None:
    if not _refusing:
        return
    if event == "subprocess.Popen" and not any(name in map(str, args[1] or ()) for name in APP_PROCESSES):
        raise RuntimeError(f"this test starts a process ({' '.join(map(str, args[1] or ()))[:120]}): mark it "
                           "@pytest.mark.process, or keep it in this process")
    if event in ("os.fork", "os.posix_spawn", "os.exec", "os.system"):
        raise RuntimeError(f"this test starts a process ({event}): mark it @pytest.mark.process")


# Fixtures that start processes (servers, a ring, etcd): a test using one is marked `process`. A module adds
# its own in `PROCESS_FIXTURES`; a test that starts one itself carries the mark.
PROCESS_FIXTURES = frozenset({"start_server", "ring"})


def pytest_collection_modifyitems(items):
    for item in items:
        starters = PROCESS_FIXTURES | frozenset(getattr(item.module, "PROCESS_FIXTURES", ()))
        if starters & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.process)


def pytest_runtest_setup(item):
    """A test needing a program it drives (`needs_tool`) is skipped where it is missing, or fails when the test
    command installed the programs (`support.tools`)."""
    tools.check((tuple(mark.args) for mark in item.iter_markers("needs_tool")), os.environ)


@pytest.fixture
def start_server(tmp_path_factory):
    """Start real servers: `start_server(data_dir=None, *args)`; each stopped at the end of the test."""
    started: list[ServerProcess] = []

    def start(*args: str, data_dir: Path | None | str = "fresh", env: dict[str, str] | None = None,
              port: int | None = None) -> ServerProcess:
        base = tmp_path_factory.mktemp("server")
        directory = base / "data" if data_dir == "fresh" else data_dir
        server = ServerProcess(directory, *args, env=env, port=port)
        started.append(server)
        return server.start(base / "logs")

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.fixture(scope="module")
def app_server():
    """The app in this process over ASGI, on a fake clock, shared by a test module."""
    server = InProcess()
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def api(app_server):
    """A client of the module's in-process app, with the case study's ontology (obras) uploaded."""
    c = app_server.client()
    r = c.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
              headers={"Content-Type": "text/turtle"})
    assert r.status_code == 201, r.text
    return c


@pytest.fixture
def in_process():
    """Start in-process apps with settings of the test's choosing; each stopped at the end of the test."""
    started: list[InProcess] = []

    def start(**kw) -> InProcess:
        server = InProcess(**kw)
        started.append(server)
        return server.start()

    try:
        yield start
    finally:
        for server in started:
            server.stop()


def app_worker(thread) -> bool:
    """A worker of an in-process app's loop, of an in-process ring's or of a browser's: started on demand,
    stopped with the app, the ring or the browser (which may be the module's), so not a leak of the test that
    happened to start it."""
    from support.browser import BROWSER_THREAD_PREFIX
    from support.inprocess import THREAD_PREFIX
    from support.inprocess_ring import WORKER_PREFIX

    return thread.name.startswith((THREAD_PREFIX + "-worker", WORKER_PREFIX, BROWSER_THREAD_PREFIX))


@pytest.fixture(autouse=True)
def no_leaked_threads(request):
    """Fail a test that leaves threads running (heartbeat threads, pools, servers it did not stop)."""
    import threading
    import time

    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5
    while True:
        leaked = [t for t in threading.enumerate() if t not in before and t.is_alive() and not app_worker(t)]
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert not leaked, f"{request.node.name} left threads running: {sorted(t.name for t in leaked)}"
