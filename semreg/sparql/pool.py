"""The server's side of the query processes: a replica fed with changes, a pool that evaluates queries
in processes it can kill, and the `/sparql` connections it hands to them.

pyoxigraph cannot cancel a query, and a thread cannot be stopped, so queries run in processes
(`semreg.sparql.worker`): a template holding a copy of the visible graphs, and workers forked from it.

`QueryPool` is made of four parts it owns, each with its own state, and routes what the processes say
to the part it concerns:

    processes    `pool_lifecycle.Processes`: the template, forks, retirement, death (each process's
                 record and its end of the socket: `pool_process`)
    stream       `pool_stream.ReplicaStream`: what the node publishes (`publish`), to the processes
    queries      `pool_queries.ServerQueries`: the queries the server sends (`evaluate`)
    placement    `pool_placement.ConnectionPlacement`: the connections handed to them (`adopt`)

- **The server's part of a worker's request.** A worker serving a connection asks the server when the
  gate says so (`asker`: its rate limit, a cluster's read barrier), and hands it every wrong credential
  (`on_failure`: the server's throttle may answer 429 instead of 401); it sends the requests it answered
  for the metrics (`observe`). A connection it sends back for another route goes to uvicorn (`on_other`).
- **Priority.** The processes run at a lower CPU priority than the server (nice 5). A query still
  running after `LONG_QUERY_S` drops to the lowest (nice 19), so a small query sent beside long ones
  gets the CPU first; its worker retires once that query ends (a fresh fork is as cheap).
- **Stop.** `stop()` answers every waiting and running query with 503 at once and kills the processes,
  so that a server asked to stop never waits on a query; the connections the workers served are closed,
  the one each was evaluating for answered with the 503.
"""
from __future__ import annotations

import asyncio
import logging
import shutil
import socket
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import pyoxigraph as ox

from semreg.access.failures import Failure
from semreg.errors import SemregError, Unavailable
from semreg.sparql import replica
from semreg.sparql.checkpoints import Checkpoints, Paths
from semreg.sparql.frames import encode
from semreg.sparql.job import Job
from semreg.sparql.pool_lifecycle import Processes
from semreg.sparql.pool_placement import ConnectionPlacement, Other
from semreg.sparql.pool_process import STOPPED_MID_QUERY, Process
from semreg.sparql.pool_queries import ServerQueries
from semreg.sparql.pool_stream import ReplicaStream
from semreg.sparql.runner import Output, time_limit_error
from semreg.sparql.service import Gate, error_reply

log = logging.getLogger("semreg.sparql_pool")

LONG_QUERY_S = 0.25  # the workers' own `semreg.sparql.connections.DEMOTE_S`
STOPPING = "the server is stopping; send the query again to another node or after restart."

# ask(rate-limit key or None) -> the error to answer instead, or None: the server's part of a request a
# worker serves (its rate limit, a cluster's read barrier)
Asker = Callable[[str | None], Awaitable[SemregError | None]]
# observe([(method, status, seconds), ...]): requests workers answered on their own connections, for /metrics
Observer = Callable[[list[tuple[str, int, float]]], None]
# on_failure(a wrong credential on a worker's connection) -> the 429 to answer instead of the 401, or None
OnFailure = Callable[[Failure], SemregError | None]


