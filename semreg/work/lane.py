"""Request work on the event loop a slice at a time, so that what keeps the node's picture of who is alive
(heartbeats, lease expiries, health checks, `/healthz`, membership) never waits behind it for long.

Work that grows with the data or with a request (discovery by meaning, conjunctive questions, expansions, a
saved query's check, a batch's registrations, the watches a change wakes) runs as a *job*: plain synchronous
code, run in a greenlet (the library SQLAlchemy's asyncio layer runs its synchronous core with), that calls
`checkpoint()` where the registry may change under it: between patterns, between the terms of a walk, every few
hundred terms scored. At a checkpoint past its slice (`SLICE_S`) the job hands the loop back, and goes on where
it stopped once the loop has turned. The lane lets **one slice run per turn of the loop**, whatever the number
of jobs, taking them in turn (a cheap question waits for a few slices, not behind a heavy one; essential work,
the rest of a durable write or the watches a change wakes, before the others): between two slices the loop
polls its sockets and runs its timers, so a heartbeat waits at most a slice or two.

Why slices on the loop and not worker threads: the registry's indexes are plain dicts and sets that the loop
changes on every write; a thread walking them meanwhile fails ("changed size during iteration") or needs a
copy of them. A job runs only between the loop's own steps, so it sees them as any handler does; where it
keeps something across a checkpoint (a cache entry), it checks that nothing changed meanwhile. Work over
inputs nobody else changes (parsing a body, reasoning over a new ontology set, building the similarity index of
a hierarchy) goes to a thread instead (`offload`).

Each job carries a `Budget` (`semreg.work.budget`): `charge()` and `expect()` count against it, and a time limit
(`Unavailable`, 503, past it). Admission: a job is refused with 503 and `Retry-After` (shed) when the loop is
behind (`shed`, from `semreg.work.lag`) or too many jobs wait already.

Outside a job (tests calling the domain directly, start-up) `checkpoint`, `charge` and `expect` do nothing and
`offload` calls its function in place: the same code runs either way.
"""
from __future__ import annotations

import asyncio
import contextvars
import heapq
import logging
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, cast

from greenlet import GreenletExit, getcurrent, greenlet

from semreg.errors import Unavailable
from semreg.work.budget import Budget, Limits, OverBudget

T = TypeVar("T")
log = logging.getLogger("semreg.work")

SLICE_S = 0.002  # the most request work runs between two turns of the loop
RUNNING = 32  # jobs under way at once (they take turns: one slice a loop turn in all)
WAITING = 256  # jobs waiting for a place; past it, new ones are shed
TIME_LIMIT_S = 10.0
LONG_SLICE_S = 0.020  # a slice past this is counted: a checkpoint is missing somewhere

# Set in a task whose work keeps the node's picture current (the watches a change wakes): its jobs are essential.
ESSENTIAL: contextvars.ContextVar[bool] = contextvars.ContextVar("semreg_essential_work", default=False)
# Who asked for the work in this task (a token's name and the client's address, set by the HTTP edge): a refusal's
# log line names it, so that an operator finds the client whose questions are too broad.
CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("semreg_caller", default="")
REFUSALS_LOGGED_PER_S = 10.0  # log lines a second about refused work, in all; the others are counted in the next

_SLICE = object()  # what a job hands the loop at a checkpoint past its slice
_SPENT = object()  # the turn's holder once the slice of this turn of the loop has run and no job waits


class WorkTimedOut(Unavailable):
    """The work ran past its time limit (503); the node stopped it."""


class Shed(Unavailable):
    """The node refuses new work for now: its loop is behind, or too much work waits (503, Retry-After)."""


if TYPE_CHECKING:
    class _Greenlet:
        """What `Job` uses of `greenlet.greenlet`, typed (greenlet ships no types); at run time, greenlet's own."""

        parent: _Greenlet
        dead: bool
        gr_context: contextvars.Context

        def __init__(self, run: Callable[..., Any] | None = None) -> None: ...

        def switch(self, *args: Any) -> Any: ...

        def throw(self, *args: Any) -> Any: ...
else:
    _Greenlet = greenlet


class Job(_Greenlet):
    """One piece of request work under way: its budget, its slice and its deadline."""

    def __init__(self, fn: Callable[..., Any], budget: Budget, now: Callable[[], float], slice_s: float,
                 deadline: float | None, essential: bool = False) -> None:
        super().__init__(fn)
        self.budget = budget
        self.essential = essential
        self.now = now
        self.slice_s = slice_s
        self.deadline = deadline
        self.started = now()  # of the current slice
        self.gr_context = contextvars.copy_context()

    def checkpoint(self) -> None:
        now = self.now()
        if self.deadline is not None and now > self.deadline:
            raise WorkTimedOut(f"{self.budget.what} took longer than this node's time limit for request work "
                               f"(--work-time-limit); ask a narrower question, or try again when the node is less busy.")
        if now - self.started >= self.slice_s:
            self.parent.switch(_SLICE)

    def wait(self, awaitable: Awaitable[T]) -> T:
        return cast(T, self.parent.switch(awaitable))  # the loop switches back with the awaitable's result


