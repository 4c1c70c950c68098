"""A query process serving `/sparql` connections itself, beside the queries the server sends it.

`semreg serve` hands a connection whose first request is for `/sparql` to a query process (with the
bytes read so far): from then on the process reads its requests, evaluates them on its replica and writes
the answers, and the server's event loop never sees them. A process holds several connections and serves
them one request at a time. The server keeps its own descriptor of each, so that it can answer for a
process it killed.

- **A request that is not `GET`/`POST /sparql`** on such a connection sends the connection back to the
  server with its unread bytes ("other"), where uvicorn answers it as any other.
- **A long query.** A watcher thread notices an evaluation still running after `HANDBACK_S` (or half the
  time limit, when that is shorter): it sends the process's other connections back to the server with
  what was read of them ("moved"), so that nothing waits behind the query, and says so ("long"), so that
  the server sends the process nothing new and kills it at the query's deadline if it is still running.
  After `DEMOTE_S` it drops the process to the lowest CPU priority. A process that had a long query
  retires once it is over (a fresh fork is cheaper than the priority back).
- **Read-your-writes.** Before a query the process compares what it has taken in with the page the
  server shares (`semreg.sparql.shared_page`); when it is behind it asks the server for the changes it holds
  back (`("flush", ticket)`) and reads them until it has everything acknowledged before the query
  arrived. Changes wait, in the server and then unapplied here, until a query needs them.
- **Idle connections** close after `KEEP_ALIVE_S` (uvicorn's default); a connection is closed with
  `shutdown`, which ends it for the server's descriptor too, and the server is told.
- **Metrics.** Requests are counted here and sent to the server about once a second.

Messages from the server: `("conn", id, data)` with the connection's descriptor; `("changes", ...)`,
`("ticket", n)`, `("prefixes", version, map)`, `("gate", Gate)`, `("query", qid, job)`,
`("answer", seq, error)`, `("retire",)`, `("exit",)`. To the server: `("back", [(id, data)], reason)`,
`("closed", [id])`, `("long", conn, seq, deadline)`, `("flush", ticket)`, `("ask", seq, key)`,
`("metrics", [...])`, `("result" | "error", qid, ...)`.
"""
from __future__ import annotations

import array
import collections
import contextlib
import logging
import os
import select
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pyoxigraph as ox

from semreg.errors import PayloadTooLarge, SemregError, Unavailable
from semreg.http1.server import CONTINUE, RequestError, RequestHead, chunked_body, encode_response, end_connection, parse_head
from semreg.sparql import replica
from semreg.sparql.frames import FrameBuffer, encode
from semreg.sparql.protocol import QueryRequest
from semreg.sparql.runner import Limits, run_query, time_limit_error
from semreg.sparql.service import EARLY_STOP_S, METHODS, PATH, Gate, QueryService, Reply, error_reply
from semreg.sparql.shared_page import SharedPage

log = logging.getLogger("semreg.sparql_connections")

KEEP_ALIVE_S = 5.0
HANDBACK_S = 0.1
DEMOTE_S = 0.25
LOWEST_PRIORITY = 19
WRITE_TIMEOUT_S = 30.0
READ_BYTES = 16 * 1024
METRICS_EVERY_S = 1.0
METRICS_BATCH = 512
DEFER_LIMIT = 64  # batches of changes kept unapplied; past it they are applied while idle
MAX_FDS = 64


class _FramingError(SemregError):
    """A request this process cannot frame (its status set from `RequestError`)."""