class QueryPool:
    """The query processes and all they serve: the parts above, held and wired together."""

    def __init__(self, request_snapshot: Callable[[], None], *, min_workers: int = 2, max_workers: int = 8,
                 memory_limit_mib: int = 2048, idle_s: float = 60.0, settle_s: float = replica.SETTLE_S,
                 on_disk: Path | None = None) -> None:
        """`on_disk`: a directory for the replica on disk (`semreg.sparql.checkpoints`), emptied at start;
        None: each process holds a copy in memory."""
        self.processes = Processes(self, request_snapshot, min_workers=min_workers, max_workers=max_workers,
                                   memory_limit_mib=memory_limit_mib, idle_s=idle_s, settle_s=settle_s,
                                   on_disk=str(on_disk) if on_disk is not None else "")
        self.on_disk = None if on_disk is None else Paths(on_disk)
        self.stream = ReplicaStream(self.processes, self.on_disk)
        self.queries = ServerQueries(self.processes)
        self.placement = ConnectionPlacement(self.processes)
        self.asker: Asker | None = None
        self.on_other: Other | None = None
        self.observe: Observer | None = None
        self.on_failure: OnFailure | None = None
        self._started = False

    @classmethod
    def over_store(cls, store: ox.Store, hidden: Iterable[ox.NamedNode] = (), **options: Any) -> QueryPool:
        """A pool over a store that does not change while it serves (its snapshot is all it ever gets)."""
        hidden = tuple(hidden)

        def snapshot() -> None:
            pool.publish(("snapshot", replica.snapshot(store, hidden)))

        pool = cls(snapshot, **options)
        return pool

    # -- start and stop ---------------------------------------------------------------------------------
    async def start(self) -> None:
        """Listen for the processes, start the template, ask for the first snapshot."""
        if self._started:
            return
        self._started = True
        if self.on_disk is not None:  # what a previous run left (the replica is made anew from a snapshot)
            await asyncio.to_thread(shutil.rmtree, self.on_disk.root, True)
        loop = asyncio.get_running_loop()
        self.processes.open(loop)
        self.stream.open(loop)
        await self.processes.start()

    @property
    def ready(self) -> bool:
        """Whether connections can be taken: the template is live, so a worker is there or can be forked
        (a connection waits for it; sending some to the server's route meanwhile would split a burst
        between two paths with two sets of limits)."""
        return self.stream.gate is not None and self.processes.template_live

    def stop(self) -> None:
        """Answer every query now with 503 and kill the processes (safe to call twice)."""
        if self.processes.stopped:
            return
        stopping = Unavailable(STOPPING)
        self.stream.stop()
        self.queries.stop(stopping)
        workers = self.processes.stop()
        reply = error_reply(stopping)
        for worker in workers:
            self.placement.answer_for(worker, reply)
        self.placement.close()

    async def close(self) -> None:
        self.stop()
        await self.processes.close()
        if self.on_disk is not None:  # made anew at every start: a stopped node's directory keeps its own data only
            await asyncio.to_thread(shutil.rmtree, self.on_disk.root, True)

    # -- the stream -------------------------------------------------------------------------------------
    def publish(self, item: tuple) -> None:
        """An item for the processes' replicas (`semreg.sparql.pool_stream`), from any thread, in order."""
        self.stream.publish(item)

    def note_requested(self, ticket: int) -> None:
        self.stream.note_requested(ticket)

    def note_prefixes(self, version: int, prefixes: dict[str, str]) -> None:
        self.stream.note_prefixes(version, prefixes)

    def set_gate(self, gate: Gate) -> None:
        self.stream.set_gate(gate)

    def drain(self) -> None:
        self.stream.drain()

    @property
    def checkpoints(self) -> Checkpoints | None:
        """The replica on disk's checkpoints (None: the replica is in memory)."""
        return self.stream.checkpoints

    @property
    def checkpoint_cuts(self) -> int | None:
        """Checkpoints cut so far (None: the replica is in memory)."""
        return None if self.stream.checkpoints is None else self.stream.checkpoints.cuts

    @property
    def generation(self) -> int:
        """Moves with every change published: the result cache's key."""
        return self.stream.generation

    # -- queries and connections ------------------------------------------------------------------------
    async def evaluate(self, job: Job, prefixes_version: int, deadline: float) -> Output:
        """Run `job` in a worker; `deadline` on `time.monotonic()`. Raises `SemregError` (503 at the deadline)."""
        if not self._started:
            await self.start()
        self.stream.drain()
        if self.processes.stopped:
            raise Unavailable(STOPPING)
        return await self.queries.evaluate(job, prefixes_version, deadline)

    def adopt(self, sock: socket.socket, data: bytes) -> bool:
        """Take a connection whose next request (begun in `data`) is for `/sparql`; False when no worker
        can take it now (the caller serves it itself)."""
        if not self.ready:
            return False
        self.stream.drain()
        self.placement.adopt(sock, data)
        return True

    # -- what the processes say (`pool_lifecycle.Owner`) ------------------------------------------------
    def demand(self) -> tuple[int, bool]:
        return self.queries.waiting, bool(self.placement.waiting)

    def worker_ready(self) -> None:
        self.queries.dispatch()
        self.placement.rehome()
        self.stream.replace_worn()  # the next worn one may go now that this one serves

    def worker_forked(self, worker: Process) -> None:
        self.stream.forked(worker)

    def worker_lost(self, worker: Process) -> None:
        self.stream.gone(worker)
        error = time_limit_error(self.stream.time_limit_s) if worker.overdue else Unavailable(STOPPED_MID_QUERY)
        self.placement.answer_for(worker, error_reply(error))
        self.queries.lost(worker)

    def workers_changed(self) -> None:
        self.placement.rehome()
        self.stream.replace_worn()

    def message(self, process: Process, message: Any) -> None:
        kind = message[0]
        if kind == "metrics":
            if self.observe is not None:
                self.observe(message[1])
        elif kind == "back":
            self.placement.back(process, message[1], message[2], self.on_other)
        elif kind == "closed":
            self.placement.closed(process, message[1])
        elif kind == "long":
            self.placement.long(process, message[1], message[2], message[3])
            if message[1]:
                self.queries.reclaim(process)
        elif kind == "flush":  # a query waits for the changes up to this ticket
            self.stream.flush(process, message[1])
        elif kind == "rebuilt" and process is self.processes.template:
            self.stream.template_rebuilt(message[1])
        elif kind == "checkpointed" and process is self.processes.template:
            self.stream.checkpointed(message[1], message[2])
        elif kind == "opened":
            self.stream.opened(process, message[1])
        elif kind == "ask":
            asyncio.get_running_loop().create_task(self._ask(process, message[1], message[2]))
        elif kind == "failed":  # a wrong credential on a connection it serves: the server counts it
            refusal = self.on_failure(Failure(*message[2])) if self.on_failure is not None else None
            if process.state != "dead":
                process.send(encode(("answer", message[1], refusal)))
        elif kind in ("result", "error") and process.current is not None:
            self.queries.result(process, message)

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

    # -- figures ------------------------------------------------------------------------------------------
    @property
    def workers(self) -> int:
        return self.processes.live

    @property
    def busy(self) -> int:
        return self.processes.evaluating_count

    @property
    def waiting(self) -> int:
        return self.queries.waiting + self.placement.waiting

    @property
    def connections(self) -> int:
        return len(self.placement.conns)

    @property
    def killed(self) -> int:
        return self.queries.killed + self.placement.killed

    @property
    def forked(self) -> int:
        return self.processes.forked

    def pids(self) -> list[int]:
        """The processes' ids, template first (for operators and tests)."""
        return self.processes.pids()
