"""The query processes of `/sparql`: a template that holds the replica, and workers forked from it.

    python -m semreg.sparql.worker SOCKET SLOTS   (started by `semreg.sparql.pool`; the secret is in the
                                                  environment, SEMREG_QUERY_SECRET)

The template connects to the server's socket, loads the replica snapshot (`semreg.sparql.replica`), applies
every change after it, and forks a worker when the server asks. Its copy is in memory, or on disk (a fourth
argument, the replica's directory: `semreg.sparql.checkpoints`), where it also cuts the checkpoints the server
asks for. A fork copies a copy in memory in a few milliseconds (pages are shared until written), and one on
disk costs nothing to copy, so a worker killed for running past the time limit is replaced at once. A worker
connects on its own and serves what the server gives it (`semreg.sparql.connections`): queries the server
sends, and connections it hands over, one request at a time, with its copy caught up before each query
(`semreg.sparql.copies`: the changes sent after its fork applied, or a newer checkpoint opened). The template
also keeps what a fork needs besides the graphs: the last ticket, the prefixes and the gate.

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
import shutil
import signal
import socket
import sys
from collections.abc import Callable

import pyoxigraph as ox

from semreg import malloc
from semreg.sparql import checkpoints, replica, sandbox
from semreg.sparql.channel import Channel
from semreg.sparql.connections import ConnectionServer, Copy
from semreg.sparql.copies import Checkpoint, CheckpointCopy, MemoryCopy
from semreg.sparql.frames import read_message, write_message
from semreg.sparql.service import Gate
from semreg.sparql.shared_page import SharedPage

log = logging.getLogger("semreg.sparql_worker")

SECRET_ENV = "SEMREG_QUERY_SECRET"
PAGE = "page"  # the shared page's file, beside the socket (`semreg.sparql.shared_page`)
NICENESS = 5
# instances whose N-Quads are at least this long go into the replica on disk with a bulk load: ~400 µs an
# instance of 3 tags against ~670 in one transaction at 200 instances, ~200 at 2,000
BULK_BYTES = 256 << 10
# changes waiting on the socket are read and applied together up to this many bytes of RDF (`_gathered`)
GATHER_BYTES = 32 << 20


def main(argv: list[str]) -> int:
    path = argv[0]
    secret = os.environ.pop(SECRET_ENV, "")
    slots = int(argv[1])
    settle_s = float(argv[2]) if len(argv) > 2 else replica.SETTLE_S
    on_disk = argv[3] if len(argv) > 3 else ""
    _detach_from_terminal_signals()
    _die_with_parent()
    _lower_priority()
    _forbid_outbound_connections()
    page = SharedPage(os.path.join(os.path.dirname(path), PAGE), slots)
    sock = _connect(path, ("hello", "template", 0, os.getpid(), secret))
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # forked workers are reaped by the kernel
    state = _Stream()
    copy: _InMemory | _OnDisk = _OnDisk(on_disk, state) if on_disk else _InMemory()
    held: tuple | None = None  # a message read while gathering changes: the next one handled
    while True:
        if held is None and copy.settled and not select.select([sock], [], [], settle_s)[0]:
            copy.rebuild(sock)  # no change came for a while: the load has ended
            continue
        try:
            message, held = (read_message(sock), None) if held is None else (held, None)
        except (EOFError, OSError):
            return 0  # the server has gone
        kind = message[0]
        if kind == "load":
            copy.load(message[1])
            malloc.release()
        elif kind == "changes":
            changes, held = _gathered(sock, message[1], state)
            copy.apply(changes, sock)
        elif kind == "checkpoint":
            write_message(sock, ("checkpointed", message[1], copy.cut(message[1])))
        elif kind == "fork":
            _, worker_id, memory_limit, slot = message
            gc.freeze()  # a fork's collections skip what it inherits, and so leave those pages shared
            if os.fork() == 0:
                code = 1
                try:
                    sock.close()
                    code = _worker(path, secret, worker_id, memory_limit, slot, copy, page, state)
                finally:
                    os._exit(code)  # never the template's destructors: its store on disk is not this process's
        elif kind == "exit":
            return 0
        else:
            state.take(message)


def _gathered(sock: socket.socket, changes: list[replica.Change], state: _Stream
              ) -> tuple[list[replica.Change], tuple | None]:
    """`changes`, and the changes already waiting on the socket after them (held for the template while
    registrations poured in: `semreg.sparql.pool_stream`), up to `GATHER_BYTES`, as one list
    (`replica.merged`): a copy on disk takes a burst in one bulk load, not one a feed pass. The tickets,
    prefixes and gate read among them are taken; the first other message read is returned, to be handled
    once the changes are applied (an end of input as `("exit",)`)."""
    batches = [changes]
    size = replica.weight(changes)
    while size < GATHER_BYTES and select.select([sock], [], [], 0)[0]:
        try:
            message = read_message(sock)
        except (EOFError, OSError):
            return replica.merged(batches), ("exit",)
        if message[0] == "changes":
            batches.append(message[1])
            size += replica.weight(message[1])
        elif message[0] in ("ticket", "prefixes", "gate"):
            state.take(message)
        else:
            return replica.merged(batches), message
    return replica.merged(batches), None


class _InMemory:
    """The template's copy in memory, which its forks share until they write to it."""

    def __init__(self) -> None:
        self.store = ox.Store()
        self.wear = replica.Wear()

    @property
    def settled(self) -> bool:
        return self.wear.settled

    def load(self, data: bytes) -> None:
        replica.load(self.store, data)
        self.wear.renew(len(data))

    def apply(self, changes: list[replica.Change], sock: socket.socket) -> None:
        replica.apply(self.store, changes)
        self.wear.add(replica.weight(changes))
        if self.wear.worn:
            self.rebuild(sock)

    def rebuild(self, sock: socket.socket) -> None:
        """The copy made anew from its own snapshot, the worn one's memory given back (see `replica`)."""
        before = self.wear.changed
        self.store, size = replica.rebuilt(self.store)
        self.wear.renew(size)
        log.info("query replica rebuilt", extra={"changed_bytes": before, "snapshot_bytes": size})
        malloc.release()  # the worn copy is gone only now
        write_message(sock, ("rebuilt", size))  # its forks no longer share the old copy's pages

    def cut(self, seq: int) -> int:
        raise ValueError("a copy in memory cuts no checkpoints")

    def worker_copy(self, state: _Stream, say: Callable[[tuple], None]) -> Copy:
        return MemoryCopy(self.store, state.ticket)


