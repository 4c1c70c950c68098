"""The `/sparql` connections a query process serves itself (`semreg.sparql.connections`): each one read,
its requests framed and answered in order, and closed or sent back to the server.

The server hands a connection over with the bytes it read so far and its descriptor; the process then
reads its requests, evaluates them on its replica and writes the answers, one request at a time. The
server keeps its own descriptor of each, so that it can answer for a process it killed.

- **A request that is not `GET`/`POST /sparql`** on such a connection sends the connection back to the
  server with its unread bytes ("other"), where uvicorn answers it as any other. A process that retires
  sends its connections back too ("moved"), for another process to serve.
- **Framing.** A request the process cannot frame gets the status `RequestError` names and the
  connection is closed; a body over the gate's limit gets 413. A client that asks for it gets
  `100 Continue` before it sends its body.
- **Idle connections** close after `KEEP_ALIVE_S` (uvicorn's default); a connection is closed with
  `shutdown`, which ends it for the server's descriptor too, and the server is told.
"""
from __future__ import annotations

import collections
import logging
import select
import selectors
import socket
import threading
import time
from typing import TYPE_CHECKING

from semreg.errors import PayloadTooLarge, SemregError
from semreg.http1.server import CONTINUE, RequestError, RequestHead, chunked_body, encode_response, end_connection, parse_head
from semreg.sparql.channel import Channel
from semreg.sparql.service import METHODS, PATH, QueryService, Reply, error_reply

log = logging.getLogger("semreg.sparql_connections")

KEEP_ALIVE_S = 5.0
WRITE_TIMEOUT_S = 30.0
READ_BYTES = 16 * 1024


class _FramingError(SemregError):
    """A request this process cannot frame (its status set from `RequestError`)."""


class Conn:
    """A connection this process serves: its socket, and what was read of it but not yet answered."""

    __slots__ = ("id", "sock", "buffer", "idle_since", "continued", "host", "client")

    def __init__(self, conn_id: int, sock: socket.socket, data: bytes) -> None:
        self.id = conn_id
        self.sock = sock
        self.buffer = bytearray(data)
        self.idle_since = time.monotonic()
        self.continued = False
        try:
            host, port = sock.getsockname()[:2]
            self.host = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
            self.client = sock.getpeername()[0]
        except OSError:
            self.host, self.client = "localhost", "unknown"


