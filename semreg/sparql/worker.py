"""The query processes of `/sparql`: a template that holds the replica, and workers forked from it.

    python -m semreg.sparql.worker SOCKET SLOTS   (started by `semreg.sparql.pool`; the secret is in the
                                                  environment, SEMREG_QUERY_SECRET)

The template connects to the server's socket, loads the replica snapshot (`semreg.sparql.replica`), applies
every change after it, and forks a worker when the server asks. A fork copies the replica in a few
milliseconds (pages are shared until written), so a worker killed for running past the time limit is
replaced at once. A worker connects on its own and serves what the server gives it
(`semreg.sparql.connections`): queries the server sends, and connections it hands over, one request
at a time, with the changes sent after its fork applied before each query. The template also keeps
what a fork needs besides the graphs: the last ticket, the prefixes and the gate.

Every process dies with its parent (PR_SET_PDEATHSIG on Linux, and end of input otherwise), ignores
SIGINT (the server handles Ctrl-C), and runs at a lower CPU priority (nice 5), so that queries burning
every core never slow discovery in the server's own process. A worker's address space is capped so
that a query that would take all the memory fails in its own process instead. The template forbids
itself, and so every worker it forks, any socket but AF_UNIX (`semreg.sparql.sandbox`): no query can make
a query process connect anywhere.
"""
from __future__ import annotations

import gc
import logging
import os
import resource
import select
import signal
import socket
import sys

import pyoxigraph as ox

from semreg import malloc
from semreg.sparql import replica, sandbox
from semreg.sparql.channel import Channel
from semreg.sparql.connections import ConnectionServer
from semreg.sparql.frames import read_message, write_message
from semreg.sparql.service import Gate
from semreg.sparql.shared_page import SharedPage

log = logging.getLogger("semreg.sparql_worker")

SECRET_ENV = "SEMREG_QUERY_SECRET"
PAGE = "page"  # the shared page's file, beside the socket (`semreg.sparql.shared_page`)
NICENESS = 5


def main(argv: list[str]) -> int:
    path = argv[0]
    secret = os.environ.pop(SECRET_ENV, "")
    slots = int(argv[1])
    settle_s = float(argv[2]) if len(argv) > 2 else replica.SETTLE_S
    _detach_from_terminal_signals()
    _die_with_parent()
    _lower_priority()
    _forbid_outbound_connections()
    page = SharedPage(os.path.join(os.path.dirname(path), PAGE), slots)
    sock = _connect(path, ("hello", "template", 0, os.getpid(), secret))
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # forked workers are reaped by the kernel
    store = ox.Store()
    state = _Stream()
    wear = replica.Wear()
    while True:
        if wear.settled and not select.select([sock], [], [], settle_s)[0]:
            store = _rebuilt(store, wear)  # no change came for a while: the load has ended
            malloc.release()
            write_message(sock, ("rebuilt", wear.size))
            continue
        try:
            message = read_message(sock)
        except (EOFError, OSError):
            return 0  # the server has gone
        kind = message[0]
        if kind == "load":
            replica.load(store, message[1])
            wear.renew(len(message[1]))
            malloc.release()
        elif kind == "changes":
            replica.apply(store, message[1])
            wear.add(replica.weight(message[1]))
            if wear.worn:
                store = _rebuilt(store, wear)
                malloc.release()  # the worn copy is gone only now
                write_message(sock, ("rebuilt", wear.size))  # its forks no longer share the old copy's pages
        elif kind == "fork":
            _, worker_id, memory_limit, slot = message
            gc.freeze()  # a fork's collections skip what it inherits, and so leave those pages shared
            if os.fork() == 0:
                code = 1
                try:
                    sock.close()
                    code = _worker(path, secret, worker_id, memory_limit, slot, store, page, state)
                finally:
                    os._exit(code)
        elif kind == "exit":
            return 0
        else:
            state.take(message)


def _rebuilt(store: ox.Store, wear: replica.Wear) -> ox.Store:
    """The template's copy made anew from its own snapshot, the worn one's memory given back (see `replica`)."""
    before = wear.changed
    store, size = replica.rebuilt(store)
    wear.renew(size)
    log.info("query replica rebuilt", extra={"changed_bytes": before, "snapshot_bytes": size})
    return store


class _Stream:
    """What the template keeps of the stream besides the graphs, for the workers it forks."""

    def __init__(self) -> None:
        self.ticket = 0
        self.prefix_version = 0
        self.prefixes: dict[str, str] = {}
        self.gate: Gate | None = None

    def take(self, message: tuple) -> None:
        kind = message[0]
        if kind == "ticket":
            self.ticket = message[1]
        elif kind == "prefixes":
            _, self.prefix_version, self.prefixes = message
        elif kind == "gate":
            self.gate = message[1]


def _worker(path: str, secret: str, worker_id: int, memory_limit: int, slot: int, store: ox.Store,
            page: SharedPage, state: _Stream) -> int:
    _die_with_parent()
    _limit_memory(memory_limit)
    sock = _connect(path, ("hello", "worker", worker_id, os.getpid(), secret))
    server = ConnectionServer(Channel(sock), store, page, slot, state.gate, prefixes=state.prefixes,
                              prefix_version=state.prefix_version, ticket=state.ticket)
    return server.run()


def _connect(path: str, hello: tuple) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    write_message(sock, hello)
    return sock


def _detach_from_terminal_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _forbid_outbound_connections() -> None:
    if not sandbox.apply():
        log.warning("the query processes could not forbid themselves outbound connections (seccomp is not "
                    "available here); only the query scan keeps SERVICE from fetching URLs")


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
