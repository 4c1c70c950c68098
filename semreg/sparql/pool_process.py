"""A query process as the server sees it (`semreg.sparql.pool`): its record, what it carries (the query
it evaluates, the connections it serves, the changes held for it) and the server's end of its socket.

- **Out.** Frames go through the process's outbox, never blocking the event loop: on a full socket the
  outbox waits for it to drain. A handed-over connection's descriptor goes with its frame's first bytes.
- **In.** `ProcessProtocol` cuts the process's messages out of the socket and hands them to the
  processes' life cycle (`semreg.sparql.pool_lifecycle.Processes`): the first must be its hello with the
  secret; a process that speaks garbage is dropped, never trusted.
- **Gone.** `wait_gone` waits for killed processes to exit, after which they write nothing more.
"""
from __future__ import annotations

import array
import asyncio
import collections
import contextlib
import logging
import os
import select
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from semreg.errors import SemregError
from semreg.sparql.frames import FrameBuffer
from semreg.sparql.job import Job

log = logging.getLogger("semreg.sparql_pool")

STOPPED_MID_QUERY = ("the query's process stopped while evaluating it: the query may need more memory than a "
                     "query may use here; narrow it, or try again.")


@dataclass(eq=False)
class Pending:
    """A query the server sent (`QueryPool.evaluate`), waiting for a worker or running in one."""

    job: Job
    prefixes_version: int
    prefixes: dict[str, str] | None
    future: asyncio.Future
    deadline: float  # on time.monotonic()
    worker: Process | None = None
    timer: asyncio.TimerHandle | None = None


def fail(pending: Pending, error: SemregError) -> None:
    if not pending.future.done():
        pending.future.set_exception(error)


@dataclass(eq=False)
class Conn:
    """A handed-over connection; the server keeps its own descriptor of it while a worker serves it."""

    id: int
    sock: socket.socket
    worker: Process | None = None
    data: bytes = b""  # what went with it to its worker: sent again if the worker never took it in


@dataclass(eq=False)
class Process:
    """The template or a worker, as the server sees it: a record, its fields grouped by the part of the pool
    (`semreg.sparql.pool`) that keeps them."""

    # the life cycle's (`pool_lifecycle`)
    id: int
    role: str  # template | worker
    state: str = "starting"  # starting | idle | busy | dead (a template: starting | waiting | live | dead)
    pid: int | None = None
    transport: asyncio.Transport | None = None
    channel: socket.socket | None = None  # a second handle on the process's socket: frames out, descriptors too
    outbox: collections.deque = field(default_factory=collections.deque)  # [frame, descriptor or -1]
    writing: bool = False
    slot: int = -1  # its slot on the shared page
    idle_since: float = 0.0
    # leaving (its query ran long, or its copy is worn): nothing new goes to it, and it goes once its query ends
    retiring: bool = False
    # the queries' the server sends (`pool_queries`)
    current: Pending | None = None
    prefixes_version: int = -1
    # the connections' (`pool_placement`)
    conns: set[int] = field(default_factory=set)
    overdue: bool = False  # killed at a connection's query's deadline
    # the replica stream's (`pool_stream`). Changes held back: the template's until writes pause; a worker's
    # until a query needs them (it asks: `wants`, the ticket it waits for, until which every change goes to it
    # at once) or they pile up.
    deferred: list[bytes] = field(default_factory=list)
    deferred_bytes: int = 0
    wants: int = 0
    changed_bytes: int = 0  # frames of changes sent or held for it since its fork (see `replica.Wear`)

    def send(self, frame: bytes, fd: int = -1) -> None:
        self.outbox.append([memoryview(frame), fd])
        if self.channel is not None and not self.writing:
            self.flush()

    def send_deferred(self) -> None:
        """Send the changes held back for this process (`semreg.sparql.pool_stream`)."""
        for frame in self.deferred:
            self.send(frame)
        self.deferred.clear()
        self.deferred_bytes = 0

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
                outbox.clear()  # the process has gone; `Processes.lost` follows
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


class ProcessOwner(Protocol):
    """What a process's connection tells the processes' life cycle (`semreg.sparql.pool_lifecycle.Processes`)."""

    def hello(self, conn: ProcessProtocol, message: Any) -> Process | None: ...

    def message(self, process: Process, message: Any) -> None: ...

    def lost(self, process: Process) -> None: ...


class ProcessProtocol(asyncio.Protocol):
    """The server's end of one process's connection to the query socket."""

    def __init__(self, owner: ProcessOwner) -> None:
        self.owner = owner
        self.frames = FrameBuffer()
        self.transport: asyncio.Transport | None = None
        self.process: Process | None = None

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
                self.process = self.owner.hello(self, message)
                if self.process is None:
                    assert self.transport is not None
                    self.transport.close()
                    return
            else:
                self.owner.message(self.process, message)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.process is not None:
            self.owner.lost(self.process)


def wait_gone(pids: list[int], timeout_s: float) -> None:
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