class ServedConnections:
    """The connections' part of `semreg.sparql.connections.ConnectionServer`, whose state it shares."""

    channel: Channel
    service: QueryService | None
    generation: int
    conns: dict[int, Conn]
    waiting: collections.deque[Conn]  # adopted with a request already read
    selector: selectors.BaseSelector
    lock: threading.Lock  # who owns the connections: the loop or the watcher handing them back
    retiring: bool
    observations: list[tuple[str, int, float]]
    swept_at: float

    if TYPE_CHECKING:  # the other parts' methods this part calls: declared for mypy only
        # -- the server's (`ConnectionServer`) ------------------------------------------------------------------
        def sync(self, deadline: float) -> None: ...

        def _ask(self, key: str | None, deadline: float) -> SemregError | None: ...

        def _begin(self, conn_id: int, started: float, deadline: float) -> None: ...

        def _end(self) -> None: ...

    # -- connections ----------------------------------------------------------------------------------------
    def _adopt(self, conn_id: int, data: bytes) -> None:
        if not self.channel.fds:
            log.error("a connection came without its descriptor; it is dropped", extra={"conn": conn_id})
            self.channel.send(("closed", [conn_id]))
            return
        sock = socket.socket(fileno=self.channel.fds.popleft())
        sock.setblocking(False)  # with a timeout, CPython would poll before every recv and send
        conn = Conn(conn_id, sock, data)
        with self.lock:
            self.conns[conn_id] = conn
            self.selector.register(sock, selectors.EVENT_READ, conn)
        if self.retiring:
            self._give_back([conn], "moved")
        elif conn.buffer:
            self.waiting.append(conn)  # answered by the loop, never inside another request's wait

    def _readable(self, conn: Conn) -> None:
        with self.lock:
            if self.conns.get(conn.id) is not conn:
                return  # handed back by the watcher meanwhile
        try:
            data = conn.sock.recv(READ_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close(conn)
            return
        conn.buffer += data
        self._process(conn)

    def _process(self, conn: Conn) -> None:
        """Answer every whole request in the connection's buffer, in order."""
        while conn.buffer and self.conns.get(conn.id) is conn:
            try:
                head = parse_head(conn.buffer)
                if head is None:
                    return
                if head.path != PATH or head.method not in METHODS or self.service is None or self.retiring:
                    self._give_back([conn], "other" if not self.retiring else "moved")
                    return
                body = self._body(conn, head)
                if body is None:
                    return
            except RequestError as exc:
                self._refuse(conn, exc)
                return
            conn.continued = False
            reply = self._answer(conn, head, body[0])
            del conn.buffer[:body[1]]
            self._write(conn, encode_response(reply.status, reply.headers, reply.body, keep_alive=head.keep_alive))
            if not head.keep_alive:
                self._close(conn)
                return
            conn.idle_since = time.monotonic()

    def _body(self, conn: Conn, head: RequestHead) -> tuple[bytes, int] | None:
        """(body, end of the request in the buffer), or None until the whole body is in."""
        assert self.service is not None
        limit = self.service.gate.max_body_bytes
        if head.chunked:
            whole = chunked_body(conn.buffer, head.size, limit)
        else:
            if head.length > limit:
                raise RequestError(413, f"the request body is {head.length} bytes; the limit is {limit} bytes.")
            end = head.size + head.length
            whole = (bytes(conn.buffer[head.size:end]), end) if len(conn.buffer) >= end else None
        if whole is None and head.expect_continue and not conn.continued:
            conn.continued = True
            self._write(conn, CONTINUE)
        return whole

    def _answer(self, conn: Conn, head: RequestHead, body: bytes) -> Reply:
        assert self.service is not None
        started = time.monotonic()
        deadline = started + self.service.gate.time_limit_s
        self._begin(conn.id, started, deadline)
        try:
            reply = self.service.respond(head, body, host=head.headers.get("host") or conn.host, client=conn.client,
                                         deadline=deadline, replica=self, ask=self._ask)
        except Exception:  # a failure of this code, not of the query: the client still gets an answer
            log.exception("unexpected error answering a SPARQL request")
            reply = Reply(500, [(b"content-type", b"application/json")],
                          b'{"error":"the server failed to handle this request; the log says why."}')
        finally:
            self._end()
        self.observations.append((head.method, reply.status, time.monotonic() - started))
        return reply

    def _write(self, conn: Conn, data: bytes) -> None:
        """All of `data`; a client that reads too slowly for `WRITE_TIMEOUT_S` loses its connection."""
        view = memoryview(data)
        deadline = None
        try:
            while view:
                try:
                    view = view[conn.sock.send(view):]
                except BlockingIOError:
                    deadline = deadline or time.monotonic() + WRITE_TIMEOUT_S
                    left = deadline - time.monotonic()
                    if left <= 0 or not select.select([], [conn.sock], [], left)[1]:
                        raise TimeoutError("the client stopped reading") from None
        except OSError:
            self._close(conn)

    def _refuse(self, conn: Conn, exc: RequestError) -> None:
        error = (PayloadTooLarge(exc.message, limit_bytes=self.service.gate.max_body_bytes)
                 if exc.status == 413 and self.service is not None else _FramingError(exc.message))
        error.status = exc.status
        reply = error_reply(error)
        self._write(conn, encode_response(reply.status, reply.headers, reply.body, keep_alive=False))
        self._close(conn)

    def _close(self, conn: Conn) -> None:
        with self.lock:
            if self.conns.pop(conn.id, None) is None:
                return
            self.selector.unregister(conn.sock)
        end_connection(conn.sock)
        self.channel.send(("closed", [conn.id]))

    def _give_back(self, conns: list[Conn], reason: str) -> None:
        """Send connections back to the server with what was read of them (the caller may hold the lock)."""
        back = []
        for conn in conns:
            if self.conns.pop(conn.id, None) is None:
                continue
            self.selector.unregister(conn.sock)
            back.append((conn.id, bytes(conn.buffer)))
            conn.sock.close()  # the server's descriptor keeps the connection open
        if back:
            self.channel.send(("back", back, reason))

    def _expire_idle(self) -> None:
        if not self.conns:
            return
        now = time.monotonic()
        if now - self.swept_at < 1.0:
            return
        self.swept_at = now
        for conn in [c for c in self.conns.values() if now - c.idle_since > KEEP_ALIVE_S]:
            self._close(conn)
