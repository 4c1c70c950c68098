"""The lane: request work in slices on the event loop, one slice a turn of the loop, within its budget and time
limit, shed when the node is behind (`semreg.work.lane`).

Time is a counter the jobs move themselves (each unit of "work" advances it), so slices are exact and no test
depends on how fast this machine runs."""
from __future__ import annotations

import asyncio
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semreg.errors import BadRequest, Unavailable
from semreg.work import lane as work
from semreg.work.budget import SCORED, Limits, OverBudget
from semreg.work.lane import Lane, Shed, WorkTimedOut


class Counter:
    """A clock that moves only when work is done."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def work(self, seconds: float) -> None:
        self.t += seconds


class Turns:
    """Counts the turns of the loop: a task that steps once a turn."""

    def __init__(self) -> None:
        self.n = 0
        self.task: asyncio.Task | None = None

    async def __aenter__(self) -> Turns:
        async def tick() -> None:
            while True:
                self.n += 1
                await asyncio.sleep(0)
        self.task = asyncio.get_running_loop().create_task(tick())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()


def worker(clock: Counter, units: int, turns: Turns | None = None, seen: list | None = None, name: str = ""):
    """A job of `units` milliseconds of work, a checkpoint after each; notes the loop's turn at each unit."""
    def run() -> str:
        for _ in range(units):
            if seen is not None and turns is not None:
                seen.append((name, turns.n))
            clock.work(0.001)
            work.checkpoint()
        return name or "done"
    return run


def test_a_job_returns_its_result_and_raises_its_error():
    async def go():
        lane = Lane()
        assert await lane.run(lambda a, b: a + b, 2, 3) == 5

        def fails() -> None:
            raise BadRequest("no")
        with pytest.raises(BadRequest):
            await lane.run(fails)
        assert lane.running == 0
    asyncio.run(go())


def test_a_long_job_gives_the_loop_back_between_slices():
    async def go():
        clock = Counter()
        lane = Lane(slice_s=0.002, now=clock)
        seen: list = []
        async with Turns() as turns:
            assert await lane.run(worker(clock, 10, turns, seen, "a")) == "a"
        # two units a slice, a turn of the loop between slices
        by_turn = [t for _, t in seen]
        assert len(set(by_turn)) == 5
        assert lane.slices == 6  # the last one only returns
    asyncio.run(go())


def test_one_slice_runs_a_turn_whatever_the_number_of_jobs():
    async def go():
        clock = Counter()
        lane = Lane(slice_s=0.002, now=clock)
        seen: list = []
        async with Turns() as turns:
            results = await asyncio.gather(*(lane.run(worker(clock, 6, turns, seen, name)) for name in "abc"))
        assert results == ["a", "b", "c"]
        slices: dict[int, set[str]] = {}
        for name, turn in seen:
            slices.setdefault(turn, set()).add(name)
        assert all(len(names) == 1 for names in slices.values()), slices
        # taking turns: once b and c wait (they arrive while a runs its first slice), no job runs two slices
        # while another waits
        order = [name for name, _ in seen][::2]
        assert order == list("aabcabcbc")
    asyncio.run(go())


def test_a_cheap_job_waits_a_few_slices_not_behind_a_heavy_one():
    async def go():
        clock = Counter()
        lane = Lane(slice_s=0.002, now=clock)
        done: list[str] = []

        async def run(name: str, units: int) -> None:
            await lane.run(worker(clock, units, name=name))
            done.append(name)
        heavy = asyncio.ensure_future(run("heavy", 1000))
        await asyncio.sleep(0)
        await run("cheap", 1)
        assert done == ["cheap"]
        await heavy
    asyncio.run(go())


