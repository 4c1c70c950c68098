"""The server's side of the query processes: a replica fed with changes, a pool that evaluates queries
in processes it can kill, and the `/sparql` connections it hands to them.

pyoxigraph cannot cancel a query, and a thread cannot be stopped, so queries run in processes
(`semreg.sparql.worker`): a template holding a copy of the visible graphs, and workers forked from it.

- **Replica.** `publish(item)` takes, from any thread and in order, `("snapshot", bytes)` (loaded by a
  new template; everything published before it is contained in it), `("changes", [...])`,
  `("ticket", n)` (every change the feed was asked for up to `n` is in the stream before it),
  `("prefixes", version, map)` and `("gate", Gate)`. `drain()` hands them to the processes on the event
  loop. Changes and tickets wait: the template's until writes pause (`QUIET_S`), before it forks, or
  every `DEFER_LIMIT_BYTES`; a worker's until a query needs them (a query sent to it, or a worker asking
  with `("flush", ticket)`). A worker that falls `DEFER_LIMIT_BYTES` behind while nobody queries it is
  replaced by a fresh fork. A registry with no SPARQL traffic pays for one copy, not one per process,
  and not during a burst of writes. `note_requested(n)` and
  `note_prefixes(...)` write the shared page (`semreg.sparql.shared_page`) before a write is acknowledged,
  so a process knows what a query must have seen without asking.
- **Queries the server sends** (`evaluate`, the ASGI route): each takes one idle worker. With none idle,
  the template forks another (a few milliseconds), up to `max_workers`; past that, queries wait their
  turn. Extra workers retire after `idle_s`; `min_workers` stay.
- **Connections** (`adopt`, from `semreg.sparql.handoff`): each goes to the worker with the fewest, not one
  busy with a long query; the worker serves it (`semreg.sparql.connections`) and sends it back when it
  carries a request for another route, or when a long query would make it wait.
- **Priority.** The processes run at a lower CPU priority than the server (nice 5). A query still
  running after `LONG_QUERY_S` drops to the lowest (nice 19), so a small query sent beside long ones
  gets the CPU first; its worker retires once that query ends (a fresh fork is as cheap).
- **Time limit.** At its deadline a query gets its 503 at once: if it was waiting it is dropped; if it
  was running, its worker is killed (SIGKILL) and another is forked; for a connection's query, the
  server writes the 503 once the process is gone. Nothing keeps burning CPU after the answer. A worker
  also stops streaming queries itself just before the deadline, which spares it.
- **Failure.** A worker that dies mid-query answers 503 for that query and is replaced; its other
  connections are closed. A template that dies takes its workers with it (they die with their parent,
  so that nothing outlives the server); it is started again from a fresh snapshot, and queries wait for
  it within their time limit.
- **Stop.** `stop()` answers every waiting and running query with 503 at once and kills the processes,
  so that a server asked to stop never waits on a query.
"""
from __future__ import annotations

import array
import asyncio
import collections
import contextlib
import logging
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pyoxigraph as ox

from semreg.errors import SemregError, Unavailable
from semreg.http1.server import encode_response, end_connection
from semreg.sparql import replica
from semreg.sparql.frames import FrameBuffer, encode
from semreg.sparql.runner import Output, time_limit_error
from semreg.sparql.service import Reply, error_reply
from semreg.sparql.shared_page import SharedPage
from semreg.sparql.worker import PAGE, SECRET_ENV

log = logging.getLogger("semreg.sparql_pool")

MiB = 1024 * 1024
TEMPLATE_RESTART_BACKOFF_S = (0.0, 0.5, 2.0, 10.0)
LONG_QUERY_S = 0.25  # the workers' own `semreg.sparql.connections.DEMOTE_S`
DEFER_LIMIT_BYTES = 16 * MiB  # changes held for the template before it applies them anyway
QUIET_S = 0.5  # the template applies the changes held for it once no change came for this long
STOP_WAIT_S = 1.0  # how long `stop()` waits for killed processes before it answers for their connections

# ask(rate-limit key or None) -> the error to answer instead, or None: the server's part of a request a
# worker serves (its rate limit, a cluster's read barrier)
Asker = Callable[[str | None], Awaitable[SemregError | None]]
# other(socket, bytes already read): a connection whose next request is for another route, to uvicorn
Other = Callable[[socket.socket, bytes], None]
# observe([(method, status, seconds), ...]): requests workers answered on their own connections, for /metrics
Observer = Callable[[list[tuple[str, int, float]]], None]


