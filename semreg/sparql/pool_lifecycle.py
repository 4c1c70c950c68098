"""The query processes' life cycle (`semreg.sparql.pool`): the template, the workers forked from it, their
retirement and death, and the pool's start and stop.

- **Start.** `start()` listens on a socket in a directory only the server's user reaches, and starts the
  template (`python -m semreg.sparql.worker`), which waits for its snapshot. Every process's first
  message is its hello with the secret the server handed it.
- **Workers.** The template forks a worker (a few milliseconds) for every running or waiting query and
  for waiting connections, up to `max_workers`. Extra workers retire after `idle_s`; `min_workers` stay.
- **Failure.** A worker that dies mid-query answers 503 for that query and is replaced; its other
  connections are closed. A template that dies takes its workers with it (they die with their parent,
  so that nothing outlives the server); it is started again from a fresh snapshot, and queries wait for
  it within their time limit.
- **Stop.** `stop()` answers every waiting and running query with 503 at once and kills the processes,
  so that a server asked to stop never waits on a query.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

from semreg.errors import Unavailable
from semreg.http1.server import end_connection
from semreg.sparql.frames import encode
from semreg.sparql.pool_process import Process, ProcessProtocol, fail, wait_gone
from semreg.sparql.pool_state import PoolState
from semreg.sparql.runner import time_limit_error
from semreg.sparql.service import error_reply
from semreg.sparql.shared_page import SharedPage
from semreg.sparql.worker import PAGE, SECRET_ENV

log = logging.getLogger("semreg.sparql_pool")

TEMPLATE_RESTART_BACKOFF_S = (0.0, 0.5, 2.0, 10.0)
STOP_WAIT_S = 1.0  # how long `stop()` waits for killed processes before it answers for their connections
STOPPED_MID_QUERY = ("the query's process stopped while evaluating it: the query may need more memory than a "
                     "query may use here; narrow it, or try again.")


class PoolLifecycle(PoolState):
    # -- start and stop ------------------------------------------------------------------------------
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
        self._server = await self._loop.create_unix_server(lambda: ProcessProtocol(self), path)
        self._start_template()

    def _start_template(self) -> None:
        assert self._dir is not None
        template = Process(self._take_id(), "template")
        self._template = template
        env = {**os.environ, SECRET_ENV: self._secret}
        # Started from the event loop's thread: the template's death signal follows that thread.
        self._template_proc = subprocess.Popen([sys.executable, "-m", "semreg.sparql.worker",
                                                os.path.join(self._dir, "s"), str(self._slots), str(self.settle_s)],
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
            fail(pending, stopping)
        self._queue.clear()
        workers = list(self._workers.values())
        for worker in workers:
            if worker.current is not None:
                fail(worker.current, stopping)
            self._signal(worker)
        if self._template is not None:
            self._signal(self._template)
        wait_gone([w.pid for w in workers if w.pid is not None], STOP_WAIT_S)
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
            template.send_deferred()  # a fork starts from the template as it is
        for _ in range(count):
            worker = Process(self._take_id(), "worker", slot=self._free_slots.pop())
            if self._page is not None:
                self._page.clear(worker.slot)
            self._workers[worker.id] = worker
            template.send(encode(("fork", worker.id, self.memory_limit_bytes, worker.slot)))
            self.forked += 1

    def _hello(self, conn: ProcessProtocol, message: Any) -> Process | None:
        process = self._greeted(message)
        if process is None:
            return None
        assert conn.transport is not None
        process.transport = conn.transport
        raw = conn.transport.get_extra_info("socket")
        process.channel = socket.socket(fileno=os.dup(raw.fileno()))
        process.channel.setblocking(False)
        process.flush()
        if process.role == "template":
            self._template_failures = 0
            log.info("query template ready", extra={"pid": process.pid})
        else:
            self._dispatch()
            self._rehome()
            self._schedule_retirement(process)
            self._replace_worn()  # the next worn one may go now that this one serves
        return process

    def _greeted(self, message: Any) -> Process | None:
        """The process a hello comes from, if it presents the secret and the pool waits for it."""
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
            return process
        process = self._workers.get(worker_id)
        if process is None or process.state != "starting":
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # a fork nobody waits for any more
            return None
        process.pid = pid
        process.state = "idle"
        process.idle_since = time.monotonic()
        return process

    def _lost(self, process: Process) -> None:
        if process.role == "worker":
            self._answer_for(process, error_reply(time_limit_error(self._time_limit()) if process.overdue else
                                                  Unavailable(STOPPED_MID_QUERY)))
            self._free_slot(process)
        process.close_channel()
        if process.state == "dead" or self._closed:
            process.state = "dead"
            self._workers.pop(process.id, None)
            self._grow()
            self._rehome()
            self._replace_worn()
            return
        process.state = "dead"
        if process.role == "template":
            self._template_lost(process)
            return
        self._workers.pop(process.id, None)
        if process.current is not None:
            log.warning("a query process exited while evaluating", extra={"pid": process.pid})
            fail(process.current, Unavailable(STOPPED_MID_QUERY))
        self._grow()
        self._rehome()
        self._replace_worn()

    def _free_slot(self, process: Process) -> None:
        if process.slot >= 0:
            if self._page is not None:
                self._page.clear(process.slot)
            self._free_slots.append(process.slot)
            process.slot = -1

    def _template_lost(self, process: Process) -> None:
        """The template died (its workers with it): another starts after a growing delay."""
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

    def _schedule_retirement(self, worker: Process) -> None:
        if self._loop is None or worker.role != "worker" or len(self._workers) <= self.min_workers:
            return
        since = worker.idle_since

        def retire() -> None:
            if (worker.state == "idle" and worker.idle_since == since and not worker.conns and not worker.retiring
                    and sum(1 for w in self._workers.values() if w.state != "dead" and not w.retiring)
                    > self.min_workers):
                self._retire(worker, kill=False)

        self._loop.call_later(self.idle_s, retire)

    def _retire(self, process: Process, kill: bool) -> None:
        if kill:
            if process.state == "starting":
                self._free_slot(process)  # its fork, if it comes, is turned away at its hello (`_greeted`)
            self._kill(process)
        else:
            process.send(encode(("exit",)))
            process.state = "dead"
        self._workers.pop(process.id, None)

    def _signal(self, process: Process) -> None:
        if process.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(process.pid, signal.SIGKILL)

    def _kill(self, process: Process) -> None:
        process.state = "dead"
        self._signal(process)
        if process.transport is not None:
            process.transport.abort()
