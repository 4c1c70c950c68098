"""The server's side of the query processes: a replica fed with changes, a pool that evaluates queries
in processes it can kill, and the `/sparql` connections it hands to them.

pyoxigraph cannot cancel a query, and a thread cannot be stopped, so queries run in processes
(`semreg.sparql.worker`): a template holding a copy of the visible graphs, and workers forked from it.

`QueryPool` is one object; its parts share its state (`pool_state`), each in its own module:

    pool_process     a process as the server sees it: its record, its outbox, its end of the socket
    pool_lifecycle   the template, forks, retirement, death; `start()` and `stop()`
    pool_stream      the replica stream to the processes: `publish`, `drain`, changes held back
    pool_placement   the connections handed to them (`adopt`): where each goes, how it comes back
    pool             this module: the pool itself, and the queries the server sends

- **Queries the server sends** (`evaluate`, the ASGI route): each takes one idle worker (evaluating
  nothing, for the server or for its connections; one whose connection's query turns out long gives
  the server's query back, which goes to another). With none idle,
  the template forks another (a few milliseconds), up to `max_workers`; past that, queries wait their
  turn. The workers' messages come here (`_message`) and go to the part they concern.
- **Priority.** The processes run at a lower CPU priority than the server (nice 5). A query still
  running after `LONG_QUERY_S` drops to the lowest (nice 19), so a small query sent beside long ones
  gets the CPU first; its worker retires once that query ends (a fresh fork is as cheap).
- **Time limit.** At its deadline a query gets its 503 at once: if it was waiting it is dropped; if it
  was running, its worker is killed (SIGKILL) and another is forked; for a connection's query, the
  server writes the 503 once the process is gone. Nothing keeps burning CPU after the answer. A worker
  also stops streaming queries itself just before the deadline, which spares it.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from typing import Any

import pyoxigraph as ox

from semreg.access.failures import Failure
from semreg.errors import SemregError, Unavailable
from semreg.sparql import replica
from semreg.sparql.frames import encode
from semreg.sparql.job import Job
from semreg.sparql.pool_lifecycle import PoolLifecycle
from semreg.sparql.pool_placement import ConnectionPlacement
from semreg.sparql.pool_process import Pending, Process
from semreg.sparql.pool_stream import ReplicaStream
from semreg.sparql.runner import Output, time_limit_error

log = logging.getLogger("semreg.sparql_pool")

LONG_QUERY_S = 0.25  # the workers' own `semreg.sparql.connections.DEMOTE_S`


class QueryPool(ConnectionPlacement, ReplicaStream, PoolLifecycle):
    @classmethod
    def over_store(cls, store: ox.Store, hidden: Iterable[ox.NamedNode] = (), **options: Any) -> QueryPool:
        """A pool over a store that does not change while it serves (its snapshot is all it ever gets)."""
        hidden = tuple(hidden)

        def snapshot() -> None:
            pool.publish(("snapshot", replica.snapshot(store, hidden)))

        pool = cls(snapshot, **options)
        return pool

    # -- queries --------------------------------------------------------------------------------------
    async def evaluate(self, job: Job, prefixes_version: int, deadline: float) -> Output:
        """Run `job` in a worker; `deadline` on `time.monotonic()`. Raises `SemregError` (503 at the deadline)."""
        if not self._started:
            await self.start()
        self.drain()
        if self._closed:
            raise Unavailable("the server is stopping; send the query again to another node or after restart.")
        loop = asyncio.get_running_loop()
        pending = Pending(job, prefixes_version, job.prefixes, loop.create_future(), deadline)
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

    def _idle_worker(self) -> Process | None:
        """A worker free for a query: none of the server's, and none of its connections' either (a query
        sent to a worker evaluating a connection's would wait behind it, and die with it at its limit)."""
        page = self._page
        for worker in self._workers.values():
            if worker.state == "idle" and not worker.retiring and not (
                    page is not None and worker.slot >= 0 and page.evaluating(worker.slot) is not None):
                return worker
        return None

    def _run(self, worker: Process, pending: Pending) -> None:
        job = pending.job
        if worker.prefixes_version == pending.prefixes_version:
            job = job._replace(prefixes=None)
        else:
            worker.prefixes_version = pending.prefixes_version
        job = job._replace(time_left_s=max(0.0, pending.deadline - time.monotonic()))
        worker.state = "busy"
        worker.current = pending
        pending.worker = worker
        worker.send_deferred()  # every change published before the query, in front of it
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

    def _expire(self, pending: Pending) -> None:
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

    # -- what the processes say -------------------------------------------------------------------------
    def _message(self, process: Process, message: Any) -> None:
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
            if message[1]:
                self._reclaim(process)
        elif kind == "flush":  # a query waits for the changes up to this ticket
            process.wants = max(process.wants, message[1])
            process.send_deferred()
        elif kind == "rebuilt" and process is self._template:
            self._template_rebuilt(message[1])
        elif kind == "ask":
            assert self._loop is not None
            self._loop.create_task(self._ask(process, message[1], message[2]))
        elif kind == "failed":  # a wrong credential on a connection it serves: the server counts it
            refusal = self.on_failure(Failure(*message[2])) if self.on_failure is not None else None
            if process.state != "dead":
                process.send(encode(("answer", message[1], refusal)))
        elif kind in ("result", "error") and process.current is not None:
            self._result(process, message)
        self._schedule_retirement(process)

    def _reclaim(self, process: Process) -> None:
        """A query of the server's sent to a worker whose connection's query then ran long: it has not
        started (a worker evaluates one thing at a time), so another worker takes it. Should the first
        answer it after all, `_result` ignores that answer."""
        pending = process.current
        if pending is None or pending.future.done():
            return
        process.current = None
        pending.worker = None
        self._queue.appendleft(pending)
        self._dispatch()

    def _result(self, process: Process, message: Any) -> None:
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
