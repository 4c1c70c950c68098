"""Per-query change detection: who wakes, index movement, and the bounds on what is kept. Time is a
fake clock: a wait ends when the test moves it, and "nothing woke" is checked after every computation
the change started has finished, never after a delay."""
from __future__ import annotations

import asyncio

import pytest

from semreg.clock import FakeClock
from semreg.registry import watch
from semreg.registry.watch import WatchHub


class Source:
    """A query result the test changes by hand."""

    def __init__(self, value):
        self.value = value
        self.computed = 0

    async def compute(self):
        self.computed += 1
        return self.value, self.value


def hub_at(index: int) -> WatchHub:
    return WatchHub(FakeClock(), start_index=index)


async def topic(hub, key, src, relevant=lambda changes: True):
    return await hub.topic(key, src.compute, relevant, lambda payload: repr(payload).encode())


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 10))


def test_indexes_start_from_the_wall_clock_and_never_at_zero():
    assert WatchHub(FakeClock(wall=1_800_000_000.0)).index == 1_800_000_000_000_000
    assert WatchHub(FakeClock(), start_index=5).index == 5
    assert WatchHub(FakeClock(wall=0.0)).index == 1


def test_a_topic_index_moves_only_when_its_result_changes():
    async def go():
        hub = hub_at(10)
        a, b = Source("a1"), Source("b1")
        ta, tb = await topic(hub, "a", a), await topic(hub, "b", b)
        assert ta.index == tb.index == 10
        a.value = "a2"
        hub.changed(["x"], membership=True)
        assert (await topic(hub, "a", a)).index == 11 and (await topic(hub, "a", a)).body == b"'a2'"
        assert (await topic(hub, "b", b)).index == 10  # recomputed, unchanged: no move
        hub.changed(["y"], membership=False)  # a renewal: nothing recomputed
        computed = a.computed
        await topic(hub, "a", a)
        assert a.computed == computed
    run(go())


def test_only_relevant_changes_that_move_the_result_wake_waiters():
    async def go():
        hub = hub_at(1)
        a = Source("a1")
        ta = await hub.topic("a", a.compute, lambda changes: "a" in changes, lambda p: p.encode())
        waiter = asyncio.ensure_future(hub.wait(ta, ta.index, 5))
        await asyncio.sleep(0)
        computed = a.computed
        hub.changed(["b"], membership=True)  # not relevant to "a": not even recomputed
        await hub.settle()
        assert not waiter.done() and a.computed == computed
        hub.changed(["a"], membership=True)  # relevant, but the result is the same
        await hub.settle()
        assert not waiter.done() and a.computed == computed + 1
        a.value = "a2"
        hub.changed(["a"], membership=True)
        await waiter
        assert ta.index > 1 and hub.wakeups == 1
    run(go())


def test_a_wait_returns_at_once_for_an_older_index_and_ends_when_its_clock_says():
    async def go():
        clock = FakeClock()
        hub = WatchHub(clock, start_index=7)
        t = await topic(hub, "k", Source("v"))
        await hub.wait(t, 3, 60)  # an older index: at once
        waiter = asyncio.ensure_future(hub.wait(t, 7, 30))
        await asyncio.sleep(0)
        clock.advance(29.9)
        await asyncio.sleep(0)
        assert not waiter.done()
        clock.advance(0.1)
        await waiter
        assert not t.waiters and clock.pending == 0
    run(go())


def test_concurrent_reads_of_a_stale_topic_share_one_computation():
    async def go():
        hub = hub_at(1)
        gate = asyncio.Event()
        calls = 0

        async def slow():
            nonlocal calls
            calls += 1
            await gate.wait()
            return "v", "v"

        await hub.topic("k", Source("v").compute, lambda c: True, lambda p: p.encode())
        hub._topics["k"].compute = slow
        hub.changed(["x"], membership=True)
        readers = [asyncio.ensure_future(hub.topic("k", slow, lambda c: True, lambda p: p.encode())) for _ in range(5)]
        await asyncio.sleep(0)
        gate.set()
        assert {t.body for t in await asyncio.gather(*readers)} == {b"v"}
        assert calls == 1
    run(go())


def test_release_all_answers_every_waiter():
    async def go():
        hub = hub_at(1)
        ts = [await topic(hub, k, Source(k)) for k in "abc"]
        waiters = [asyncio.ensure_future(hub.wait(t, t.index, 60)) for t in ts]
        await asyncio.sleep(0)
        hub.release_all()
        await asyncio.gather(*waiters)
    run(go())


def test_bodies_are_bounded_and_idle_topics_go_first(monkeypatch):
    monkeypatch.setattr(watch, "MAX_BODY_BYTES", 100)

    async def go():
        hub = hub_at(1)
        for n in range(10):
            await topic(hub, n, Source("x" * 30))
        assert hub.body_bytes <= 100 and hub.topics <= 3
        assert list(hub._topics)[-1] == 9  # the most recent stays
    run(go())


