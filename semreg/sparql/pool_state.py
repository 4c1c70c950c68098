"""What the parts of the query pool share (`semreg.sparql.pool.QueryPool`): its state, and the calls one
part makes to another.

`QueryPool` is one object whose parts live in their own modules, each a class over `PoolState`: the
processes' life cycle (`pool_lifecycle`), the replica stream to them (`pool_stream`), the connections
placed on them (`pool_placement`) and the queries it sends them (`pool`). The methods below marked as
another part's are declared for the type checker only (they do not exist at run time here), so that
each part can call them; the part named implements them.
"""
from __future__ import annotations

import asyncio
import collections
import secrets
import socket
import subprocess
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from semreg.access.failures import Failure
from semreg.errors import SemregError
from semreg.sparql import replica
from semreg.sparql.pool_process import Conn, Pending, Process
from semreg.sparql.service import Reply
from semreg.sparql.shared_page import SharedPage

MiB = 1024 * 1024

# ask(rate-limit key or None) -> the error to answer instead, or None: the server's part of a request a
# worker serves (its rate limit, a cluster's read barrier)
Asker = Callable[[str | None], Awaitable[SemregError | None]]
# other(socket, bytes already read): a connection whose next request is for another route, to uvicorn
Other = Callable[[socket.socket, bytes], None]
# observe([(method, status, seconds), ...]): requests workers answered on their own connections, for /metrics
Observer = Callable[[list[tuple[str, int, float]]], None]
# on_failure(a wrong credential on a worker's connection) -> the 429 to answer instead of the 401, or None
OnFailure = Callable[[Failure], SemregError | None]


class PoolState:
    """The pool's state (see the module's doc); `QueryPool` is built on it."""

    def __init__(self, request_snapshot: Callable[[], None], *, min_workers: int = 2, max_workers: int = 8,
                 memory_limit_mib: int = 2048, idle_s: float = 60.0, settle_s: float = replica.SETTLE_S) -> None:
        if min_workers < 1 or max_workers < min_workers:
            raise ValueError("need 1 <= min_workers <= max_workers")
        self.request_snapshot = request_snapshot
        self.min_workers = min_workers
        self.max_workers = max_workers
        self.memory_limit_bytes = max(0, memory_limit_mib) * MiB
        self.idle_s = idle_s
        self.settle_s = settle_s  # the template rebuilds a copy grown by changes once they stop this long
        self.generation = 0  # bumped by every published change: the result cache's key
        self.killed = 0
        self.forked = 0
        self.asker: Asker | None = None
        self.on_other: Other | None = None
        self.observe: Observer | None = None
        self.on_failure: OnFailure | None = None
        self._inbox: collections.deque = collections.deque()
        self._inbox_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dir: str | None = None
        self._server: asyncio.AbstractServer | None = None
        self._secret = secrets.token_hex(16)
        self._template: Process | None = None
        self._template_proc: subprocess.Popen | None = None
        self._template_failures = 0
        self._workers: dict[int, Process] = {}
        self._queue: collections.deque[Pending] = collections.deque()
        self._conns: dict[int, Conn] = {}
        self._homeless: collections.deque[tuple[Conn, bytes]] = collections.deque()
        self._slots = max_workers * 2 + 2  # a dying process keeps its slot until it is gone
        self._free_slots = list(range(self._slots - 1, -1, -1))
        self._page: SharedPage | None = None
        self._requested = 0
        self._prefix_version = 0
        self._prefix_map: dict[str, str] = {}
        self._gate: Any = None
        self._snapshot_bytes = 0  # the size of the last snapshot a template loaded
        self._next_id = 1
        self._next_qid = 1
        self._next_conn = 1
        self._closed = False
        self._started = False
        self._quiet: asyncio.TimerHandle | None = None

    if TYPE_CHECKING:  # the other parts' methods this part calls: declared for mypy only
        # -- the life cycle's (`pool_lifecycle`) ------------------------------------------------------------
        @property
        def ready(self) -> bool: ...

        def _grow(self) -> None: ...

        def _retire(self, process: Process, kill: bool) -> None: ...

        def _signal(self, process: Process) -> None: ...

        # -- the stream's (`pool_stream`) -------------------------------------------------------------------
        def drain(self) -> None: ...

        def _replace_worn(self) -> None: ...

        # -- the placement's (`pool_placement`) -------------------------------------------------------------
        def _rehome(self) -> None: ...

        def _answer_for(self, process: Process, reply: Reply) -> None: ...

        # -- the pool's own (`pool`) ------------------------------------------------------------------------
        def _dispatch(self) -> None: ...

        def _message(self, process: Process, message: Any) -> None: ...