class Channel:
    """The process's end of its socket to the server: pickled frames both ways, descriptors inward."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.frames = FrameBuffer()
        self.fds: collections.deque[int] = collections.deque()
        self.inbox: collections.deque[Any] = collections.deque()
        self.lock = threading.Lock()  # two threads send

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: Any) -> None:
        with self.lock:
            self.sock.sendall(encode(message))

    def receive(self, timeout: float | None = None) -> bool:
        """Read what the server sent (waiting up to `timeout`); False once it has gone."""
        if timeout is not None:
            ready, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
            if not ready:
                return True
        try:
            data, ancillary, _, _ = self.sock.recvmsg(1 << 18, socket.CMSG_SPACE(MAX_FDS * 4))
        except (ConnectionError, OSError):
            return False
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
                self.fds.extend(fds)
        if not data:
            return False
        self.inbox.extend(self.frames.feed(data))
        return True


class _Conn:
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


class ConnectionServer:
    def __init__(self, channel: Channel, store: ox.Store, page: SharedPage, slot: int, gate: Gate | None,
                 prefixes: dict[str, str] | None = None, prefix_version: int = 0, ticket: int = 0) -> None:
        self.channel = channel
        self.store = store
        self.page = page
        self.slot = slot
        self.service = QueryService(store, gate) if gate is not None else None
        if self.service is not None:
            self.service.prefixes = prefixes
        self.prefixes = prefixes or {}
        self.prefix_version = prefix_version
        self.ticket = ticket  # the last ticket received: every change at or below it is in `deferred` or applied
        self.generation = 0  # batches applied (the result cache's key)
        self.asked_ticket = 0
        self.deferred: list[Any] = []
        self.conns: dict[int, _Conn] = {}
        self.selector = selectors.DefaultSelector()
        self.selector.register(channel.sock, selectors.EVENT_READ, None)
        self.lock = threading.Lock()  # who owns the connections: the loop or the watcher handing them back
        self.cond = threading.Condition()
        self.current: tuple[int, int, float, float] | None = None  # (seq, conn, started, deadline)
        self.watcher_sleeping = False
        self.retiring = False
        self.exiting = False
        self.jobs: collections.deque[Any] = collections.deque()
        self.job_prefixes: dict[str, str] | None = None
        self.waiting: collections.deque[_Conn] = collections.deque()  # adopted with a request already read
        self.answers: dict[int, Any] = {}
        self.asked = 0
        self.observations: list[tuple[str, int, float]] = []
        self.flushed_at = time.monotonic()
        self.swept_at = time.monotonic()
        self.watcher = threading.Thread(target=self._watch, name="semreg-query-watcher", daemon=True)

    # -- the loop -----------------------------------------------------------------------------------------
    def run(self) -> int:
        self.watcher.start()
        while not self.exiting:
            timeout = self._timeout()
            for key, _ in self.selector.select(timeout):
                if key.data is None:
                    if not self.channel.receive(0):
                        return 0
                    self._handle_inbox()
                else:
                    self._readable(key.data)
                if self.exiting:
                    break
            while self.waiting and not self.exiting:
                conn = self.waiting.popleft()
                if self.conns.get(conn.id) is conn:
                    self._process(conn)
            while self.jobs and not self.exiting:
                self._job(self.jobs.popleft())
            if len(self.deferred) > DEFER_LIMIT and self.current is None:
                self._apply()
            self._expire_idle()
            self._flush_metrics()
            if self.retiring and self.current is None:
                self._give_back(list(self.conns.values()), "moved")
                self._flush_metrics(force=True)
                return 0
        self._flush_metrics(force=True)
        return 0

    def _timeout(self) -> float | None:
        if self.conns or self.observations:
            return 1.0
        return None

    def _handle_inbox(self) -> None:
        inbox = self.channel.inbox
        while inbox:
            self._message(inbox.popleft())

    def _message(self, message: Any) -> None:
        kind = message[0]
        if kind == "changes":
            self.deferred.append(message[1])
        elif kind == "ticket":
            self.ticket = message[1]
        elif kind == "prefixes":
            _, self.prefix_version, self.prefixes = message
            if self.service is not None:
                self.service.prefixes = self.prefixes
        elif kind == "conn":
            self._adopt(message[1], message[2])
        elif kind == "gate":
            if self.service is None:
                self.service = QueryService(self.store, message[1])
                self.service.prefixes = self.prefixes
            else:
                self.service.set_gate(message[1])
        elif kind == "query":
            self.jobs.append(message)
        elif kind == "answer":
            self.answers[message[1]] = message[2]
        elif kind == "retire":
            self.retiring = True
        elif kind == "exit":
            self.exiting = True

    # -- the replica --------------------------------------------------------------------------------------
    def sync(self, deadline: float) -> None:
        """Take in every change and prefix acknowledged before now (the `Replica` of `QueryService`)."""

        def caught_up() -> bool:
            requested, prefixes = self.page.wanted()
            if requested > self.ticket and requested > self.asked_ticket:
                self.asked_ticket = requested
                self.channel.send(("flush", requested))  # the server holds changes back until asked
            return self.ticket >= requested and self.prefix_version >= prefixes

        self._wait_for_server(caught_up, deadline, "the server stopped while the query waited for its changes")
        self._apply()

    def _wait_for_server(self, done: Callable[[], bool], deadline: float, stopped: str) -> None:
        """Read the server's messages until `done()`; 503 at the deadline, or when the server has gone."""
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                raise time_limit_error(self._time_limit())
            if not self.channel.receive(left):
                raise Unavailable(f"{stopped}; try again.")
            self._handle_inbox()

    def _apply(self) -> None:
        for changes in self.deferred:
            replica.apply(self.store, changes)
            self.generation += 1
        self.deferred.clear()

    def _time_limit(self) -> float:
        return self.service.gate.time_limit_s if self.service is not None else 10.0

    # -- connections --------------------------------------------------------------------------------------
    def _adopt(self, conn_id: int, data: bytes) -> None:
        if not self.channel.fds:
            log.error("a connection came without its descriptor; it is dropped", extra={"conn": conn_id})
            self.channel.send(("closed", [conn_id]))
            return
        sock = socket.socket(fileno=self.channel.fds.popleft())
        sock.setblocking(False)  # with a timeout, CPython would poll before every recv and send
        conn = _Conn(conn_id, sock, data)
        with self.lock:
            self.conns[conn_id] = conn
            self.selector.register(sock, selectors.EVENT_READ, conn)
        if self.retiring:
            self._give_back([conn], "moved")
        elif conn.buffer:
            self.waiting.append(conn)  # answered by the loop, never inside another request's wait

    def _readable(self, conn: _Conn) -> None:
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

    def _process(self, conn: _Conn) -> None:
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

    def _body(self, conn: _Conn, head: RequestHead) -> tuple[bytes, int] | None:
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

    def _answer(self, conn: _Conn, head: RequestHead, body: bytes) -> Reply:
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

    def _write(self, conn: _Conn, data: bytes) -> None:
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

    def _refuse(self, conn: _Conn, exc: RequestError) -> None:
        error = (PayloadTooLarge(exc.message, limit_bytes=self.service.gate.max_body_bytes)
                 if exc.status == 413 and self.service is not None else _FramingError(exc.message))
        error.status = exc.status
        reply = error_reply(error)
        self._write(conn, encode_response(reply.status, reply.headers, reply.body, keep_alive=False))
        self._close(conn)

    def _close(self, conn: _Conn) -> None:
        with self.lock:
            if self.conns.pop(conn.id, None) is None:
                return
            self.selector.unregister(conn.sock)
        end_connection(conn.sock)
        self.channel.send(("closed", [conn.id]))

    def _give_back(self, conns: list[_Conn], reason: str) -> None:
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

    # -- the server's queries (sent over the channel) ---------------------------------------------------
    def _job(self, message: Any) -> None:
        _, qid, job = message
        self._apply()
        if job.prefixes is not None:
            self.job_prefixes = job.prefixes
        started = time.monotonic()
        deadline = started + job.time_left_s
        self._begin(0, started, deadline)
        try:
            answer = evaluate(self.store, qid, job, self.job_prefixes or self.prefixes)
        finally:
            self._end()
        self.channel.send(answer)

    # -- the round trip to the server ------------------------------------------------------------------
    def _ask(self, key: str | None, deadline: float) -> SemregError | None:
        self.asked += 1
        seq = self.asked
        self.channel.send(("ask", seq, key))
        self._wait_for_server(lambda: seq in self.answers, deadline, "the server stopped while the query waited")
        return self.answers.pop(seq)

    # -- evaluation, watched --------------------------------------------------------------------------
    def _begin(self, conn_id: int, started: float, deadline: float) -> None:
        seq = self.page.begin(self.slot, conn_id, deadline)
        self.current = (seq, conn_id, started, deadline)
        if self.watcher_sleeping:
            with self.cond:
                self.cond.notify()

    def _end(self) -> None:
        self.page.end(self.slot)
        self.current = None

    def _watch(self) -> None:
        """Hand the other connections back when an evaluation runs long; lower the priority after."""
        while True:
            with self.cond:
                self.watcher_sleeping = True
                while self.current is None:
                    self.cond.wait()
                self.watcher_sleeping = False
            current = self.current
            if current is None:
                continue
            seq, conn_id, started, deadline = current
            due = started + min(HANDBACK_S, (deadline - started) / 2)
            if time.monotonic() < due:
                time.sleep(due - time.monotonic())
                continue
            if self.current is not current:
                continue
            with self.lock:
                self.retiring = True
                self._give_back([c for c in self.conns.values() if c.id != conn_id], "moved")
            self.channel.send(("long", conn_id, seq, deadline))
            delay = started + DEMOTE_S - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if self.current is current:
                try:
                    os.setpriority(os.PRIO_PROCESS, os.getpid(), LOWEST_PRIORITY)  # the thread evaluating
                except OSError as exc:
                    log.warning("a long query's process could not lower its priority", extra={"error": str(exc)})
            return

    # -- metrics ----------------------------------------------------------------------------------------
    def _flush_metrics(self, force: bool = False) -> None:
        if not self.observations:
            return
        now = time.monotonic()
        if force or len(self.observations) >= METRICS_BATCH or now - self.flushed_at >= METRICS_EVERY_S:
            observations, self.observations = self.observations, []
            self.flushed_at = now
            with contextlib.suppress(OSError):  # the server has gone: the loop sees it at its next read
                self.channel.send(("metrics", observations))


def evaluate(store: ox.Store, qid: int, job: Any, prefixes: dict[str, str]) -> tuple:
    """A query the server sent (`semreg.sparql.pool.Job`), evaluated: the message that answers it."""
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
