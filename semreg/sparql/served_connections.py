"""The `/sparql` connections a query process serves itself (`semreg.sparql.connections`): each one read,
its requests framed and answered in order, and closed or sent back to the server.

The server hands a connection over with the bytes it read so far and its descriptor; the process then
reads its requests, evaluates them on its replica and writes the answers, one request at a time. The
server keeps its own descriptor of each, so that it can answer for a process it killed.

- **A request that is not `GET`/`POST /sparql`** on such a connection sends the connection back to the
  server with its unread bytes ("other"), where uvicorn answers it as any other. A process that retires
  sends its connections back too ("moved"), for another process to serve.
- **Framing** is llhttp's (`semreg.http1.server.RequestReader`): a request the process cannot frame gets
  the status `RequestError` names and the connection is closed; a body over the gate's limit gets 413.
  A client that asks for it gets `100 Continue` before it sends its body.
- **Writes never block.** Answers wait in the connection's own buffer while the client is slow; past
  `HIGH_WATER_BYTES` the process stops reading (and answering) that connection until it drains, and a
  client that reads nothing for `WRITE_TIMEOUT_S` loses its connection. Other connections go on.
- **Timers** (uvicorn's keep-alive timeout, `KEEP_ALIVE_S`): a head not whole that long after its first
  byte, or a body that long without a byte, gets 408 and the connection is closed; a connection idle
  between requests that long is closed. A connection is closed with `shutdown`, which ends it for the
  server's descriptor too, and the server is told.

`ServedConnections` is the part of the process's loop (`semreg.sparql.connections.ConnectionServer`) that
holds the connections: it frames their requests and writes the answers; what a request is answered with
is the process's (`answer`, given at its making), as is the channel the connections go back on.
"""
from __future__ import annotations

import collections
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable

from semreg.errors import PayloadTooLarge, SemregError
from semreg.http1.server import CONTINUE, Request, RequestError, RequestHead, RequestReader, encode_response, end_connection
from semreg.sparql.channel import Channel
from semreg.sparql.service import METHODS, PATH, Gate, Reply, error_reply

log = logging.getLogger("semreg.sparql_connections")

KEEP_ALIVE_S = 5.0
WRITE_TIMEOUT_S = 30.0
HIGH_WATER_BYTES = 256 * 1024  # answers waiting for a slow reader, past which its requests wait
READ_BYTES = 16 * 1024


class _FramingError(SemregError):
    """A request this process cannot frame (its status set from `RequestError`)."""


class Conn:
    """A connection this process serves: its socket, its reader, and the answers not yet sent."""

    __slots__ = ("id", "sock", "reader", "ready", "out", "events", "closing", "ended", "active_at", "head_since",
                 "continued", "host", "client", "data")

    def __init__(self, conn_id: int, sock: socket.socket, reader: RequestReader, data: bytes) -> None:
        self.id = conn_id
        self.sock = sock
        self.reader = reader
        self.ready: collections.deque[Request] = collections.deque()  # read, not yet answered
        self.out = bytearray()
        self.events = selectors.EVENT_READ
        self.closing = False  # close once `out` is sent
        self.ended = False  # the client sent its last byte: answer what it sent, then close
        self.active_at = time.monotonic()  # the last byte read or sent
        self.head_since: float | None = None  # the first byte of a head not yet whole
        self.continued = False
        self.data = data  # read by the server before the hand-over, not yet fed
        try:
            host, port = sock.getsockname()[:2]
            self.host = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
            self.client = sock.getpeername()[0]
        except OSError:
            self.host, self.client = "localhost", "unknown"


# answer(connection, request head, body) -> the reply: a request read on a connection, evaluated by the process
Answer = Callable[["Conn", RequestHead, bytes], Reply]