def current() -> Job | None:
    job = getcurrent()
    return job if isinstance(job, Job) else None


def checkpoint() -> None:
    """In a job: hand the loop back if its slice is spent (and stop past the time limit). Elsewhere: nothing."""
    job = getcurrent()
    if isinstance(job, Job):
        job.checkpoint()


def charge(name: str, n: int = 1) -> None:
    """Count `n` units of `name` against the current job's budget (nothing outside a job)."""
    job = getcurrent()
    if isinstance(job, Job):
        job.budget.charge(name, n)


def expect(name: str, n: int) -> None:
    """Refuse now if `n` more units of `name` would pass the current job's budget (nothing outside a job)."""
    job = getcurrent()
    if isinstance(job, Job):
        job.budget.expect(name, n)


def offload(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on a worker thread, the job waiting for it while the loop goes on; in place outside a job.
    Only for work over objects nothing else changes meanwhile (a hierarchy, a parsed body)."""
    job = getcurrent()
    if isinstance(job, Job):
        return job.wait(asyncio.to_thread(fn, *args))
    return fn(*args)


SORTED_AT_ONCE = 16_384  # items sorted between two checkpoints (~5 ms of strings)
PACE = 256  # items of a walk between two checkpoints (`paced`)


def paced(items: Iterable[T], every: int = PACE) -> Iterator[T]:
    """`items`, with a checkpoint every `every` of them: for a walk over a list nothing else changes (a copy, an
    answer's own objects), never over a live dict or set (a registration may change it while the walk pauses)."""
    for k, item in enumerate(items):
        if k % every == every - 1:
            checkpoint()
        yield item


def sort(items: Iterable[T], key: Callable[[T], Any] | None = None) -> list[T]:
    """`sorted(items, key=key)`, in a job a run at a time with checkpoints between, then merged with checkpoints:
    one `sorted` of a million ids held Python's lock for a second. Outside a job, `sorted`."""
    if current() is None:
        return sorted(items, key=key)  # type: ignore[type-var, arg-type]
    runs: list[list[T]] = []
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) == SORTED_AT_ONCE:
            runs.append(sorted(batch, key=key))  # type: ignore[type-var, arg-type]
            batch = []
            checkpoint()
    if batch or not runs:
        runs.append(sorted(batch, key=key))  # type: ignore[type-var, arg-type]
    if len(runs) == 1:
        return runs[0]
    out: list[T] = []
    for k, item in enumerate(heapq.merge(*runs, key=key)):  # type: ignore[arg-type]
        if k % SORTED_AT_ONCE == SORTED_AT_ONCE - 1:
            checkpoint()
        out.append(item)
    return out


class Lane:
    """The jobs of one node's event loop (see the module's docstring)."""

    def __init__(self, limits: Limits = Limits(), *, slice_s: float = SLICE_S, running: int = RUNNING,
                 waiting: int = WAITING, time_limit_s: float = TIME_LIMIT_S,
                 shed: Callable[[], float | None] = lambda: None, now: Callable[[], float] = time.perf_counter) -> None:
        """`shed()`: None while the node keeps up, else the seconds a shed client should wait."""
        self.limits = limits
        self.slice_s = slice_s
        self.time_limit_s = time_limit_s
        self.shed = shed
        self.now = now
        self._places = asyncio.Semaphore(running)
        self.waiting_max = waiting
        self.waiting = 0
        self.running = 0
        # the jobs waiting for a turn: essential work's first (a write already durable, the watches a change
        # wakes), then the rest, each in the order it came
        self._turns: deque[tuple[Job, asyncio.Future[None]]] = deque()
        self._essential_turns: deque[tuple[Job, asyncio.Future[None]]] = deque()
        # the job whose turn it is (it runs a slice now, or at the loop's next turn), or _SPENT, or None
        self._holder: Job | object | None = None
        # what /metrics reads
        self.jobs = 0
        self.slices = 0
        self.long_slices = 0
        self.longest_slice_s = 0.0
        self.refused: Counter[str] = Counter()  # "shed", "timeout", or the budget a job went past
        self.spent_max: Counter[str] = Counter()  # the most a job that finished spent, by budget
        self._refusal_lines = (0.0, REFUSALS_LOGGED_PER_S)  # (when last counted, lines it may still log)
        self._refusals_folded = 0

    async def run(self, fn: Callable[..., T], *args: Any, what: str = "this request", essential: bool | None = None,
                  shed: bool = True) -> T:
        """`fn(*args)` as a job: its result, or its exception. `essential` work (the rest of a write already
        durable, the watches a change wakes; by default, what a task marked `ESSENTIAL` runs) is never shed and
        has no time limit. `shed=False`: work another node already admitted (a part of its question)."""
        if essential is None:
            essential = ESSENTIAL.get()
        if shed and not essential:
            self._admit(what)
        if not essential:  # essential work does not wait for a place: what waits for it is already admitted
            self.waiting += 1
            try:
                await self._places.acquire()
            finally:
                self.waiting -= 1
        self.running += 1
        self.jobs += 1
        deadline = None if essential else self.now() + self.time_limit_s
        job = Job(fn, Budget(self.limits, what), self.now, self.slice_s, deadline, essential)
        try:
            out = await self._drive(job, args)
            for name, n in job.budget.spent.items():
                if n > self.spent_max[name]:
                    self.spent_max[name] = n
            return cast(T, out)  # what `fn` returned, handed over by the greenlet
        except OverBudget as exc:
            self.refused[exc.budget] += 1
            self._log_refusal(what, exc.budget, job.budget.spent.get(exc.budget, 0))
            raise
        except WorkTimedOut:
            self.refused["timeout"] += 1
            self._log_refusal(what, "timeout", round(self.time_limit_s, 3))
            raise
        finally:
            if not job.dead:  # cancelled while it waited for its turn: its frames unwound, its finally blocks run
                job.throw(GreenletExit)
            self.running -= 1
            if not essential:
                self._places.release()

    def _admit(self, what: str) -> None:
        behind = self.shed()
        if behind is None and self.waiting < self.waiting_max:
            return
        self.refused["shed"] += 1
        reason = "its event loop is behind" if behind is not None else "too much request work waits already"
        self._log_refusal(what, "shed", reason)
        raise Shed(f"this node is shedding request work: {reason}; retry {what} after the Retry-After header's "
                   f"seconds.", retry_after_s=round(behind or 1))

    def _log_refusal(self, what: str, reason: str, detail: Any) -> None:
        """`request work refused` (logger `semreg.work`) with the caller, what it asked and why: at most
        `REFUSALS_LOGGED_PER_S` lines a second, the ones left out counted in the next line's `folded`."""
        now = self.now()
        at, left = self._refusal_lines
        left = min(REFUSALS_LOGGED_PER_S, left + (now - at) * REFUSALS_LOGGED_PER_S)
        if left < 1:
            self._refusal_lines = (now, left)
            self._refusals_folded += 1
            return
        self._refusal_lines = (now, left - 1)
        log.info("request work refused", extra={"caller": CALLER.get() or "unknown", "what": what, "reason": reason,
                                                "detail": detail, "folded": self._refusals_folded})
        self._refusals_folded = 0

    async def _drive(self, job: Job, args: tuple[Any, ...]) -> Any:
        try:
            await self._turn(job)
            job.started = self.now()
            out = job.switch(*args)
            while not job.dead:
                self._slice_ended(job)
                if out is _SLICE:
                    await self._next_turn(job)
                    job.started = self.now()
                    out = job.switch()
                    continue
                self._pass(job)  # it waits for something off the loop: the turn goes to the others meanwhile
                try:
                    value = await out
                except Exception as exc:  # the job's own error, raised in it where it waited
                    await self._turn(job)
                    job.started = self.now()
                    out = job.throw(exc)
                    continue
                await self._turn(job)
                job.started = self.now()
                out = job.switch(value)
            self._slice_ended(job)
            return out
        finally:
            self._pass(job)

    def _slice_ended(self, job: Job) -> None:
        took = self.now() - job.started
        self.slices += 1
        if took > self.longest_slice_s:
            self.longest_slice_s = took
        if took > LONG_SLICE_S:
            self.long_slices += 1

    # -- one slice a turn of the loop ------------------------------------------------------------------
    async def _turn(self, job: Job) -> None:
        """Wait for the turn: at once when no job holds it, else after the jobs queued before this one."""
        if self._holder is None:
            self._holder = job
            return
        await self._queued(job)

    async def _next_turn(self, job: Job) -> None:
        """After a slice: the others' turns first, then this job's, never in the same turn of the loop."""
        waiting = self._queued(job)
        self._pass(job)
        await waiting

    def _queued(self, job: Job) -> Awaitable[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (job, fut)
        turns = self._essential_turns if job.essential else self._turns
        turns.append(entry)

        async def wait() -> None:
            try:
                if fut.done():  # given back at once (no other job waits): still a turn of the loop first
                    await asyncio.sleep(0)
                await fut
            except asyncio.CancelledError:
                if entry in turns:
                    turns.remove(entry)
                raise
        return wait()

    def _pass(self, job: Job) -> None:
        """If `job` holds the turn: give it to the next job waiting (which runs at the loop's next turn); with
        none waiting, the turn stays spent until the loop's next turn (a job arriving meanwhile waits for it)."""
        if self._holder is not job:
            return
        if not self._give_next():
            self._holder = _SPENT
            asyncio.get_running_loop().call_soon(self._after_turn)

    def _give_next(self) -> bool:
        for turns in (self._essential_turns, self._turns):
            while turns:
                nxt, fut = turns.popleft()
                if not fut.done():
                    self._holder = nxt
                    fut.set_result(None)
                    return True
        return False

    def _after_turn(self) -> None:
        if self._holder is _SPENT and not self._give_next():
            self._holder = None
