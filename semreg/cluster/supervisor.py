"""Tasks that must keep running, whatever ends them: started again, with backoff on the injected clock.

A supervised task that ends with an exception, or with a `CancelledError` nobody asked its task for (a
library that cancels the calls of a connection another task closed), is logged at error level with the
exception, listed in `trouble` until it reports itself `healthy` again, and started again after a backoff
that doubles from `min_s` up to `max_s` (and starts over once it ran `max_s` without failing). Only
`stop` ends them.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from semreg.clock import Clock, Interrupted, sleep

log = logging.getLogger("semreg.supervisor")


class Supervisor:
    def __init__(self, clock: Clock, *, owner: str, min_s: float = 0.5, max_s: float = 30.0) -> None:
        self.clock = clock
        self.owner = owner  # who runs these tasks, for the log
        self.min_s = min_s
        self.max_s = max_s
        self.trouble: dict[str, str] = {}  # task name → why it is not running as it should
        self.restarts = 0
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stopping = False

    def start(self, name: str, what: str, body: Callable[[], Awaitable[None]]) -> None:
        """Run `body()` as task `name` (`what` names it in the log and in `trouble`) until `stop`."""
        if name not in self._tasks or self._tasks[name].done():
            self._stopping = False
            self._tasks[name] = asyncio.get_running_loop().create_task(self._run(name, what, body), name=name)

    def running(self, name: str) -> bool:
        return name in self._tasks and not self._tasks[name].done()

    def healthy(self, name: str) -> None:
        """Task `name` runs as it should (again)."""
        self.trouble.pop(name, None)

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Cancel every task and wait for them (no longer than `timeout_s`: one stuck in a call that ignores
        its cancellation is left behind)."""
        self._stopping = True
        tasks = list(self._tasks.values())
        self._tasks.clear()
        self.trouble.clear()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)

    async def _run(self, name: str, what: str, body: Callable[[], Awaitable[None]]) -> None:
        backoff = self.min_s
        while not self._stopping:
            started = self.clock.monotonic()
            try:
                await body()
                exc: BaseException = RuntimeError(f"{what} ended by itself")
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if self._stopping or (task is not None and task.cancelling()):
                    raise
                exc = Interrupted(f"{what} was cancelled from elsewhere")
            except Exception as failure:
                exc = failure
            if self._stopping:
                return
            if self.clock.monotonic() - started > self.max_s:
                backoff = self.min_s  # it ran a good while before it failed
            self.trouble[name] = f"its {what} failed ({type(exc).__name__}: {str(exc)[:160]}); starting it again"
            self.restarts += 1
            log.error(f"{what} failed; starting it again", exc_info=exc,
                      extra={"node": self.owner, "task": name, "error": f"{type(exc).__name__}: {exc}"[:300],
                             "retry_s": backoff})
            await sleep(self.clock, backoff)
            backoff = min(backoff * 2, self.max_s)
