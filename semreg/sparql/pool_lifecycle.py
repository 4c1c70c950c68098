"""The query processes and their life cycle (`semreg.sparql.pool`): the socket they reach the server on,
the template, the workers forked from it, their retirement and death.

- **Start.** `open()` makes a directory only the server's user reaches, with the page the server shares
  with the processes (`semreg.sparql.shared_page`); `start()` listens on a socket in it and starts the
  template (`python -m semreg.sparql.worker`), which waits for its snapshot (`load_template`). Every
  process's first message is its hello with the secret the server handed it.
- **Workers.** The template forks a worker (a few milliseconds) for every running or waiting query and
  for waiting connections (the pool says how many wait: `Owner.demand`), up to `max_workers`. Extra
  workers retire after `idle_s`; `min_workers` stay.
- **Failure.** A worker that dies is replaced (the pool answers for what it carried: `Owner.worker_lost`).
  A template that dies takes its workers with it (they die with their parent, so that nothing outlives
  the server); it is started again from a fresh snapshot after a growing delay.
- **Stop.** `stop()` kills the processes and waits (briefly) until they are gone, so that a server asked
  to stop never waits on a query and a killed process writes nothing more.

The pool (`Owner`) hears each process's messages after its hello, and when workers come and go.
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
from collections.abc import Callable, ValuesView
from typing import Any, Protocol

from semreg.sparql import replica
from semreg.sparql.frames import encode
from semreg.sparql.pool_process import Process, ProcessProtocol, wait_gone
from semreg.sparql.shared_page import Evaluating, SharedPage
from semreg.sparql.worker import PAGE, SECRET_ENV

log = logging.getLogger("semreg.sparql_pool")

MiB = 1024 * 1024
TEMPLATE_RESTART_BACKOFF_S = (0.0, 0.5, 2.0, 10.0)
STOP_WAIT_S = 1.0  # how long `stop()` waits for killed processes before the pool answers for their connections


class Owner(Protocol):
    """What the processes ask of the pool that owns them, and tell it."""

    def demand(self) -> tuple[int, bool]:
        """The queries waiting for a worker, and whether connections wait for one."""

    def message(self, process: Process, message: Any) -> None:
        """A message from a process that said hello."""

    def worker_ready(self) -> None:
        """A worker said hello: what waits for one can go to it."""

    def worker_lost(self, worker: Process) -> None:
        """A worker's process is gone; its slot on the page still says what it was evaluating."""

    def workers_changed(self) -> None:
        """A process is gone, and the workers were topped up."""

    def worker_forked(self, worker: Process) -> None:
        """The template was asked to fork `worker`."""


