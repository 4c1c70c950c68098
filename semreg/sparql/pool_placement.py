"""The `/sparql` connections handed to the query processes (`semreg.sparql.pool`): where each goes, and
how it comes back.

- **Connections** (`adopt`, from `semreg.sparql.handoff`): each goes to the worker with the fewest, not one
  busy with a long query; the worker serves it (`semreg.sparql.connections`) and sends it back when it
  carries a request for another route, or when a long query would make it wait. With no worker to take
  it, it waits (`homeless`) while the template forks one.
- **Hand-back.** A connection sent back for another route goes to uvicorn (`other`); one moved aside by a
  long query goes to another worker, and the long query's worker takes nothing new.
- **Time limit.** A worker still evaluating a connection's query at its deadline is killed (SIGKILL); the
  server writes the 503 once the process is gone (`answer_for`), and closes the dead worker's other
  connections.

The workers come from the processes' life cycle (`semreg.sparql.pool_lifecycle.Processes`), which forks
one when a connection waits.
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import socket
import time
from collections.abc import Callable

from semreg.http1.server import encode_response, end_connection
from semreg.sparql.frames import encode
from semreg.sparql.pool_lifecycle import Processes
from semreg.sparql.pool_process import Conn, Process
from semreg.sparql.service import Reply

log = logging.getLogger("semreg.sparql_pool")

# other(socket, bytes already read): a connection whose next request is for another route, to uvicorn
Other = Callable[[socket.socket, bytes], None]


class ConnectionPlacement:
    """The connections the workers serve: placed, moved, given back, answered for."""

    def __init__(self, processes: Processes) -> None:
        self.processes = processes
        self.killed = 0  # workers killed at a connection's query's deadline
        self.conns: dict[int, Conn] = {}
        self.homeless: collections.deque[tuple[Conn, bytes]] = collections.deque()
        self._next_conn = 1

    @property
    def waiting(self) -> int:
        """Connections waiting for a worker."""
        return len(self.homeless)

    def adopt(self, sock: socket.socket, data: bytes) -> None:
        """Take a connection whose next request (begun in `data`) is for `/sparql`."""
        conn = Conn(self._next_conn, sock)
        self._next_conn += 1
        self.conns[conn.id] = conn
        self._place(conn, data)

    def _place(self, conn: Conn, data: bytes) -> None:
        worker = self._home()
        if worker is None:
            self.homeless.append((conn, data))
            self.processes.grow()
            return
        conn.worker = worker
        conn.data = data
        worker.conns.add(conn.id)
        worker.send(encode(("conn", conn.id, data)), conn.sock.fileno())

    def _home(self) -> Process | None:
        """The worker for a connection: not retiring, not evaluating if one is free, with the fewest."""
        best: tuple | None = None
        chosen = None
        for worker in self.processes.workers:
            if worker.state == "dead" or worker.retiring:
                continue
            key = (self.processes.evaluating(worker) is not None, len(worker.conns), worker.state == "starting")
            if best is None or key < best:
                best, chosen = key, worker
        return chosen

    def rehome(self) -> None:
        """Place the connections waiting for a worker, while there is one."""
        while self.homeless:
            worker = self._home()
            if worker is None:
                return
            conn, data = self.homeless.popleft()
            if conn.id in self.conns:
                self._place(conn, data)

    def back(self, process: Process, items: list[tuple[int, bytes]], reason: str, other: Other | None) -> None:
        """Connections a worker sent back with what it read of them: for another route (`other`), or moved."""
        for conn_id, data in items:
            conn = self.conns.get(conn_id)
            if conn is None or conn.worker is not process:
                continue  # placed elsewhere already (see `long`)
            process.conns.discard(conn_id)
            conn.worker = None
            if reason == "other" and other is not None:
                del self.conns[conn_id]
                other(conn.sock, data)
            else:
                self._place(conn, data)

    def closed(self, process: Process, ids: list[int]) -> None:
        """Connections a worker closed."""
        for conn_id in ids:
            conn = self.conns.get(conn_id)
            if conn is None or conn.worker is not process:
                continue
            process.conns.discard(conn_id)
            del self.conns[conn_id]
            conn.sock.close()

    def long(self, process: Process, conn_id: int, seq: int, deadline: float) -> None:
        """A worker's query runs long: it takes nothing new, another takes its place, and it is killed at
        the query's deadline if it is still evaluating then."""
        process.retiring = True
        # Its connections but the query's: those it took in came back before this message; the others
        # still wait unread in its socket, with the bytes sent along, which go with them to another worker.
        # (It sends back any it takes in later; `back` ignores those.)
        for other in sorted(process.conns - {conn_id}):
            conn = self.conns.get(other)
            process.conns.discard(other)
            if conn is not None:
                conn.worker = None
                self._place(conn, conn.data)
        self.processes.grow()
        if conn_id:
            delay = max(0.0, deadline - time.monotonic())
            asyncio.get_running_loop().call_later(delay, self._overdue, process, seq)

    def _overdue(self, process: Process, seq: int) -> None:
        if process.state == "dead":
            return
        evaluating = self.processes.evaluating(process)
        if evaluating is None or evaluating.seq != seq:
            return
        log.info("query stopped at its time limit", extra={"worker": process.pid, "conn": evaluating.conn})
        process.overdue = True
        self.killed += 1
        self.processes.signal(process)  # `answer_for` answers for its connection once it is gone

    def answer_for(self, process: Process, reply: Reply) -> None:
        """A dead worker's connections: the one it was evaluating for gets `reply`; all are closed (what
        the others had read, or half written, is lost with it)."""
        evaluating = self.processes.evaluating(process)
        for conn_id in sorted(process.conns):
            conn = self.conns.pop(conn_id, None)
            if conn is None:
                continue
            if evaluating is not None and evaluating.conn == conn_id:
                # one non-blocking send: a few hundred bytes fit an idle connection's buffer, and the event
                # loop must not wait on a client that stopped reading
                with contextlib.suppress(OSError):
                    conn.sock.setblocking(False)
                    conn.sock.send(encode_response(reply.status, reply.headers, reply.body, keep_alive=False))
            end_connection(conn.sock)
        process.conns.clear()

    def close(self) -> None:
        """End every connection (the server is stopping)."""
        for conn, _ in self.homeless:
            end_connection(conn.sock)
        self.homeless.clear()
        for conn in list(self.conns.values()):
            end_connection(conn.sock)
        self.conns.clear()