class Job(NamedTuple):
    """One query as a worker evaluates it (graph IRIs as strings; prefixes only when they changed)."""

    query: str
    default_graphs: tuple[str, ...]
    named_graphs: tuple[str, ...]
    accept: str | None
    base_iri: str | None
    prefixes: dict[str, str] | None
    time_left_s: float
    time_limit_s: float
    result_limit: int | None


@dataclass(eq=False)
class _Pending:
    job: Job
    prefixes_version: int
    prefixes: dict[str, str] | None
    future: asyncio.Future
    deadline: float  # on time.monotonic()
    worker: _Process | None = None
    timer: asyncio.TimerHandle | None = None


@dataclass(eq=False)
class _Conn:
    """A handed-over connection; the server keeps its own descriptor of it while a worker serves it."""

    id: int
    sock: socket.socket
    worker: _Process | None = None
    data: bytes = b""  # what went with it to its worker: sent again if the worker never took it in


@dataclass(eq=False)
class _Process:
    id: int
    role: str  # template | worker
    state: str = "starting"  # starting | idle | busy | dead (a template: starting | waiting | live | dead)
    pid: int | None = None
    transport: asyncio.Transport | None = None
    channel: socket.socket | None = None  # a second handle on the process's socket: frames out, descriptors too
    outbox: collections.deque = field(default_factory=collections.deque)  # [frame, descriptor or -1]
    writing: bool = False
    # Changes held back: the template's until writes pause; a worker's until a query needs them (it asks:
    # `wants`, the ticket it waits for, until which every change goes to it at once) or they pile up.
    deferred: list[bytes] = field(default_factory=list)
    deferred_bytes: int = 0
    wants: int = 0
    current: _Pending | None = None
    prefixes_version: int = -1
    idle_since: float = 0.0
    slot: int = -1
    conns: set[int] = field(default_factory=set)
    retiring: bool = False  # a long query: nothing new goes to it, and it leaves once the query ends
    overdue: bool = False  # killed at a connection's query's deadline

    def send(self, frame: bytes, fd: int = -1) -> None:
        self.outbox.append([memoryview(frame), fd])
        if self.channel is not None and not self.writing:
            self.flush()

    def flush(self) -> None:
        """Write what the outbox holds; on a full socket, wait for it to drain (`writing`)."""
        channel = self.channel
        if channel is None:
            return
        outbox = self.outbox
        while outbox:
            entry = outbox[0]
            data, fd = entry
            try:
                if fd >= 0:
                    sent = channel.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
                    entry[1] = -1  # the descriptor went with the frame's first bytes
                else:
                    sent = channel.send(data)
            except BlockingIOError:
                self._wait_writable()
                return
            except OSError:
                outbox.clear()  # the process has gone; `_lost` follows
                return
            if sent < len(data):
                entry[0] = data[sent:]
                self._wait_writable()
                return
            outbox.popleft()
        if self.writing:
            self.writing = False
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_writer(channel.fileno())

    def _wait_writable(self) -> None:
        if not self.writing and self.channel is not None:
            self.writing = True
            asyncio.get_running_loop().add_writer(self.channel.fileno(), self.flush)

    def close_channel(self) -> None:
        channel, self.channel = self.channel, None
        if channel is not None:
            if self.writing:
                with contextlib.suppress(Exception):
                    asyncio.get_running_loop().remove_writer(channel.fileno())
            self.writing = False
            channel.close()
        self.outbox.clear()


class _Connection(asyncio.Protocol):
    def __init__(self, pool: QueryPool) -> None:
        self.pool = pool
        self.frames = FrameBuffer()
        self.transport: asyncio.Transport | None = None
        self.process: _Process | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            messages = self.frames.feed(data)
        except Exception:  # a process that speaks garbage is dropped, never trusted
            log.exception("a query process sent an unreadable message; its connection is closed")
            assert self.transport is not None
            self.transport.close()
            return
        for message in messages:
            if self.process is None:
                self.process = self.pool._hello(self, message)
                if self.process is None:
                    assert self.transport is not None
                    self.transport.close()
                    return
            else:
                self.pool._message(self.process, message)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.process is not None:
            self.pool._lost(self.process)