def test_topics_with_waiters_are_never_evicted(monkeypatch):
    monkeypatch.setattr(watch, "MAX_IDLE_TOPICS", 2)

    async def go():
        hub = hub_at(1)
        held = await topic(hub, "held", Source("h"))
        waiter = asyncio.ensure_future(hub.wait(held, held.index, 60))
        await asyncio.sleep(0)
        for n in range(5):
            await topic(hub, n, Source(str(n)))
        assert "held" in hub._topics
        hub.release_all()
        await waiter
    run(go())


@pytest.mark.parametrize("n", [1, 100])
def test_watch_count(n):
    async def go():
        hub = hub_at(1)
        t = await topic(hub, "k", Source("v"))
        waiters = [asyncio.ensure_future(hub.wait(t, t.index, 60)) for _ in range(n)]
        await asyncio.sleep(0)
        assert hub.watches == n
        hub.release_all()
        await asyncio.gather(*waiters)
        assert hub.watches == 0
    run(go())


def test_the_watches_a_change_is_relevant_to_are_found_in_slices_after_it():
    """A change beside many watched topics: `changed` only notes it; the topics are looked at by a sweep, as
    essential work on the lane, a topic a slice (slice 0 here), with the loop turning between them."""
    from semreg.work.lane import Lane

    async def go():
        lane = Lane(slice_s=0.0)
        hub = WatchHub(FakeClock(), start_index=1, lane=lane)
        looked: list[str] = []
        sources = {k: Source(k) for k in map(str, range(20))}

        def relevant(key: str):
            def check(changes) -> bool:
                looked.append(key)
                return key in changes
            return check
        waiters = {}
        for k, src in sources.items():
            t = await hub.topic(k, src.compute, relevant(k), lambda p: p.encode())
            waiters[k] = asyncio.ensure_future(hub.wait(t, t.index, 60))
        await asyncio.sleep(0)
        sources["7"].value = "moved"
        hub.changed(["7"], membership=True)
        assert looked == []  # nothing looked at inside the change
        for _ in range(3):
            await asyncio.sleep(0)
        assert 0 < len(looked) < 20  # the loop turned while the sweep ran
        await hub.settle()
        assert sorted(looked, key=int) == list(sources)
        await waiters["7"]
        assert not any(w.done() for k, w in waiters.items() if k != "7")
        assert lane.jobs >= 1 and lane.refused == {}
    run(go())


def test_a_change_during_a_computation_is_followed_by_another_computation():
    """A watched topic's computation that started before a relevant change cannot reflect it: the sweep does
    not fold the change into it, and the waiter wakes once a computation after the change moves the result."""
    async def go():
        hub = hub_at(1)
        gate = asyncio.Event()
        value = {"v": "a"}
        calls = 0

        async def compute():
            nonlocal calls
            calls += 1
            seen = value["v"]  # what the computation reads before it waits
            await gate.wait()
            return seen, seen
        t = await hub.topic("k", Source("a").compute, lambda c: True, lambda p: p.encode())
        t.compute = compute
        waiter = asyncio.ensure_future(hub.wait(t, t.index, 60))
        hub.changed(["x"], membership=True)  # a first change: a computation starts, and waits
        for _ in range(3):
            await asyncio.sleep(0)
        assert calls == 1
        value["v"] = "b"
        hub.changed(["y"], membership=True)  # the result moves now, after the computation read it
        for _ in range(3):
            await asyncio.sleep(0)
        gate.set()
        await hub.settle()
        assert calls == 2 and waiter.done() and t.payload == "b"
    run(go())


def test_another_shape_of_an_answer_is_built_once_while_it_stands_and_dropped_with_its_body():
    async def go():
        hub = hub_at(10)
        src, built = Source("a1"), []

        def shape(payload):
            built.append(payload)
            return f"<{payload}>".encode()
        t = await topic(hub, "a", src)
        assert await hub.shaped(t, "angled", shape) == b"<a1>"
        assert await hub.shaped(await topic(hub, "a", src), "angled", shape) == b"<a1>"
        assert built == ["a1"] and hub.body_bytes == len(b"'a1'") + len(b"<a1>")
        hub.changed(["y"], membership=False)  # a renewal: the views may show it, so every shape goes
        assert await hub.shaped(await topic(hub, "a", src), "angled", shape) == b"<a1>"
        assert built == ["a1", "a1"]
        src.value = "a2"
        hub.changed(["x"], membership=True)
        assert await hub.shaped(await topic(hub, "a", src), "angled", shape) == b"<a2>"
        assert hub.body_bytes == len(b"'a2'") + len(b"<a2>")
    run(go())


def test_the_shapes_of_one_answer_are_bounded():
    async def go():
        hub = hub_at(10)
        t = await topic(hub, "a", Source("a1"))
        for k in range(watch.MAX_SHAPES + 5):
            await hub.shaped(t, k, lambda payload, k=k: b"x" * k)
        assert list(t.shapes) == list(range(5, watch.MAX_SHAPES + 5))
        assert hub.body_bytes == len(b"'a1'") + sum(range(5, watch.MAX_SHAPES + 5))
    run(go())
