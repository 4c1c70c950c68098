"""No query makes a query process open an outbound connection: the seccomp backstop, alone and in a server.

Each check holds a loopback listener and asks, once the answer is back, whether anything connected to
it: the kernel completes a handshake before the connecting call returns, so a connection made while the
query ran is waiting in the listener's queue by then.
"""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
from support.processes import tree

from semreg.sparql import sandbox

SERVICE = "SELECT * WHERE {{ SERVICE <http://127.0.0.1:{port}/sparql> {{ ?a ?b ?c }} }}"
SPELLINGS = [
    "SELECT * WHERE {{ SERVICE <http://127.0.0.1:{port}/sparql> {{ ?a ?b ?c }} }}",
    r"PREFIX ex: <http://e/> SELECT * WHERE {{ BIND(ex:x\# AS ?x) SERVICE <http://127.0.0.1:{port}/x> {{?a ?b ?c}} }}",
    r"PREFIX ex: <http://e/> SELECT * WHERE {{ BIND(ex:x\' AS ?x) SERVICE <http://127.0.0.1:{port}/x> {{?a ?b ?c}} }}",
    r"PREFIX ex: <http://e/> SELECT * WHERE {{ BIND(ex:x\' AS ?x) SERVICE <http://127.0.0.1:{port}/x> {{}} BIND('a' AS ?y) }}",
    "SELECT * WHERE {{ SERVICESILENT<http://localhost:{port}/x>{{}} }}",
    "SELECT * WHERE {{ VALUES ?e {{ <http://127.0.0.1:{port}/x> }} SERVICE ?e {{}} }}",
]


@pytest.fixture
def listener():
    with socket.create_server(("127.0.0.1", 0)) as sock:
        sock.setblocking(False)
        yield sock


def connected(sock: socket.socket) -> bool:
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


@pytest.mark.parametrize("machine", sorted(sandbox.ARCHES))
def test_every_jump_lands_inside_the_program(machine):
    program = sandbox.program(sandbox.ARCHES[machine])
    assert program[-1][0] == 0x06  # it ends by returning
    for index, (code, true, false, _) in enumerate(program):
        if code & 0x07 == 0x05:  # a jump
            assert index + 1 + max(true, false) < len(program)


CHILD = textwrap.dedent("""
    import json, socket, sys
    import pyoxigraph as ox
    from semreg.sparql import sandbox
    port, query = int(sys.argv[1]), sys.argv[2]
    kept = socket.create_connection(("127.0.0.1", port))  # made before: still usable after
    pair = socket.socketpair()
    out = {"applied": sandbox.apply()}
    def attempt(name, call):
        try:
            call()
            out[name] = "ok"
        except OSError as exc:
            out[name] = type(exc).__name__
    attempt("inet", lambda: socket.create_connection(("127.0.0.1", port)))
    attempt("inet6", lambda: socket.socket(socket.AF_INET6))
    attempt("udp", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    attempt("unix", lambda: socket.socket(socket.AF_UNIX).close())
    attempt("pair", lambda: pair[0].send(b"x") and pair[1].recv(1))
    attempt("kept", lambda: kept.sendall(b"x"))
    attempt("service", lambda: list(ox.Store().query(query)))
    print(json.dumps(out))
""")


@pytest.mark.process
def test_a_sandboxed_process_makes_no_socket_but_unix(listener):
    port = listener.getsockname()[1]
    result = subprocess.run([sys.executable, "-c", CHILD, str(port), SERVICE.format(port=port)],
                            capture_output=True, text=True, timeout=60, check=True)
    out = json.loads(result.stdout)
    assert out == {"applied": True, "inet": "PermissionError", "inet6": "PermissionError", "udp": "PermissionError",
                   "unix": "ok", "pair": "ok", "kept": "ok", "service": "PermissionError"}, out
    kept, _ = listener.accept()  # the connection made before the filter, and nothing after it
    kept.close()
    assert not connected(listener)


# --- a real server: both paths to /sparql, with the scan and without it ----------------------------

BLIND_SCAN = textwrap.dedent("""
    import semreg.sparql.scan as scan
    scan.scan = lambda query: scan.Keywords(False, False)
""")


def both_paths(url: str, query: str) -> list[httpx.Response]:
    """The same query on a fresh connection (handed to a query process) and on one the server kept."""
    with httpx.Client(base_url=url, timeout=30) as fresh:
        handed = fresh.get("/sparql", params={"query": query})
    with httpx.Client(base_url=url, timeout=30) as kept:
        assert kept.get("/v1/instances").status_code == 200
        routed = kept.get("/sparql", params={"query": query})
    return [handed, routed]


def query_processes(pid: int) -> list[int]:
    return [p for p in tree(pid)[1:] if "semreg.sparql.worker" in Path(f"/proc/{p}/cmdline").read_text()]


def seccomp_mode(pid: int) -> str:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(line.split()[1] for line in status.splitlines() if line.startswith("Seccomp:"))


@pytest.mark.process
def test_no_spelling_reaches_the_network_on_either_path(start_server, listener):
    port = listener.getsockname()[1]
    server = start_server("--sparql-time-limit", "5", data_dir=None)
    for spelling in SPELLINGS:
        for response in both_paths(server.url, spelling.format(port=port)):
            assert response.status_code == 400, response.text
            assert not connected(listener)
    assert query_processes(server.proc.pid)
    assert all(seccomp_mode(pid) == "2" for pid in query_processes(server.proc.pid))


@pytest.mark.process
def test_a_query_the_scan_misses_still_reaches_nothing(start_server, listener, tmp_path):
    (tmp_path / "sitecustomize.py").write_text(BLIND_SCAN)
    import os
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    server = start_server("--sparql-time-limit", "5", data_dir=None, env=env)
    port = listener.getsockname()[1]
    for spelling in SPELLINGS:
        for response in both_paths(server.url, spelling.format(port=port)):
            assert response.status_code in (200, 400), response.text  # SILENT answers with nothing fetched
            assert not connected(listener)
