"""The server's side of the query processes: a replica fed with changes, and a pool that evaluates
queries in processes it can kill.

pyoxigraph cannot cancel a query, and a thread cannot be stopped, so queries run in processes
(`semreg.sparql_worker`): a template holding a copy of the visible graphs, and workers forked from it.

- **Replica.** `publish(item)` takes, from any thread and in order, `("snapshot", bytes)` (loaded by a
  new template; everything published before it is contained in it) and `("changes", [...])`. `drain()`
  hands them to the processes on the event loop: the template applies them once writes pause
  (`QUIET_S`), before it forks, or every `DEFER_LIMIT_BYTES`; a worker gets them just before its next
  query (a registry with no SPARQL traffic pays for one copy, not one per process, and not during a
  burst of writes), and an idle worker that has fallen `DEFER_LIMIT_BYTES` behind is replaced by a
  fresh fork. A query is sent after every change published before it, so a write acknowledged before a query
  is visible to it.
- **Pool.** Each query takes one worker for itself. With none idle, the template forks another (a few
  milliseconds), up to `max_workers`; past that, queries wait their turn. Extra workers retire after
  `idle_s`; `min_workers` stay.
- **Priority.** The processes run at a lower CPU priority than the server (nice 5). A query still
  running after `LONG_QUERY_S` drops to the lowest (nice 19), so a small query sent beside long ones
  gets the CPU first; its worker retires once that query ends (a fresh fork is as cheap).
- **Time limit.** At its deadline a query gets its 503 at once: if it was waiting it is dropped; if it
  was running, its worker is killed (SIGKILL) and another is forked. Nothing keeps burning CPU after
  the answer. A worker also stops streaming queries itself just before the deadline, which spares it.
- **Failure.** A worker that dies mid-query answers 503 for that query and is replaced. A template that
  dies takes its workers with it (they die with their parent, so that nothing outlives the server); it
  is started again from a fresh snapshot, and queries wait for it within their time limit.
- **Stop.** `stop()` answers every waiting and running query with 503 at once and kills the processes,
  so that a server asked to stop never waits on a query.
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pyoxigraph as ox

from semreg import replica
from semreg.errors import SemregError, Unavailable
from semreg.frames import FrameBuffer, encode
from semreg.sparql_runner import Output, time_limit_error
from semreg.sparql_worker import SECRET_ENV

log = logging.getLogger("semreg.sparql_pool")

MiB = 1024 * 1024
TEMPLATE_RESTART_BACKOFF_S = (0.0, 0.5, 2.0, 10.0)
LONG_QUERY_S = 0.25
DEFER_LIMIT_BYTES = 16 * MiB  # changes held for an idle worker; past it the worker is replaced by a fork
QUIET_S = 0.5  # the template applies the changes held for it once no change came for this long
LOWEST_PRIORITY = 19


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
    demotion: asyncio.TimerHandle | None = None


@dataclass(eq=False)
class _Process:
    id: int
    role: str  # template | worker
    state: str = "starting"  # starting | idle | busy | dead (a template: starting | waiting | live | dead)
    pid: int | None = None
    transport: asyncio.Transport | None = None
    backlog: list[bytes] = field(default_factory=list)
    deferred: list[bytes] = field(default_factory=list)  # changes a worker applies before its next query
    deferred_bytes: int = 0
    current: _Pending | None = None
    prefixes_version: int = -1
    idle_since: float = 0.0
    demoted: bool = False

    def send(self, frame: bytes) -> None:
        if self.transport is not None:
            self.transport.write(frame)
        else:
            self.backlog.append(frame)


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
        self._next_id = 1
        self._next_qid = 1
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
        path = os.path.join(self._dir, "s")
        self._server = await self._loop.create_unix_server(lambda: _Connection(self), path)
        self._start_template()

    def _start_template(self) -> None:
        assert self._dir is not None
        template = _Process(self._take_id(), "template")
        self._template = template
        env = {**os.environ, SECRET_ENV: self._secret}
        # Started from the event loop's thread: the template's death signal follows that thread.
        self._template_proc = subprocess.Popen([sys.executable, "-m", "semreg.sparql_worker",
                                                os.path.join(self._dir, "s")], env=env, stdin=subprocess.DEVNULL)
        template.pid = self._template_proc.pid
        template.state = "waiting"  # for its snapshot: changes published until then are in it
        self.request_snapshot()
        log.info("query template starting", extra={"pid": template.pid})

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
        for worker in list(self._workers.values()):
            if worker.current is not None:
                _fail(worker.current, stopping)
            self._kill(worker)
        self._workers.clear()
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
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)

    # -- the replica ----------------------------------------------------------------------------------
    def publish(self, item: tuple) -> None:
        """`("snapshot", bytes)` or `("changes", [change, ...])`, from any thread, in order.

        Before `start()` changes are dropped: the snapshot `start()` asks for contains them."""
        if not self._started:
            return
        with self._inbox_lock:
            self._inbox.append(item)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self.drain)

    def drain(self) -> None:
        """Hand what was published to the processes (on the event loop)."""
        while self._inbox:
            with self._inbox_lock:
                if not self._inbox:
                    return
                kind, data = self._inbox.popleft()
            if kind == "changes":
                self.generation += 1
                frame = encode(("changes", data))
                template = self._template
                if template is not None and template.state == "live":
                    self._defer_to_template(template, frame)
                stale = []
                for worker in self._workers.values():
                    if worker.state != "dead":
                        worker.deferred.append(frame)
                        worker.deferred_bytes += len(frame)
                        if worker.deferred_bytes > DEFER_LIMIT_BYTES and worker.state == "idle":
                            stale.append(worker)
                for worker in stale:  # a fresh fork of the template is cheaper than catching up
                    self._retire(worker, kill=True)
                if stale:
                    self._grow()
            elif kind == "snapshot":
                template = self._template
                if template is not None and template.state == "waiting":
                    template.send(encode(("load", data)))
                    template.state = "live"
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
            if worker.state == "idle":
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
        self._flush(worker)
        qid = self._next_qid
        self._next_qid += 1
        worker.send(encode(("query", qid, job)))
        assert self._loop is not None
        pending.demotion = self._loop.call_later(LONG_QUERY_S, self._demote, worker, pending)

    def _demote(self, worker: _Process, pending: _Pending) -> None:
        if worker.current is pending and worker.pid is not None and not worker.demoted:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, worker.pid, LOWEST_PRIORITY)
            worker.demoted = True

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

    # -- processes ------------------------------------------------------------------------------------
    def _take_id(self) -> int:
        n = self._next_id
        self._next_id += 1
        return n

    def _grow(self) -> None:
        """Fork until there is a worker for every running or waiting query (at least min, at most max)."""
        template = self._template
        if self._closed or template is None or template.state != "live":
            return
        live = [w for w in self._workers.values() if w.state != "dead"]
        busy = sum(1 for w in live if w.state == "busy")
        want = min(self.max_workers, max(self.min_workers, busy + len(self._queue)))
        if want > len(live):
            self._flush(template)  # a fork starts from the template as it is
        for _ in range(want - len(live)):
            worker = _Process(self._take_id(), "worker")
            self._workers[worker.id] = worker
            template.send(encode(("fork", worker.id, self.memory_limit_bytes)))
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
        for frame in process.backlog:
            conn.transport.write(frame)
        process.backlog.clear()
        if role == "template":
            self._template_failures = 0
            log.info("query template ready", extra={"pid": pid})
        else:
            self._dispatch()
            self._schedule_retirement(process)
        return process

    def _message(self, process: _Process, message: Any) -> None:
        kind = message[0]
        if kind not in ("result", "error") or process.current is None:
            return
        pending = process.current
        process.current = None
        process.state = "idle"
        process.idle_since = time.monotonic()
        if pending.demotion is not None:
            pending.demotion.cancel()
        if process.demoted:
            self._retire(process, kill=False)  # it cannot get its priority back; a fork is cheaper
            self._grow()
        if not pending.future.done():
            if kind == "result":
                pending.future.set_result(Output(message[2], message[3]))
            else:
                error = message[2]
                pending.future.set_exception(error if isinstance(error, SemregError) else Unavailable(
                    "the query failed in its process; try again."))
        self._dispatch()
        self._schedule_retirement(process)

    def _lost(self, process: _Process) -> None:
        if process.state == "dead" or self._closed:
            process.state = "dead"
            return
        process.state = "dead"
        if process.role == "template":
            self._template = None
            for worker in [w for w in self._workers.values() if w.state == "starting"]:
                del self._workers[worker.id]  # its fork request died with the template
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

    def _restart_template(self) -> None:
        if not self._closed and self._template is None:
            proc = self._template_proc
            if proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(1)
            self._start_template()

    def _schedule_retirement(self, worker: _Process) -> None:
        if self._loop is None or len(self._workers) <= self.min_workers:
            return
        since = worker.idle_since

        def retire() -> None:
            if (worker.state == "idle" and worker.idle_since == since
                    and sum(1 for w in self._workers.values() if w.state != "dead") > self.min_workers):
                self._retire(worker, kill=False)

        self._loop.call_later(self.idle_s, retire)

    def _retire(self, process: _Process, kill: bool) -> None:
        if kill:
            self._kill(process)
        else:
            process.send(encode(("exit",)))
            process.state = "dead"
        self._workers.pop(process.id, None)

    def _kill(self, process: _Process) -> None:
        process.state = "dead"
        if process.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(process.pid, signal.SIGKILL)
        if process.transport is not None:
            process.transport.abort()

    # -- figures ------------------------------------------------------------------------------------------
    @property
    def workers(self) -> int:
        return sum(1 for w in self._workers.values() if w.state != "dead")

    @property
    def busy(self) -> int:
        return sum(1 for w in self._workers.values() if w.state == "busy")

    @property
    def waiting(self) -> int:
        return len(self._queue)

    def pids(self) -> list[int]:
        """The processes' ids, template first (for operators and tests)."""
        out = [self._template.pid] if self._template is not None and self._template.pid else []
        return out + [w.pid for w in self._workers.values() if w.pid is not None and w.state != "dead"]


def _fail(pending: _Pending, error: SemregError) -> None:
    if not pending.future.done():
        pending.future.set_exception(error)