class ServedConnections:
    """The connections a query process serves: read, answered in order, closed or sent back."""

    def __init__(self, channel: Channel, selector: selectors.BaseSelector, answer: Answer, gate: Gate | None) -> None:
        self.channel = channel
        self.selector = selector  # the process's loop's: it waits on the channel too
        self.answer = answer
        self.gate = gate  # None until the server sends one: no request for /sparql is taken before
        self.conns: dict[int, Conn] = {}
        self.waiting: collections.deque[Conn] = collections.deque()  # adopted with a request already read
        self.lock = threading.Lock()  # who owns the connections: the loop or the watcher handing them back
        self.retiring = False  # take no new request for /sparql: the connections go back to the server
        self.swept_at = time.monotonic()

    def retire(self) -> None:
        self.retiring = True

    def serve_waiting(self, exiting: Callable[[], bool]) -> None:
        """Answer the connections handed over with a request already read (never inside another's wait)."""
        while self.waiting and not exiting():
            conn = self.waiting.popleft()
            if self.conns.get(conn.id) is conn:
                self._process(conn)

    def give_back_all(self) -> bool:
        """Send every connection back to the server ("moved"); whether none is left (some may still have
        answers to send)."""
        self._give_back(list(self.conns.values()), "moved")
        return not self.conns

    def hand_back_others(self, conn_id: int) -> None:
        """From the watcher, while the loop evaluates for `conn_id`: retire, and send every other connection back
        to the server, closing those with answers unsent (their clients stopped reading)."""
        with self.lock:
            self.retiring = True
            self._give_back([c for c in self.conns.values() if c.id != conn_id], "moved", drop_unsent=True)

    # -- connections ----------------------------------------------------------------------------------------
    def adopt(self, conn_id: int, data: bytes) -> None:
        """A connection the server handed over (its descriptor came with the message), with what it read of it."""
        if not self.channel.fds:
            log.error("a connection came without its descriptor; it is dropped", extra={"conn": conn_id})
            self.channel.send(("closed", [conn_id]))
            return
        sock = socket.socket(fileno=self.channel.fds.popleft())
        sock.setblocking(False)  # with a timeout, CPython would poll before every recv and send
        limit = self.gate.max_body_bytes if self.gate is not None else 0
        conn = Conn(conn_id, sock, RequestReader(limit, self._wanted), data)
        with self.lock:
            self.conns[conn_id] = conn
            self.selector.register(sock, selectors.EVENT_READ, conn)
        if self.retiring:
            self._give_back([conn], "moved")
        elif data:
            self.waiting.append(conn)  # answered by the loop, never inside another request's wait

    def _wanted(self, method: str, path: str) -> bool:
        return path == PATH and method in METHODS and self.gate is not None and not self.retiring

    def event(self, conn: Conn, mask: int) -> None:
        """The selector says `conn` is readable or writable."""
        if mask & selectors.EVENT_WRITE:
            self._flush(conn)
            self._answer_ready(conn)
            self._settle(conn)
        if mask & selectors.EVENT_READ and self.conns.get(conn.id) is conn:
            self._readable(conn)

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
            if conn.out or conn.ready:  # a client that half-closed still gets its answers
                conn.ended = True
                self._settle(conn)
            else:
                self._close(conn)
            return
        self._received(conn, data)

    def _process(self, conn: Conn) -> None:
        """Feed what the server read before the hand-over."""
        data, conn.data = conn.data, b""
        self._received(conn, data)

    def _received(self, conn: Conn, data: bytes) -> None:
        now = time.monotonic()
        conn.active_at = now
        reader = conn.reader
        try:
            conn.ready.extend(reader.feed(data))
        except RequestError as exc:
            conn.ready.extend(reader.read_before_error())
            self._answer_ready(conn)
            self._refuse(conn, exc)
            return
        if reader.between or reader.head is not None:
            conn.head_since = None
        elif conn.head_since is None:
            conn.head_since = now
        self._answer_ready(conn)
        head = reader.head
        if head is not None and head.expect_continue and not conn.continued and not conn.ready:
            conn.continued = True
            self._write(conn, CONTINUE)
        self._settle(conn)

    def _answer_ready(self, conn: Conn) -> None:
        """Answer the requests read, in order, while the client keeps up with the answers."""
        while conn.ready and len(conn.out) < HIGH_WATER_BYTES and not conn.closing and self.conns.get(conn.id) is conn:
            head, body = conn.ready.popleft()
            conn.continued = False
            reply = self.answer(conn, head, body)
            self._write(conn, encode_response(reply.status, reply.headers, reply.body, keep_alive=head.keep_alive))
            if not head.keep_alive:
                conn.closing = True
                conn.ready.clear()

    def _settle(self, conn: Conn) -> None:
        """Close or give back a connection whose answers are all sent; else wait for what it needs next."""
        if self.conns.get(conn.id) is not conn:
            return
        if not conn.out and not conn.ready:
            if conn.closing or conn.ended:
                self._close(conn)
                return
            if conn.reader.other or self.retiring:
                self._give_back([conn], "moved" if self.retiring else "other")
                return
        reading = len(conn.out) < HIGH_WATER_BYTES and not conn.closing and not conn.ended and not conn.reader.other
        events = (selectors.EVENT_WRITE if conn.out else 0) | (selectors.EVENT_READ if reading else 0)
        if events and events != conn.events:
            with self.lock:
                if self.conns.get(conn.id) is conn:
                    self.selector.modify(conn.sock, events, conn)
                    conn.events = events

    def _write(self, conn: Conn, data: bytes) -> None:
        conn.out += data
        self._flush(conn)

    def _flush(self, conn: Conn) -> None:
        """Send what the socket takes now; the rest waits for the socket to be writable."""
        try:
            while conn.out:
                sent = conn.sock.send(conn.out)
                del conn.out[:sent]
                conn.active_at = time.monotonic()
        except BlockingIOError:
            return
        except OSError:
            conn.out.clear()
            conn.ready.clear()
            conn.closing = True

    def _refuse(self, conn: Conn, exc: RequestError) -> None:
        error = (PayloadTooLarge(exc.message, limit_bytes=self.gate.max_body_bytes)
                 if exc.status == 413 and self.gate is not None else _FramingError(exc.message))
        error.status = exc.status
        reply = error_reply(error)
        conn.ready.clear()
        self._write(conn, encode_response(reply.status, reply.headers, reply.body, keep_alive=False))
        conn.closing = True
        self._settle(conn)

    def _close(self, conn: Conn) -> None:
        with self.lock:
            if self.conns.pop(conn.id, None) is None:
                return
            self.selector.unregister(conn.sock)
        end_connection(conn.sock)
        self.channel.send(("closed", [conn.id]))

    def _give_back(self, conns: list[Conn], reason: str, *, drop_unsent: bool = False) -> None:
        """Send connections back to the server with what was read of them (the caller may hold the lock).
        One with answers still to send stays until they are sent; with `drop_unsent` (the server is about
        to place every one elsewhere) it is closed instead: its client has stopped reading."""
        back, dropped = [], []
        for conn in conns:
            if self.conns.get(conn.id) is not conn:
                continue
            unsent = bool(conn.out or conn.ready or conn.closing)
            if unsent and not drop_unsent:
                continue
            del self.conns[conn.id]
            self.selector.unregister(conn.sock)
            if unsent:
                end_connection(conn.sock)
                dropped.append(conn.id)
                continue
            back.append((conn.id, conn.reader.unread() + conn.data))
            conn.sock.close()  # the server's descriptor keeps the connection open
        if dropped:
            self.channel.send(("closed", dropped))
        if back:
            self.channel.send(("back", back, reason))

    def expire_idle(self) -> None:
        """Close the connections whose timers ran out (about once a second)."""
        if not self.conns:
            return
        now = time.monotonic()
        if now - self.swept_at < 1.0:
            return
        self.swept_at = now
        for conn in list(self.conns.values()):
            quiet = now - conn.active_at
            if conn.out:
                if quiet > WRITE_TIMEOUT_S:
                    self._close(conn)  # the client stopped reading
            elif conn.head_since is not None and now - conn.head_since > KEEP_ALIVE_S:
                self._refuse(conn, RequestError(408, "the request head did not arrive in time."))
            elif conn.reader.head is not None and not conn.ready and quiet > KEEP_ALIVE_S:
                self._refuse(conn, RequestError(408, "the request body stopped arriving."))
            elif conn.reader.between and not conn.ready and not conn.closing and quiet > KEEP_ALIVE_S:
                self._close(conn)
