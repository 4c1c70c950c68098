"""The query processes of `/sparql`: a template that holds the replica, and workers forked from it.

    python -m semreg.sparql_worker SOCKET     (started by `semreg.sparql_pool`; the secret is in the
                                              environment, SEMREG_QUERY_SECRET)

The template connects to the server's socket, loads the replica snapshot (`semreg.replica`), applies
every change after it, and forks a worker when the server asks. A fork copies the replica in a few
milliseconds (pages are shared until written), so a worker killed for running past the time limit is
replaced at once. A worker connects on its own, applies the changes sent after its fork, and
evaluates one query at a time with `semreg.sparql_runner`, under the deadline the server gives.

Every process dies with its parent (PR_SET_PDEATHSIG on Linux, and end of input otherwise), ignores
SIGINT (the server handles Ctrl-C), and runs at a lower CPU priority (nice 5), so that queries burning
every core never slow discovery in the server's own process. A worker's address space is capped so
that a query that would take all the memory fails in its own process instead.
"""
from __future__ import annotations

import logging
import os
import resource
import signal
import socket
import sys
import time
from typing import Any

import pyoxigraph as ox

from semreg import replica
from semreg.errors import SemregError, Unavailable
from semreg.frames import read_message, write_message
from semreg.sparql_protocol import QueryRequest
from semreg.sparql_runner import Limits, run_query

log = logging.getLogger("semreg.sparql_worker")

SECRET_ENV = "SEMREG_QUERY_SECRET"
# A worker stops a streaming query itself this long before the server's deadline, so that the server
# rarely has to kill it.
EARLY_STOP_S = 0.05
NICENESS = 5


def main(argv: list[str]) -> int:
    path = argv[0]
    secret = os.environ.pop(SECRET_ENV, "")
    _detach_from_terminal_signals()
    _die_with_parent()
    _lower_priority()
    sock = _connect(path, ("hello", "template", 0, os.getpid(), secret))
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # forked workers are reaped by the kernel
    store = ox.Store()
    while True:
        try:
            message = read_message(sock)
        except (EOFError, OSError):
            return 0  # the server has gone
        kind = message[0]
        if kind == "load":
            replica.load(store, message[1])
        elif kind == "changes":
            replica.apply(store, message[1])
        elif kind == "fork":
            _, worker_id, memory_limit = message
            if os.fork() == 0:
                code = 1
                try:
                    sock.close()
                    code = _worker(path, secret, worker_id, memory_limit, store)
                finally:
                    os._exit(code)
        elif kind == "exit":
            return 0


def _worker(path: str, secret: str, worker_id: int, memory_limit: int, store: ox.Store) -> int:
    _die_with_parent()
    _limit_memory(memory_limit)
    sock = _connect(path, ("hello", "worker", worker_id, os.getpid(), secret))
    prefixes: dict[str, str] = {}
    while True:
        try:
            message = read_message(sock)
        except (EOFError, OSError):
            return 0
        kind = message[0]
        if kind == "query":
            _, qid, job = message
            if job.prefixes is not None:
                prefixes = job.prefixes
            write_message(sock, _evaluate(store, qid, job, prefixes))
        elif kind == "changes":
            replica.apply(store, message[1])
        elif kind == "exit":
            return 0


def _evaluate(store: ox.Store, qid: int, job: Any, prefixes: dict[str, str]) -> tuple:
    request = QueryRequest(job.query, tuple(ox.NamedNode(g) for g in job.default_graphs),
                           tuple(ox.NamedNode(g) for g in job.named_graphs))
    limits = Limits(time.monotonic() + job.time_left_s - EARLY_STOP_S, job.time_limit_s, job.result_limit)
    try:
        output = run_query(store, request, accept=job.accept, limits=limits, prefixes=prefixes or None,
                           base_iri=job.base_iri)
    except SemregError as exc:
        return ("error", qid, exc)
    except MemoryError:
        return ("error", qid, Unavailable("the query needs more memory than a query may use here; narrow it."))
    return ("result", qid, output.content_type, output.body)


def _connect(path: str, hello: tuple) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    write_message(sock, hello)
    return sock


def _detach_from_terminal_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _lower_priority() -> None:
    try:
        os.nice(NICENESS)
    except OSError:
        log.warning("the query processes could not lower their CPU priority")


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent exits; elsewhere end of input does it."""
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent exited before the request took effect
        os._exit(0)


def _limit_memory(extra_bytes: int) -> None:
    """Cap this process's address space at what it maps now plus `extra_bytes` (0: no cap)."""
    if extra_bytes <= 0:
        return
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            vm_kib = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
        limit = vm_kib * 1024 + extra_bytes
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (OSError, ValueError, StopIteration):
        log.warning("the query process's memory cap could not be set")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
