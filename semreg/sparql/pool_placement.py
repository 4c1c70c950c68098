"""The `/sparql` connections handed to the query processes (`semreg.sparql.pool`): where each goes, and
how it comes back.

- **Connections** (`adopt`, from `semreg.sparql.handoff`): each goes to the worker with the fewest, not one
  busy with a long query; the worker serves it (`semreg.sparql.connections`) and sends it back when it
  carries a request for another route, or when a long query would make it wait. With no worker to take
  it, it waits (`_homeless`) while the template forks one.
- **Hand-back.** A connection sent back for another route goes to uvicorn (`on_other`); one moved aside
  by a long query goes to another worker, and the long query's worker takes nothing new. A worker asks
  the server's part of a request when the gate says so (`asker`: its rate limit, a cluster's read barrier).
- **Time limit.** A worker still evaluating a connection's query at its deadline is killed (SIGKILL); the
  server writes the 503 once the process is gone, and closes the dead worker's other connections.
"""
from __future__ import annotations

import contextlib
import logging
import socket
import time

from semreg.errors import SemregError, Unavailable
from semreg.http1.server import encode_response, end_connection
from semreg.sparql.frames import encode
from semreg.sparql.pool_process import Conn, Process
from semreg.sparql.pool_state import PoolState
from semreg.sparql.service import Reply

log = logging.getLogger("semreg.sparql_pool")


class ConnectionPlacement(PoolState):
    def adopt(self, sock: socket.socket, data: bytes) -> bool:
        """Take a connection whose next request (begun in `data`) is for `/sparql`; False when no worker
        can take it now (the caller serves it itself)."""
        if not self.ready:
            return False
        self.drain()
        conn = Conn(self._next_conn, sock)
        self._next_conn += 1
        self._conns[conn.id] = conn
        self._place(conn, data)
        return True

    def _place(self, conn: Conn, data: bytes) -> None:
        worker = self._home()
        if worker is None:
            self._homeless.append((conn, data))
            self._grow()
            return
        conn.worker = worker
        conn.data = data
        worker.conns.add(conn.id)
        worker.send(encode(("conn", conn.id, data)), conn.sock.fileno())

    def _home(self) -> Process | None:
        """The worker for a connection: not retiring, not evaluating if one is free, with the fewest."""
        page = self._page
        best: tuple | None = None
        chosen = None
        for worker in self._workers.values():
            if worker.state == "dead" or worker.retiring:
                continue
            evaluating = page is not None and worker.slot >= 0 and page.evaluating(worker.slot) is not None
            key = (evaluating, len(worker.conns), worker.state == "starting")
            if best is None or key < best:
                best, chosen = key, worker
        return chosen

    def _rehome(self) -> None:
        while self._homeless:
            worker = self._home()
            if worker is None:
                return
            conn, data = self._homeless.popleft()
            if conn.id in self._conns:
                self._place(conn, data)

    def _back(self, process: Process, items: list[tuple[int, bytes]], reason: str) -> None:
        for conn_id, data in items:
            conn = self._conns.get(conn_id)
            if conn is None or conn.worker is not process:
                continue  # placed elsewhere already (see `_long`)
            process.conns.discard(conn_id)
            conn.worker = None
            if reason == "other" and self.on_other is not None:
                del self._conns[conn_id]
                self.on_other(conn.sock, data)
            else:
                self._place(conn, data)

    def _closed_conns(self, process: Process, ids: list[int]) -> None:
        for conn_id in ids:
            conn = self._conns.get(conn_id)
            if conn is None or conn.worker is not process:
                continue
            process.conns.discard(conn_id)
            del self._conns[conn_id]
            conn.sock.close()

    def _long(self, process: Process, conn_id: int, seq: int, deadline: float) -> None:
        """A worker's query runs long: it takes nothing new, another takes its place, and it is killed at
        the query's deadline if it is still evaluating then."""
        process.retiring = True
        # Its connections but the query's: those it took in came back before this message; the others
        # still wait unread in its socket, with the bytes sent along, which go with them to another worker.
        # (It sends back any it takes in later; `_back` ignores those.)
        for other in sorted(process.conns - {conn_id}):
            conn = self._conns.get(other)
            process.conns.discard(other)
            if conn is not None:
                conn.worker = None
                self._place(conn, conn.data)
        self._grow()
        if conn_id and self._loop is not None:
            delay = max(0.0, deadline - time.monotonic())
            self._loop.call_later(delay, self._overdue, process, seq)

    def _overdue(self, process: Process, seq: int) -> None:
        page = self._page
        if process.state == "dead" or page is None or process.slot < 0:
            return
        evaluating = page.evaluating(process.slot)
        if evaluating is None or evaluating.seq != seq:
            return
        log.info("query stopped at its time limit", extra={"worker": process.pid, "conn": evaluating.conn})
        process.overdue = True
        self.killed += 1
        self._signal(process)  # `_lost` answers for its connection once it is gone

    def _answer_for(self, process: Process, reply: Reply) -> None:
        """A dead worker's connections: the one it was evaluating for gets `reply`; all are closed (what
        the others had read, or half written, is lost with it)."""
        page = self._page
        evaluating = page.evaluating(process.slot) if page is not None and process.slot >= 0 else None
        for conn_id in sorted(process.conns):
            conn = self._conns.pop(conn_id, None)
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

    async def _ask(self, process: Process, seq: int, key: str | None) -> None:
        error: SemregError | None = None
        try:
            if self.asker is not None:
                error = await self.asker(key)
        except SemregError as exc:
            error = exc
        except Exception:  # the worker waits for an answer: it gets one
            log.exception("answering a query process's question failed")
            error = Unavailable("the server could not prepare this query; try again.")
        if process.state != "dead":
            process.send(encode(("answer", seq, error)))