def test_work_past_a_budget_is_refused_with_the_budget_named():
    async def go():
        lane = Lane(Limits(scored=10))

        def scores(n: int) -> int:
            for _ in range(n):
                work.charge(SCORED)
            return n
        assert await lane.run(scores, 10) == 10
        with pytest.raises(OverBudget) as caught:
            await lane.run(scores, 11, what="this question")
        error = caught.value
        assert error.status == 400
        assert error.body()["budget"] == "scored" and error.body()["limit"] == 10
        assert "--max-scored" in error.message and error.message.startswith("this question is too broad")
        assert lane.refused["scored"] == 1

        def estimated() -> None:
            work.expect(SCORED, 11)
            raise AssertionError("refused before the work")
        with pytest.raises(OverBudget):
            await lane.run(estimated)
    asyncio.run(go())


def test_work_past_its_time_limit_stops_with_a_503():
    async def go():
        clock = Counter()
        lane = Lane(now=clock, time_limit_s=0.5)
        with pytest.raises(WorkTimedOut) as caught:
            await lane.run(worker(clock, 10_000))
        assert caught.value.status == 503 and caught.value.headers["Retry-After"] == "1"
        assert 0.5 < clock.t <= 0.502  # stopped at the first checkpoint past the limit
        assert lane.refused["timeout"] == 1
        # essential work has no time limit
        assert await lane.run(worker(clock, 1000), essential=True) == "done"
    asyncio.run(go())


def test_new_work_is_shed_while_the_loop_is_behind_but_essential_work_is_not():
    async def go():
        behind: list[float | None] = [None]
        lane = Lane(shed=lambda: behind[0])
        assert await lane.run(lambda: 1) == 1
        behind[0] = 3.0
        with pytest.raises(Shed) as caught:
            await lane.run(lambda: 1, what="this question")
        assert caught.value.status == 503 and caught.value.headers["Retry-After"] == "3"
        assert "retry this question" in caught.value.message
        assert await lane.run(lambda: 2, essential=True) == 2
        assert lane.refused["shed"] == 1
    asyncio.run(go())


def test_work_past_the_waiting_room_is_shed():
    async def go():
        release = asyncio.Event()
        lane = Lane(running=1, waiting=1)

        def waits() -> None:
            work.current().wait(release.wait())  # type: ignore[union-attr]
        first = asyncio.ensure_future(lane.run(waits))
        second = asyncio.ensure_future(lane.run(lambda: "second"))
        await asyncio.sleep(0)
        assert lane.running == 1 and lane.waiting == 1
        with pytest.raises(Shed):
            await lane.run(lambda: "third")
        release.set()
        await first
        assert await second == "second"
    asyncio.run(go())


def test_a_cancelled_job_unwinds_and_the_others_go_on():
    async def go():
        clock = Counter()
        lane = Lane(slice_s=0.002, now=clock)
        unwound = threading.Event()

        def endless() -> None:
            try:
                while True:
                    clock.work(0.001)
                    work.checkpoint()
            finally:
                unwound.set()
        task = asyncio.ensure_future(lane.run(endless, essential=True))
        other = asyncio.ensure_future(lane.run(worker(clock, 20, name="other")))
        for _ in range(5):
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert unwound.is_set()
        assert await other == "other"
        assert lane.running == 0
        assert await lane.run(lambda: "after") == "after"
    asyncio.run(go())


def test_offload_runs_on_a_thread_in_a_job_and_in_place_outside():
    async def go():
        lane = Lane()
        loop_thread = threading.get_ident()

        def where() -> int:
            return threading.get_ident()

        def job() -> int:
            return work.offload(where)
        assert await lane.run(job) != loop_thread
        assert work.offload(where) == loop_thread

        def failing() -> None:
            raise ValueError("bad")

        def catches() -> str:
            try:
                work.offload(failing)
            except ValueError as exc:
                return f"caught {exc}"
            return "not raised"
        assert await lane.run(catches) == "caught bad"
    asyncio.run(go())


def test_outside_a_job_checkpoints_and_charges_do_nothing():
    assert work.current() is None
    work.checkpoint()
    for _ in range(5):
        work.charge(SCORED, 10**9)
    work.expect(SCORED, 10**12)


def test_errors_map_to_their_statuses():
    assert issubclass(Shed, Unavailable) and issubclass(WorkTimedOut, Unavailable)
    assert issubclass(OverBudget, BadRequest)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.booleans()), min_size=1, max_size=6))