class Processes:
    """The template and its workers: started, forked, retired, killed."""

    def __init__(self, owner: Owner, request_snapshot: Callable[[], None], *, min_workers: int, max_workers: int,
                 memory_limit_mib: int, idle_s: float, settle_s: float = replica.SETTLE_S,
                 on_disk: str = "") -> None:
        if min_workers < 1 or max_workers < min_workers:
            raise ValueError("need 1 <= min_workers <= max_workers")
        self.owner = owner
        self.request_snapshot = request_snapshot
        self.min_workers = min_workers
        self.max_workers = max_workers
        self.memory_limit_bytes = max(0, memory_limit_mib) * MiB
        self.idle_s = idle_s
        self.settle_s = settle_s  # the template rebuilds a copy grown by changes once they stop this long
        self.on_disk = on_disk  # the replica's directory on disk (`semreg.sparql.checkpoints`); "": in memory
        self.forked = 0
        self.stopped = False
        self.template: Process | None = None
        self.page: SharedPage | None = None
        self._workers: dict[int, Process] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dir: str | None = None
        self._server: asyncio.AbstractServer | None = None
        self._secret = secrets.token_hex(16)
        self._template_proc: subprocess.Popen | None = None
        self._template_failures = 0
        self._slots = max_workers * 2 + 2  # a dying process keeps its slot until it is gone
        self._free_slots = list(range(self._slots - 1, -1, -1))
        self._next_id = 1

    # -- what the other parts read --------------------------------------------------------------------
    @property
    def workers(self) -> ValuesView[Process]:
        """The workers, live or on their way out (read only: they change here)."""
        return self._workers.values()

    @property
    def template_live(self) -> bool:
        """Whether the template holds its copy, so a worker is there or can be forked."""
        template = self.template
        return not self.stopped and template is not None and template.state == "live"

    def worker(self, worker_id: int) -> Process | None:
        return self._workers.get(worker_id)

    def evaluating(self, process: Process) -> Evaluating | None:
        """What a process is evaluating now, by its slot on the page (None: nothing, or no slot)."""
        page = self.page
        return page.evaluating(process.slot) if page is not None and process.slot >= 0 else None

    @property
    def live(self) -> int:
        return sum(1 for w in self._workers.values() if w.state != "dead")

    @property
    def evaluating_count(self) -> int:
        return sum(1 for w in self._workers.values() if w.state != "dead" and self.evaluating(w) is not None)

    def pids(self) -> list[int]:
        """The processes' ids, template first."""
        out = [self.template.pid] if self.template is not None and self.template.pid else []
        return out + [w.pid for w in self._workers.values() if w.pid is not None and w.state != "dead"]

    # -- start and stop ------------------------------------------------------------------------------
    def open(self, loop: asyncio.AbstractEventLoop) -> SharedPage:
        """The directory (mode 0700: only this user reaches the socket) and the page in it."""
        self._loop = loop
        self._dir = tempfile.mkdtemp(prefix="semreg-query-")
        self.page = SharedPage(os.path.join(self._dir, PAGE), self._slots, create=True)
        return self.page

    async def start(self) -> None:
        """Listen for the processes, and start the template (which asks for the first snapshot)."""
        assert self._loop is not None and self._dir is not None, "open() first"
        path = os.path.join(self._dir, "s")
        self._server = await self._loop.create_unix_server(lambda: ProcessProtocol(self), path)
        self._start_template()

    def _start_template(self) -> None:
        assert self._dir is not None
        template = Process(self._take_id(), "template")
        self.template = template
        env = {**os.environ, SECRET_ENV: self._secret}
        # Started from the event loop's thread: the template's death signal follows that thread.
        self._template_proc = subprocess.Popen([sys.executable, "-m", "semreg.sparql.worker",
                                                os.path.join(self._dir, "s"), str(self._slots), str(self.settle_s),
                                                self.on_disk],
                                               env=env, stdin=subprocess.DEVNULL)
        template.pid = self._template_proc.pid
        template.state = "waiting"  # for its snapshot: changes published until then are in it
        self.request_snapshot()
        log.info("query template starting", extra={"pid": template.pid})

    def load_template(self, frames: list[bytes]) -> None:
        """The snapshot a starting template waits for (with what goes after it): then it forks."""
        template = self.template
        if template is not None and template.state == "waiting":
            for frame in frames:
                template.send(frame)
            template.state = "live"
            self.grow()

    def stop(self) -> list[Process]:
        """Kill every process and wait (up to `STOP_WAIT_S`) until they are gone; the workers they were (their
        slots still say what each was evaluating). Empty if stopped already."""
        if self.stopped:
            return []
        self.stopped = True
        workers = list(self._workers.values())
        for process in workers:
            self.signal(process)
        if self.template is not None:
            self.signal(self.template)
        wait_gone([w.pid for w in workers if w.pid is not None], STOP_WAIT_S)
        for process in workers:
            self._kill(process)
        self._workers.clear()
        if self.template is not None:
            self._kill(self.template)
        if self._server is not None:
            self._server.close()
        return workers

    async def close(self) -> None:
        """After `stop()`: wait for the template to be reaped, and remove the socket, the page, the directory."""
        proc = self._template_proc
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(proc.wait, 5)
        if self._server is not None:
            await self._server.wait_closed()
        if self.page is not None:
            self.page.close()
            self.page = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)

    # -- workers --------------------------------------------------------------------------------------
    def _take_id(self) -> int:
        n = self._next_id
        self._next_id += 1
        return n

    def grow(self) -> None:
        """Fork until there is a worker for every running or waiting query and for waiting connections
        (at least min beside the retiring ones, at most max in all)."""
        template = self.template
        if self.stopped or template is None or template.state != "live":
            return
        live = [w for w in self._workers.values() if w.state != "dead"]
        serving = [w for w in live if not w.retiring]
        busy = sum(1 for w in serving if w.state == "busy")
        queries, connections = self.owner.demand()
        want = max(self.min_workers, busy + queries + (1 if connections and not serving else 0))
        count = min(want - len(serving), self.max_workers - len(live), len(self._free_slots))
        if count > 0:
            template.send_deferred()  # a fork starts from the template as it is
        for _ in range(count):
            worker = Process(self._take_id(), "worker", slot=self._free_slots.pop())
            if self.page is not None:
                self.page.clear(worker.slot)
            self._workers[worker.id] = worker
            template.send(encode(("fork", worker.id, self.memory_limit_bytes, worker.slot)))
            self.forked += 1
            self.owner.worker_forked(worker)

    def schedule_retirement(self, worker: Process) -> None:
        """A worker still idle, serving no connection, `idle_s` from now leaves (while more than min stay)."""
        if self._loop is None or worker.role != "worker" or len(self._workers) <= self.min_workers:
            return
        since = worker.idle_since

        def retire() -> None:
            if (worker.state == "idle" and worker.idle_since == since and not worker.conns and not worker.retiring
                    and sum(1 for w in self._workers.values() if w.state != "dead" and not w.retiring)
                    > self.min_workers):
                self.retire(worker, kill=False)

        self._loop.call_later(self.idle_s, retire)

    def retire(self, process: Process, kill: bool) -> None:
        """A worker leaves: killed at once, or asked to exit."""
        if kill:
            if process.state == "starting":
                self._free_slot(process)  # its fork, if it comes, is turned away at its hello (`_greeted`)
            self._kill(process)
        else:
            process.send(encode(("exit",)))
            process.state = "dead"
        self._workers.pop(process.id, None)

    def signal(self, process: Process) -> None:
        """SIGKILL (its death is heard by `lost`)."""
        if process.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(process.pid, signal.SIGKILL)

    def _kill(self, process: Process) -> None:
        process.state = "dead"
        self.signal(process)
        if process.transport is not None:
            process.transport.abort()

    def _free_slot(self, process: Process) -> None:
        if process.slot >= 0:
            if self.page is not None:
                self.page.clear(process.slot)
            self._free_slots.append(process.slot)
            process.slot = -1

    # -- what a process's connection says (`ProcessProtocol`) ----------------------------------------
    def hello(self, conn: ProcessProtocol, message: Any) -> Process | None:
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
            self.owner.worker_ready()
            self.schedule_retirement(process)
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
            process = self.template
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

    def message(self, process: Process, message: Any) -> None:
        self.owner.message(process, message)
        self.schedule_retirement(process)

    def lost(self, process: Process) -> None:
        if process.role == "worker":
            self.owner.worker_lost(process)
            self._free_slot(process)
        process.close_channel()
        expected = process.state == "dead" or self.stopped
        process.state = "dead"
        if process.role == "template" and not expected:
            self._template_lost(process)
            return
        self._workers.pop(process.id, None)
        self.grow()
        self.owner.workers_changed()

    def _template_lost(self, process: Process) -> None:
        """The template died (its workers with it): another starts after a growing delay."""
        self.template = None
        for worker in [w for w in self._workers.values() if w.state == "starting"]:
            del self._workers[worker.id]  # its fork request died with the template
            if worker.slot >= 0:
                self._free_slots.append(worker.slot)
        self._template_failures += 1
        delay = TEMPLATE_RESTART_BACKOFF_S[min(self._template_failures, len(TEMPLATE_RESTART_BACKOFF_S)) - 1]
        log.error("the query template exited; starting another", extra={"pid": process.pid, "delay_s": delay})
        assert self._loop is not None
        self._loop.call_later(delay, self._restart_template)

    def _restart_template(self) -> None:
        if not self.stopped and self.template is None:
            proc = self._template_proc
            if proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(1)
            self._start_template()