class QueryPool:
    def __init__(self, request_snapshot: Callable[[], None], *, min_workers: int = 2, max_workers: int = 8,
                 memory_limit_mib: int = 2048, idle_s: float = 60.0) -> None:
        if min_workers < 1 or max_workers < min_workers:
            raise ValueError("need 1 <= min_workers <= max_workers")
        self.request_snapshot = request_snapshot
        self.min_workers = min_workers
        self.max_workers = max_workers
        self.memory_limit_bytes = max(0, memory_limit_mib) * MiB
        self.idle_s = idle_s
        self.generation = 0  # bumped by every published change: the result cache's key
        self.killed = 0
        self.forked = 0
        self.asker: Asker | None = None
        self.on_other: Other | None = None
        self.observe: Observer | None = None
        self._inbox: collections.deque = collections.deque()
        self._inbox_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dir: str | None = None
        self._server: asyncio.AbstractServer | None = None
        self._secret = secrets.token_hex(16)
        self._template: _Process | None = None
        self._template_proc: subprocess.Popen | None = None
        self._template_failures = 0
        self._workers: dict[int, _Process] = {}
        self._queue: collections.deque[_Pending] = collections.deque()
        self._conns: dict[int, _Conn] = {}
        self._homeless: collections.deque[tuple[_Conn, bytes]] = collections.deque()
        self._slots = max_workers * 2 + 2  # a dying process keeps its slot until it is gone
        self._free_slots = list(range(self._slots - 1, -1, -1))
        self._page: SharedPage | None = None
        self._requested = 0
        self._prefix_version = 0
        self._prefix_map: dict[str, str] = {}
        self._gate: Any = None
        self._next_id = 1
        self._next_qid = 1
        self._next_conn = 1
        self._closed = False
        self._started = False
        self._quiet: asyncio.TimerHandle | None = None

    @classmethod
    def over_store(cls, store: ox.Store, hidden: Iterable[ox.NamedNode] = (), **options: Any) -> QueryPool:
        """A pool over a store that does not change while it serves (its snapshot is all it ever gets)."""
        hidden = tuple(hidden)

        def snapshot() -> None:
            pool.publish(("snapshot", replica.snapshot(store, hidden)))

        pool = cls(snapshot, **options)
        return pool

    # -- life cycle ----------------------------------------------------------------------------------
    async def start(self) -> None:
        """Listen for the processes, start the template, ask for the first snapshot."""
        if self._started:
            return
        self._started = True
        self._loop = asyncio.get_running_loop()
        self._dir = tempfile.mkdtemp(prefix="semreg-query-")  # mode 0700: only this user reaches the socket
        self._page = SharedPage(os.path.join(self._dir, PAGE), self._slots, create=True)
        self._page.publish(self._requested, self._prefix_version)
        path = os.path.join(self._dir, "s")
        self._server = await self._loop.create_unix_server(lambda: _Connection(self), path)
        self._start_template()

    def _start_template(self) -> None:
        assert self._dir is not None
        template = _Process(self._take_id(), "template")
        self._template = template
        env = {**os.environ, SECRET_ENV: self._secret}
        # Started from the event loop's thread: the template's death signal follows that thread.
        self._template_proc = subprocess.Popen([sys.executable, "-m", "semreg.sparql.worker",
                                                os.path.join(self._dir, "s"), str(self._slots)],
                                               env=env, stdin=subprocess.DEVNULL)
        template.pid = self._template_proc.pid
        template.state = "waiting"  # for its snapshot: changes published until then are in it
        self.request_snapshot()
        log.info("query template starting", extra={"pid": template.pid})

    @property
    def ready(self) -> bool:
        """Whether connections can be taken: the template is live, so a worker is there or can be forked
        (a connection waits for it; sending some to the server's route meanwhile would split a burst
        between two paths with two sets of limits)."""
        template = self._template
        return not self._closed and self._gate is not None and template is not None and template.state == "live"

    def stop(self) -> None:
        """Answer every query now with 503 and kill the processes (safe to call twice)."""
        if self._closed:
            return
        self._closed = True
        if self._quiet is not None:
            self._quiet.cancel()
        stopping = Unavailable("the server is stopping; send the query again to another node or after restart.")
        for pending in list(self._queue):
            _fail(pending, stopping)
        self._queue.clear()
        workers = list(self._workers.values())
        for worker in workers:
            if worker.current is not None:
                _fail(worker.current, stopping)
            self._signal(worker)
        if self._template is not None:
            self._signal(self._template)
        _wait_gone([w.pid for w in workers if w.pid is not None], STOP_WAIT_S)
        for worker in workers:
            self._answer_for(worker, error_reply(stopping))
            self._kill(worker)
        self._workers.clear()
        for conn, _ in self._homeless:
            end_connection(conn.sock)
        self._homeless.clear()
        for conn in list(self._conns.values()):
            end_connection(conn.sock)
        self._conns.clear()
        if self._template is not None:
            self._kill(self._template)
        if self._server is not None:
            self._server.close()

    async def close(self) -> None:
        self.stop()
        proc = self._template_proc
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(proc.wait, 5)
        if self._server is not None:
            await self._server.wait_closed()
        if self._page is not None:
            self._page.close()
            self._page = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)

    # -- the replica ----------------------------------------------------------------------------------
    def publish(self, item: tuple) -> None:
        """A stream item (see the module's doc), from any thread, in order.

        Before `start()` changes are dropped: the snapshot `start()` asks for contains them."""
        if not self._started:
            return
        with self._inbox_lock:
            self._inbox.append(item)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self.drain)

    def note_requested(self, ticket: int) -> None:
        """The replica feed was asked for change `ticket` (before the write is acknowledged): a query
        from now on waits for the stream to reach it."""
        self._requested = ticket
        if self._page is not None:
            self._page.publish(requested=ticket)

    def note_prefixes(self, version: int, prefixes: dict[str, str]) -> None:
        """The prefix map changed: the page says so at once, and the stream carries the new map."""
        self._prefix_version = version
        self._prefix_map = prefixes
        if self._page is not None:
            self._page.publish(prefixes=version)
        self.publish(("prefixes", version, prefixes))

    def set_gate(self, gate: Any) -> None:
        """What the workers check of callers on their own connections (`semreg.sparql.service.Gate`)."""
        self._gate = gate
        if self._started:
            self.publish(("gate", gate))

    def drain(self) -> None:
        """Hand what was published to the processes (on the event loop)."""
        while self._inbox:
            with self._inbox_lock:
                if not self._inbox:
                    return
                item = self._inbox.popleft()
            kind = item[0]
            if kind == "snapshot":
                template = self._template
                if template is not None and template.state == "waiting":
                    template.send(encode(("load", item[1])))
                    template.send(encode(("prefixes", self._prefix_version, self._prefix_map)))
                    if self._gate is not None:
                        template.send(encode(("gate", self._gate)))
                    template.state = "live"
                    self._grow()
                continue
            if kind == "changes":
                self.generation += 1
            frame = encode(item)
            template = self._template
            if template is not None and template.state == "live":
                self._defer_to_template(template, frame)
            held = kind in ("changes", "ticket")
            stale: list[_Process] = []
            for worker in self._workers.values():
                if worker.state == "dead":
                    continue
                if not held:
                    worker.send(frame)  # prefixes and the gate go at once
                    continue
                worker.deferred.append(frame)
                worker.deferred_bytes += len(frame)
                if worker.wants:
                    self._flush(worker)
                elif worker.deferred_bytes > DEFER_LIMIT_BYTES and not worker.retiring:
                    stale.append(worker)
                if kind == "ticket" and item[1] >= worker.wants:
                    worker.wants = 0
            for worker in stale:
                self._replace(worker)

    def _replace(self, worker: _Process) -> None:
        """A worker that fell `DEFER_LIMIT_BYTES` behind while nobody queried it: a fresh fork of the
        template (which applies changes once for all) is cheaper than every worker catching up. One
        evaluating takes them instead; one that is not leaves, sending its connections back."""
        page = self._page
        if worker.state == "busy" or (page is not None and worker.slot >= 0 and page.evaluating(worker.slot)):
            self._flush(worker)
            return
        worker.retiring = True
        worker.deferred.clear()
        worker.deferred_bytes = 0
        if worker.state == "starting" or worker.channel is None:
            self._retire(worker, kill=True)
        else:
            worker.send(encode(("retire",)))
        self._grow()

    def _defer_to_template(self, template: _Process, frame: bytes) -> None:
        """The template applies changes once the registry has been quiet for `QUIET_S`, before it forks
        a worker, or when `DEFER_LIMIT_BYTES` have waited: a burst of writes does not share the CPU with
        keeping a copy nobody queries yet."""
        template.deferred.append(frame)
        template.deferred_bytes += len(frame)
        if template.deferred_bytes > DEFER_LIMIT_BYTES:
            self._flush(template)
            return
        if self._quiet is not None:
            self._quiet.cancel()
        assert self._loop is not None
        self._quiet = self._loop.call_later(QUIET_S, self._flush_template)

    def _flush_template(self) -> None:
        self._quiet = None
        template = self._template
        if template is not None and template.state == "live":
            self._flush(template)

    @staticmethod
    def _flush(process: _Process) -> None:
        for frame in process.deferred:
            process.send(frame)
        process.deferred.clear()
        process.deferred_bytes = 0

    # -- queries --------------------------------------------------------------------------------------
    async def evaluate(self, job: Job, prefixes_version: int, deadline: float) -> Output:
        """Run `job` in a worker; `deadline` on `time.monotonic()`. Raises `SemregError` (503 at the deadline)."""
        if not self._started:
            await self.start()
        self.drain()
        if self._closed:
            raise Unavailable("the server is stopping; send the query again to another node or after restart.")
        loop = asyncio.get_running_loop()
        pending = _Pending(job, prefixes_version, job.prefixes, loop.create_future(), deadline)
        worker = self._idle_worker()
        if worker is not None:
            self._run(worker, pending)
        else:
            self._queue.append(pending)
            self._grow()
        pending.timer = loop.call_later(max(0.0, deadline - time.monotonic()), self._expire, pending)
        try:
            return await pending.future
        finally:
            pending.timer.cancel()

    def _idle_worker(self) -> _Process | None:
        for worker in self._workers.values():
            if worker.state == "idle" and not worker.retiring:
                return worker
        return None

    def _run(self, worker: _Process, pending: _Pending) -> None:
        job = pending.job
        if worker.prefixes_version == pending.prefixes_version:
            job = job._replace(prefixes=None)
        else:
            worker.prefixes_version = pending.prefixes_version
        job = job._replace(time_left_s=max(0.0, pending.deadline - time.monotonic()))
        worker.state = "busy"
        worker.current = pending
        pending.worker = worker
        self._flush(worker)  # every change published before the query, in front of it
        qid = self._next_qid
        self._next_qid += 1
        worker.send(encode(("query", qid, job)))

    def _dispatch(self) -> None:
        while self._queue:
            worker = self._idle_worker()
            if worker is None:
                return
            pending = self._queue.popleft()
            if not pending.future.done():
                self._run(worker, pending)

    def _expire(self, pending: _Pending) -> None:
        if pending.future.done():
            return
        pending.future.set_exception(time_limit_error(pending.job.time_limit_s))
        worker = pending.worker
        if worker is None:
            with contextlib.suppress(ValueError):
                self._queue.remove(pending)
            return
        if worker.current is pending:
            log.info("query stopped at its time limit", extra={"worker": worker.pid,
                                                               "time_limit_s": pending.job.time_limit_s})
            self._retire(worker, kill=True)
            self.killed += 1
            self._grow()

    # -- connections ----------------------------------------------------------------------------------
    def adopt(self, sock: socket.socket, data: bytes) -> bool:
        """Take a connection whose next request (begun in `data`) is for `/sparql`; False when no worker
        can take it now (the caller serves it itself)."""
        if not self.ready:
            return False
        self.drain()
        conn = _Conn(self._next_conn, sock)
        self._next_conn += 1
        self._conns[conn.id] = conn
        self._place(conn, data)
        return True

    def _place(self, conn: _Conn, data: bytes) -> None:
        worker = self._home()
        if worker is None:
            self._homeless.append((conn, data))
            self._grow()
            return
        conn.worker = worker
        conn.data = data
        worker.conns.add(conn.id)
        worker.send(encode(("conn", conn.id, data)), conn.sock.fileno())

    def _home(self) -> _Process | None:
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

    def _back(self, process: _Process, items: list[tuple[int, bytes]], reason: str) -> None:
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

    def _closed_conns(self, process: _Process, ids: list[int]) -> None:
        for conn_id in ids:
            conn = self._conns.get(conn_id)
            if conn is None or conn.worker is not process:
                continue
            process.conns.discard(conn_id)
            del self._conns[conn_id]
            conn.sock.close()

    def _long(self, process: _Process, conn_id: int, seq: int, deadline: float) -> None:
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

    def _overdue(self, process: _Process, seq: int) -> None:
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

    def _answer_for(self, process: _Process, reply: Reply) -> None:
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

    async def _ask(self, process: _Process, seq: int, key: str | None) -> None:
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

    # -- processes ------------------------------------------------------------------------------------
    def _take_id(self) -> int:
        n = self._next_id
        self._next_id += 1
        return n

    def _grow(self) -> None:
        """Fork until there is a worker for every running or waiting query and for waiting connections
        (at least min beside the retiring ones, at most max in all)."""
        template = self._template
        if self._closed or template is None or template.state != "live":
            return
        live = [w for w in self._workers.values() if w.state != "dead"]
        serving = [w for w in live if not w.retiring]
        busy = sum(1 for w in serving if w.state == "busy")
        want = max(self.min_workers, busy + len(self._queue) + (1 if self._homeless and not serving else 0))
        count = min(want - len(serving), self.max_workers - len(live), len(self._free_slots))
        if count > 0:
            self._flush(template)  # a fork starts from the template as it is
        for _ in range(count):
            worker = _Process(self._take_id(), "worker", slot=self._free_slots.pop())
            if self._page is not None:
                self._page.clear(worker.slot)
            self._workers[worker.id] = worker
            template.send(encode(("fork", worker.id, self.memory_limit_bytes, worker.slot)))
            self.forked += 1

    def _hello(self, conn: _Connection, message: Any) -> _Process | None:
        try:
            kind, role, worker_id, pid, secret = message
        except (TypeError, ValueError):
            return None
        if kind != "hello" or not secrets.compare_digest(str(secret), self._secret):
            log.warning("a connection to the query socket did not present the secret; closed")
            return None
        if role == "template":
            process = self._template
            if process is None or process.pid != pid or process.transport is not None:
                return None
        else:
            process = self._workers.get(worker_id)
            if process is None or process.state != "starting":
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)  # a fork nobody waits for any more
                return None
            process.pid = pid
            process.state = "idle"
            process.idle_since = time.monotonic()
        assert conn.transport is not None
        process.transport = conn.transport
        raw = conn.transport.get_extra_info("socket")
        process.channel = socket.socket(fileno=os.dup(raw.fileno()))
        process.channel.setblocking(False)
        process.flush()
        if role == "template":
            self._template_failures = 0
            log.info("query template ready", extra={"pid": pid})
        else:
            self._dispatch()
            self._rehome()
            self._schedule_retirement(process)
        return process

    def _message(self, process: _Process, message: Any) -> None:
        kind = message[0]
        if kind == "metrics":
            if self.observe is not None:
                self.observe(message[1])
        elif kind == "back":
            self._back(process, message[1], message[2])
        elif kind == "closed":
            self._closed_conns(process, message[1])
        elif kind == "long":
            self._long(process, message[1], message[2], message[3])
        elif kind == "flush":  # a query waits for the changes up to this ticket
            process.wants = max(process.wants, message[1])
            self._flush(process)
        elif kind == "ask":
            assert self._loop is not None
            self._loop.create_task(self._ask(process, message[1], message[2]))
        elif kind in ("result", "error") and process.current is not None:
            self._result(process, message)
        self._schedule_retirement(process)

    def _result(self, process: _Process, message: Any) -> None:
        pending = process.current
        assert pending is not None
        process.current = None
        process.state = "idle"
        process.idle_since = time.monotonic()
        if not pending.future.done():
            if message[0] == "result":
                pending.future.set_result(Output(message[2], message[3]))
            else:
                error = message[2]
                pending.future.set_exception(error if isinstance(error, SemregError) else Unavailable(
                    "the query failed in its process; try again."))
        self._dispatch()

    def _lost(self, process: _Process) -> None:
        if process.role == "worker":
            self._answer_for(process, error_reply(time_limit_error(self._time_limit()) if process.overdue else
                                                  Unavailable("the query's process stopped while evaluating it: "
                                                              "the query may need more memory than a query may use "
                                                              "here; narrow it, or try again.")))
            if process.slot >= 0:
                if self._page is not None:
                    self._page.clear(process.slot)
                self._free_slots.append(process.slot)
                process.slot = -1
        process.close_channel()
        if process.state == "dead" or self._closed:
            process.state = "dead"
            self._workers.pop(process.id, None)
            self._grow()
            self._rehome()
            return
        process.state = "dead"
        if process.role == "template":
            self._template = None
            for worker in [w for w in self._workers.values() if w.state == "starting"]:
                del self._workers[worker.id]  # its fork request died with the template
                if worker.slot >= 0:
                    self._free_slots.append(worker.slot)
            self._template_failures += 1
            delay = TEMPLATE_RESTART_BACKOFF_S[min(self._template_failures, len(TEMPLATE_RESTART_BACKOFF_S)) - 1]
            log.error("the query template exited; starting another", extra={"pid": process.pid, "delay_s": delay})
            assert self._loop is not None
            self._loop.call_later(delay, self._restart_template)
            return
        self._workers.pop(process.id, None)
        if process.current is not None:
            log.warning("a query process exited while evaluating", extra={"pid": process.pid})
            _fail(process.current, Unavailable(
                "the query's process stopped while evaluating it: the query may need more memory than a query may "
                "use here; narrow it, or try again."))
        self._grow()
        self._rehome()

    def _time_limit(self) -> float:
        gate = self._gate
        return float(getattr(gate, "time_limit_s", 10.0))

    def _restart_template(self) -> None:
        if not self._closed and self._template is None:
            proc = self._template_proc
            if proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(1)
            self._start_template()

    def _schedule_retirement(self, worker: _Process) -> None:
        if self._loop is None or worker.role != "worker" or len(self._workers) <= self.min_workers:
            return
        since = worker.idle_since

        def retire() -> None:
            if (worker.state == "idle" and worker.idle_since == since and not worker.conns and not worker.retiring
                    and sum(1 for w in self._workers.values() if w.state != "dead" and not w.retiring)
                    > self.min_workers):
                self._retire(worker, kill=False)

        self._loop.call_later(self.idle_s, retire)

    def _retire(self, process: _Process, kill: bool) -> None:
        if kill:
            self._kill(process)
        else:
            process.send(encode(("exit",)))
            process.state = "dead"
        self._workers.pop(process.id, None)

    def _signal(self, process: _Process) -> None:
        if process.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(process.pid, signal.SIGKILL)

    def _kill(self, process: _Process) -> None:
        process.state = "dead"
        self._signal(process)
        if process.transport is not None:
            process.transport.abort()

    # -- figures ------------------------------------------------------------------------------------------
    @property
    def workers(self) -> int:
        return sum(1 for w in self._workers.values() if w.state != "dead")

    @property
    def busy(self) -> int:
        page = self._page
        if page is None:
            return 0
        return sum(1 for w in self._workers.values()
                   if w.state != "dead" and w.slot >= 0 and page.evaluating(w.slot) is not None)

    @property
    def waiting(self) -> int:
        return len(self._queue) + len(self._homeless)

    @property
    def connections(self) -> int:
        return len(self._conns)

    def pids(self) -> list[int]:
        """The processes' ids, template first (for operators and tests)."""
        out = [self._template.pid] if self._template is not None and self._template.pid else []
        return out + [w.pid for w in self._workers.values() if w.pid is not None and w.state != "dead"]


def _fail(pending: _Pending, error: SemregError) -> None:
    if not pending.future.done():
        pending.future.set_exception(error)


def _wait_gone(pids: list[int], timeout_s: float) -> None:
    """Wait (up to `timeout_s`) until these processes have exited: after that they write nothing more."""
    fds = []
    for pid in pids:
        with contextlib.suppress(OSError):
            fds.append(os.pidfd_open(pid))
    deadline = time.monotonic() + timeout_s
    try:
        pending = list(fds)
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            ready, _, _ = select.select(pending, [], [], left)
            pending = [fd for fd in pending if fd not in ready]
    finally:
        for fd in fds:
            os.close(fd)