def test_any_mix_of_jobs_each_gets_its_own_answer_and_one_slice_a_turn(jobs):
    async def go():
        clock = Counter()
        lane = Lane(slice_s=0.002, now=clock)
        seen: list = []

        def job(name: str, units: int, fails: bool, turns: Turns):
            def run() -> str:
                worker(clock, units, turns, seen, name)()
                if fails:
                    raise BadRequest(name)
                return name
            return run
        async with Turns() as turns:
            results = await asyncio.gather(*(lane.run(job(str(k), units, fails, turns))
                                             for k, (units, fails) in enumerate(jobs)), return_exceptions=True)
        for k, ((_, fails), result) in enumerate(zip(jobs, results)):
            if fails:
                assert isinstance(result, BadRequest) and result.message == str(k)
            else:
                assert result == str(k)
        per_turn: dict[int, set[str]] = {}
        for name, turn in seen:
            per_turn.setdefault(turn, set()).add(name)
        assert all(len(names) == 1 for names in per_turn.values())
        assert lane.running == 0 and lane._holder is None
    asyncio.run(go())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=6), max_size=400), st.integers(1, 50))
def test_a_sort_in_a_job_is_sorted_and_gives_the_loop_back(items, run):
    async def go():
        lane = Lane(slice_s=0.0)
        turns = []

        async def count() -> None:
            while True:
                turns.append(1)
                await asyncio.sleep(0)
        counter = asyncio.ensure_future(count())
        out = await lane.run(work.sort, items)
        keyed = await lane.run(lambda: work.sort(items, key=len))
        counter.cancel()
        return out, keyed, len(turns)
    original = work.SORTED_AT_ONCE
    work.SORTED_AT_ONCE = run
    try:
        out, keyed, turns = asyncio.run(go())
    finally:
        work.SORTED_AT_ONCE = original
    assert out == sorted(items) and keyed == sorted(items, key=len)  # stable, as sorted is
    if len(items) > 2 * run:
        assert turns > 1  # the loop turned while it sorted
    assert work.sort(items) == sorted(items)  # outside a job: sorted


def test_paced_gives_the_loop_back_every_so_many_items():
    async def go():
        lane = Lane(slice_s=0.0)
        seen = []

        async def count() -> None:
            while True:
                seen.append("turn")
                await asyncio.sleep(0)
        counter = asyncio.ensure_future(count())
        await asyncio.sleep(0)
        out = await lane.run(lambda: [seen.append(x) or x for x in work.paced(range(10), every=3)])
        counter.cancel()
        return out, seen
    out, seen = asyncio.run(go())
    assert out == list(range(10))
    items = [s for s in seen if s != "turn"]
    assert items == list(range(10))
    # a turn of the loop before every third item's turn comes: between 1 and 2, 4 and 5, 7 and 8
    assert all(seen.index(k + 1) > seen.index(k) + 1 for k in (1, 4, 7))
    assert seen.index(3) == seen.index(2) + 1


def test_essential_work_takes_its_turns_before_the_rest_and_the_most_spent_is_kept():
    async def go():
        clock = Counter()
        lane = Lane(slice_s=0.002, now=clock)
        seen: list = []
        async with Turns() as turns:
            heavy = [asyncio.ensure_future(lane.run(worker(clock, 6, turns, seen, name))) for name in "ab"]
            await asyncio.sleep(0)
            wake = asyncio.ensure_future(lane.run(worker(clock, 4, turns, seen, "w"), essential=True))
            await asyncio.gather(*heavy, wake)
        order = [name for name, _ in seen][::2]
        # a runs its first slices before b and w wait; b holds the turn when w comes; then w's both slices come
        # before a and b take theirs again, though they waited longer
        assert order[:6] == list("aabwwa")

        def spends(n: int) -> None:
            work.charge(SCORED, n)
        await lane.run(spends, 7)
        await lane.run(spends, 3)
        assert lane.spent_max[SCORED] == 7
    asyncio.run(go())
