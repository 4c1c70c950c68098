"""The queries the server sends the query processes (`semreg.sparql.pool`; `evaluate`, from the ASGI route).

- **Placement.** Each takes one idle worker: evaluating nothing, for the server or for its connections (a
  query sent to a worker evaluating a connection's would wait behind it, and die with it at its limit).
  With none idle it waits its turn, and the template forks another (a few milliseconds), up to
  `max_workers`. A worker whose connection's query turns out long gives the server's query back, which
  goes to another (`reclaim`).
- **Time limit.** At its deadline a query gets its 503 at once: if it was waiting it is dropped; if it was
  running, its worker is killed (SIGKILL) and another is forked. Nothing keeps burning CPU after the answer.
  A worker also stops a query itself just before the deadline, which spares it.
- **Failure.** A worker that dies evaluating one answers 503 for it (`lost`).

The workers come from the processes' life cycle (`semreg.sparql.pool_lifecycle.Processes`).
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from typing import Any

from semreg.errors import SemregError, Unavailable
from semreg.sparql.frames import encode
from semreg.sparql.job import Job
from semreg.sparql.pool_lifecycle import Processes
from semreg.sparql.pool_process import STOPPED_MID_QUERY, Pending, Process, fail
from semreg.sparql.runner import Output, time_limit_error

log = logging.getLogger("semreg.sparql_pool")


class ServerQueries:
    """The server's queries: waiting for a worker, running in one, answered."""

    def __init__(self, processes: Processes) -> None:
        self.processes = processes
        self.killed = 0  # workers killed at a query's deadline
        self.queue: collections.deque[Pending] = collections.deque()
        self._next_qid = 1

    @property
    def waiting(self) -> int:
        return len(self.queue)

    async def evaluate(self, job: Job, prefixes_version: int, deadline: float) -> Output:
        """Run `job` in a worker; `deadline` on `time.monotonic()`. Raises `SemregError` (503 at the deadline)."""
        loop = asyncio.get_running_loop()
        pending = Pending(job, prefixes_version, job.prefixes, loop.create_future(), deadline)
        worker = self._idle_worker()
        if worker is not None:
            self._run(worker, pending)
        else:
            self.queue.append(pending)
            self.processes.grow()
        pending.timer = loop.call_later(max(0.0, deadline - time.monotonic()), self._expire, pending)
        try:
            return await pending.future
        finally:
            pending.timer.cancel()

    def _idle_worker(self) -> Process | None:
        """A worker free for a query: none of the server's, and none of its connections' either."""
        for worker in self.processes.workers:
            if worker.state == "idle" and not worker.retiring and self.processes.evaluating(worker) is None:
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

    def dispatch(self) -> None:
        """Send waiting queries to the idle workers."""
        while self.queue:
            worker = self._idle_worker()
            if worker is None:
                return
            pending = self.queue.popleft()
            if not pending.future.done():
                self._run(worker, pending)

    def _expire(self, pending: Pending) -> None:
        if pending.future.done():
            return
        pending.future.set_exception(time_limit_error(pending.job.time_limit_s))
        worker = pending.worker
        if worker is None:
            with contextlib.suppress(ValueError):
                self.queue.remove(pending)
            return
        if worker.current is pending:
            log.info("query stopped at its time limit", extra={"worker": worker.pid,
                                                               "time_limit_s": pending.job.time_limit_s})
            self.processes.retire(worker, kill=True)
            self.killed += 1
            self.processes.grow()

    def reclaim(self, process: Process) -> None:
        """A query of the server's sent to a worker whose connection's query then ran long: it has not
        started (a worker evaluates one thing at a time), so another worker takes it. Should the first
        answer it after all, `result` ignores that answer."""
        pending = process.current
        if pending is None or pending.future.done():
            return
        process.current = None
        pending.worker = None
        self.queue.appendleft(pending)
        self.dispatch()

    def result(self, process: Process, message: Any) -> None:
        """A worker's answer (`("result", qid, content type, body)` or `("error", qid, error)`)."""
        pending = process.current
        if pending is None:
            return
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
        self.dispatch()

    def lost(self, worker: Process) -> None:
        """A worker's process is gone: the query it was evaluating, if still unanswered, gets its 503."""
        pending = worker.current
        if pending is not None and not pending.future.done():
            log.warning("a query process exited while evaluating", extra={"pid": worker.pid})
            fail(pending, Unavailable(STOPPED_MID_QUERY))

    def stop(self, error: SemregError) -> None:
        """Answer every waiting and running query with `error` (the server is stopping)."""
        for pending in self.queue:
            fail(pending, error)
        self.queue.clear()
        for worker in self.processes.workers:
            if worker.current is not None:
                fail(worker.current, error)