class _OnDisk:
    """The replica on disk (`semreg.sparql.checkpoints`): written here alone; the workers read checkpoints of it."""

    def __init__(self, root: str, state: _Stream) -> None:
        self.paths = checkpoints.Paths(root)
        self.state = state
        self.store: ox.Store | None = None
        self.checkpoint: Checkpoint | None = None
        self.unflushed = 0

    settled = False  # RocksDB keeps no replaced quads: nothing to rebuild

    def load(self, data: bytes) -> None:
        """A fresh store holding the snapshot (what a previous template left is removed first)."""
        self.store = None
        shutil.rmtree(self.paths.live, ignore_errors=True)
        self.paths.checkpoints.mkdir(parents=True, exist_ok=True)
        store = ox.Store(str(self.paths.live))
        if data:
            # bulk_extend of parsed quads, not bulk_load: the loader relabels blank nodes, and a blank node the
            # ontology graph shares with the closure must keep the label later patches name it by
            store.bulk_extend(ox.parse(data, format=ox.RdfFormat.N_QUADS, lenient=True))
        self.store = store

    def apply(self, changes: list[replica.Change], sock: socket.socket) -> None:
        assert self.store is not None, "changes before the snapshot"
        replica.apply(self.store, changes, BULK_BYTES)
        self.unflushed += replica.weight(changes)
        if self.unflushed > checkpoints.FLUSH_BYTES:  # RocksDB's memtables are written out, not kept growing
            self.store.flush()
            self.unflushed = 0
            malloc.release()

    def rebuild(self, sock: socket.socket) -> None:
        raise ValueError("a copy on disk is never rebuilt")

    def cut(self, seq: int) -> int:
        """Checkpoint `seq` of everything applied so far; the ticket it holds everything up to."""
        assert self.store is not None, "a checkpoint before the snapshot"
        path = self.paths.checkpoint(seq)
        shutil.rmtree(path, ignore_errors=True)  # a cut a dead template began
        self.store.backup(str(path))  # flushes the memtables, then hard links: milliseconds
        self.unflushed = 0
        self.checkpoint = (seq, str(path), self.state.ticket)
        return self.state.ticket

    def worker_copy(self, state: _Stream, say: Callable[[tuple], None]) -> Copy:
        assert self.checkpoint is not None, "a fork before the first checkpoint"
        return CheckpointCopy(self.checkpoint, say)


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


def _worker(path: str, secret: str, worker_id: int, memory_limit: int, slot: int, template: _InMemory | _OnDisk,
            page: SharedPage, state: _Stream) -> int:
    _die_with_parent()
    _limit_memory(memory_limit)
    sock = _connect(path, ("hello", "worker", worker_id, os.getpid(), secret))
    channel = Channel(sock)
    copy = template.worker_copy(state, channel.send)
    server = ConnectionServer(channel, copy, page, slot, state.gate, prefixes=state.prefixes,
                              prefix_version=state.prefix_version)
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
