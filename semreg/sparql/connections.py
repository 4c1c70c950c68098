"""A query process serving `/sparql` connections itself, beside the queries the server sends it.

`semreg serve` hands a connection whose first request is for `/sparql` to a query process (with the
bytes read so far): from then on the process reads its requests, evaluates them on its replica and writes
the answers, and the server's event loop never sees them. A process holds several connections and serves
them one request at a time (a part it owns: `semreg.sparql.served_connections`, which asks it for each
request's answer), talks to the server through its end of their socket (`semreg.sparql.channel`), and runs
the loop below.

- **The loop** waits on the channel and the connections at once; between reads it answers connections
  handed over with a whole request already read, runs the queries the server sent (`evaluate`), applies
  the changes once more than `DEFER_LIMIT` batches wait, closes idle connections and sends the metrics.
- **A long query.** A watcher thread notices an evaluation still running after `HANDBACK_S` (or half the
  time limit, when that is shorter): it sends the process's other connections back to the server with
  what was read of them ("moved"), so that nothing waits behind the query, and says so ("long"), so that
  the server sends the process nothing new and kills it at the query's deadline if it is still running.
  After `DEMOTE_S` it drops the process to the lowest CPU priority. A process that had a long query
  retires once it is over (a fresh fork is cheaper than the priority back).
- **Read-your-writes.** Before a query the process compares what its copy holds (`semreg.sparql.copies`)
  with the page the server shares (`semreg.sparql.shared_page`); when it is behind it asks the server
  (`("flush", ticket)`) for the changes it holds back, or, on disk, for a checkpoint holding them, and reads
  until it has everything acknowledged before the query arrived. Changes wait, in the server and then
  unapplied here, until a query needs them.
- **Metrics.** Requests are counted here and sent to the server about once a second.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import os
import selectors
import threading
import time
from collections.abc import Callable
from typing import Any

import pyoxigraph as ox

from semreg.access.failures import Failure
from semreg.errors import SemregError, Unavailable
from semreg.http1.server import RequestHead
from semreg.sparql.channel import Channel
from semreg.sparql.copies import CheckpointCopy, MemoryCopy
from semreg.sparql.job import Job
from semreg.sparql.protocol import QueryRequest
from semreg.sparql.runner import Limits, run_query, time_limit_error
from semreg.sparql.served_connections import Conn, ServedConnections
from semreg.sparql.service import EARLY_STOP_S, Gate, QueryService, Reply
from semreg.sparql.shared_page import SharedPage

log = logging.getLogger("semreg.sparql_connections")

Copy = MemoryCopy | CheckpointCopy

HANDBACK_S = 0.1
DEMOTE_S = 0.25
LOWEST_PRIORITY = 19
METRICS_EVERY_S = 1.0
METRICS_BATCH = 512
DEFER_LIMIT = 64  # batches of changes kept unapplied; past it they are applied while idle


class ConnectionServer:
    """A query process's loop: its replica, the server's queries, and the connections it serves (`served`)."""

    def __init__(self, channel: Channel, copy: Copy, page: SharedPage, slot: int, gate: Gate | None,
                 prefixes: dict[str, str] | None = None, prefix_version: int = 0) -> None:
        self.channel = channel
        self.copy = copy
        self.page = page
        self.slot = slot
        self.service = QueryService(copy.store, gate) if gate is not None else None
        if self.service is not None:
            self.service.prefixes = prefixes
        self.prefixes = prefixes or {}
        self.prefix_version = prefix_version
        self.asked_ticket = 0
        self.selector = selectors.DefaultSelector()
        self.selector.register(channel.sock, selectors.EVENT_READ, None)
        self.served = ServedConnections(channel, self.selector, self._answer, gate)
        self.cond = threading.Condition()
        self.current: tuple[int, int, float, float] | None = None  # (seq, conn, started, deadline)
        self.watcher_sleeping = False
        self.exiting = False
        self.jobs: collections.deque[Any] = collections.deque()
        self.job_prefixes: dict[str, str] | None = None
        self.answers: dict[int, Any] = {}
        self.asked = 0
        self.observations: list[tuple[str, int, float]] = []
        self.flushed_at = time.monotonic()
        self.watcher = threading.Thread(target=self._watch, name="semreg-query-watcher", daemon=True)

    # -- the loop -----------------------------------------------------------------------------------------
    def run(self) -> int:
        served = self.served
        self.watcher.start()
        while not self.exiting:
            timeout = self._timeout()
            for key, mask in self.selector.select(timeout):
                if key.data is None:
                    if not self.channel.receive(0):
                        return 0
                    self._handle_inbox()
                else:
                    served.event(key.data, mask)
                if self.exiting:
                    break
            while self.jobs and not self.exiting:  # first: the server sent them to a process it saw idle
                self._job(self.jobs.popleft())
            served.serve_waiting(lambda: self.exiting)
            if self.copy.backlog > DEFER_LIMIT and self.current is None:
                self._apply()
            served.expire_idle()
            self._flush_metrics()
            if served.retiring and self.current is None and served.give_back_all():  # else some have answers to send
                self._flush_metrics(force=True)
                return 0
        self._flush_metrics(force=True)
        return 0

    def _timeout(self) -> float | None:
        if self.served.conns or self.observations:
            return 1.0
        return None

    def _handle_inbox(self) -> None:
        inbox = self.channel.inbox
        while inbox:
            self._message(inbox.popleft())

    def _message(self, message: Any) -> None:
        if self.copy.take(message):
            return
        kind = message[0]
        if kind == "prefixes":
            _, self.prefix_version, self.prefixes = message
            if self.service is not None:
                self.service.prefixes = self.prefixes
        elif kind == "conn":
            self.served.adopt(message[1], message[2])
        elif kind == "gate":
            if self.service is None:
                self.service = QueryService(self.copy.store, message[1])
                self.service.prefixes = self.prefixes
            else:
                self.service.set_gate(message[1])
            self.served.gate = message[1]
        elif kind == "query":
            self.jobs.append(message)
        elif kind == "answer":
            self.answers[message[1]] = message[2]
        elif kind == "retire":
            self.served.retire()
        elif kind == "exit":
            self.exiting = True

    # -- the replica --------------------------------------------------------------------------------------
    def sync(self, deadline: float) -> None:
        """Take in every change and prefix acknowledged before now (the `Replica` of `QueryService`)."""

        def caught_up() -> bool:
            requested, prefixes = self.page.wanted()
            if requested > self.copy.ticket and requested > self.asked_ticket:
                self.asked_ticket = requested
                self.channel.send(("flush", requested))  # the server holds changes back until asked
            return self.copy.ticket >= requested and self.prefix_version >= prefixes

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
        self.copy.catch_up()
        if self.service is not None:
            self.service.store = self.copy.store

    @property
    def generation(self) -> int:
        """What the result cache keys its entries by (`service.Replica`)."""
        return self.copy.generation

    def _time_limit(self) -> float:
        return self.service.gate.time_limit_s if self.service is not None else 10.0

    # -- the server's queries (sent over the channel) ---------------------------------------------------
    def _job(self, message: Any) -> None:
        _, qid, job = message
        started = time.monotonic()
        deadline = started + job.time_left_s
        try:
            self.sync(deadline)  # everything acknowledged before the query (a checkpoint: the newer one opened)
        except SemregError as exc:
            self.channel.send(("error", qid, exc))
            return
        if job.prefixes is not None:
            self.job_prefixes = job.prefixes
        self._begin(0, started, deadline)
        try:
            answer = evaluate(self.copy.store, qid, job, self.job_prefixes or self.prefixes)
        finally:
            self._end()
        self.channel.send(answer)

    # -- a connection's request ---------------------------------------------------------------------------
    def _answer(self, conn: Conn, head: RequestHead, body: bytes) -> Reply:
        """A request read on a connection (`served`), evaluated here, watched and counted."""
        assert self.service is not None
        started = time.monotonic()
        deadline = started + self.service.gate.time_limit_s
        self._begin(conn.id, started, deadline)
        try:
            reply = self.service.respond(head, body, host=head.headers.get("host") or conn.host, client=conn.client,
                                         deadline=deadline, replica=self, ask=self._ask, failed=self._failed)
        except Exception:  # a failure of this code, not of the query: the client still gets an answer
            log.exception("unexpected error answering a SPARQL request")
            reply = Reply(500, [(b"content-type", b"application/json")],
                          b'{"error":"the server failed to handle this request; the log says why."}')
        finally:
            self._end()
        self.observations.append((head.method, reply.status, time.monotonic() - started))
        return reply

    # -- the round trip to the server ------------------------------------------------------------------
    def _ask(self, key: str | None, deadline: float) -> SemregError | None:
        return self._round_trip(("ask", key), deadline)

    def _failed(self, failure: Failure, deadline: float) -> SemregError | None:
        """A wrong credential, counted by the server's throttle: the 429 it answers instead of the 401, or None."""
        return self._round_trip(("failed", tuple(failure)), deadline)

    def _round_trip(self, message: tuple, deadline: float) -> SemregError | None:
        self.asked += 1
        seq = self.asked
        self.channel.send((message[0], seq, *message[1:]))
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
            left = started + min(HANDBACK_S, (deadline - started) / 2) - time.monotonic()
            if left > 0:  # one reading of the clock: a second one, later, could be past the due time
                time.sleep(left)
                continue
            if self.current is not current:
                continue
            self.served.hand_back_others(conn_id)
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


def evaluate(store: ox.Store, qid: int, job: Job, prefixes: dict[str, str]) -> tuple:
    """A query the server sent, evaluated: the message that answers it."""
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
