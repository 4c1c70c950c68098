"""Per-query change detection: who wakes, index movement, and the bounds on what is kept."""
from __future__ import annotations

import asyncio

import pytest

from semreg import watch
from semreg.watch import WatchHub


class Source:
    """A query result the test changes by hand."""

    def __init__(self, value):
        self.value = value
        self.computed = 0

    def compute(self):
        self.computed += 1
        return self.value, self.value


def topic(hub, key, src, relevant=lambda changes: True):
    return hub.topic(key, src.compute, relevant, lambda payload: repr(payload).encode())


def test_indexes_start_from_the_clock_and_never_at_zero():
    hub = WatchHub()
    assert hub.index > 1_000_000_000_000_000
    assert WatchHub(start_index=5).index == 5


def test_a_topic_index_moves_only_when_its_result_changes():
    hub = WatchHub(start_index=10)
    a, b = Source("a1"), Source("b1")
    ta, tb = topic(hub, "a", a), topic(hub, "b", b)
    assert ta.index == tb.index == 10
    a.value = "a2"
    hub.changed(["x"], membership=True)
    assert topic(hub, "a", a).index == 11 and topic(hub, "a", a).body == b"'a2'"
    assert topic(hub, "b", b).index == 10  # recomputed, unchanged: no move
    hub.changed(["y"], membership=False)  # a renewal: nothing recomputed
    computed = a.computed
    topic(hub, "a", a)
    assert a.computed == computed


def test_only_relevant_changes_wake_waiters():
    async def go():
        hub = WatchHub(start_index=1)
        a = Source("a1")
        ta = hub.topic("a", a.compute, lambda changes: "a" in changes, lambda p: p.encode())
        waiter = asyncio.ensure_future(hub.wait(ta, ta.index, 5))
        await asyncio.sleep(0)
        hub.changed(["b"], membership=True)  # not relevant to "a"
        await asyncio.sleep(0.01)
        assert not waiter.done()
        hub.changed(["a"], membership=True)  # relevant, but the result is the same
        await asyncio.sleep(0.01)
        assert not waiter.done()
        a.value = "a2"
        hub.changed(["a"], membership=True)
        await asyncio.wait_for(waiter, 1)
        assert ta.index > 1 and hub.wakeups == 1

    asyncio.run(go())


def test_wait_returns_at_once_for_an_older_index_and_times_out_otherwise():
    async def go():
        hub = WatchHub(start_index=7)
        t = topic(hub, "k", Source("v"))
        await asyncio.wait_for(hub.wait(t, 3, 60), 1)
        started = asyncio.get_running_loop().time()
        await hub.wait(t, 7, 0.05)
        assert asyncio.get_running_loop().time() - started >= 0.04
        assert not t.waiters

    asyncio.run(go())


def test_release_all_answers_every_waiter():
    async def go():
        hub = WatchHub(start_index=1)
        ts = [topic(hub, k, Source(k)) for k in "abc"]
        waiters = [asyncio.ensure_future(hub.wait(t, t.index, 60)) for t in ts]
        await asyncio.sleep(0)
        hub.release_all()
        await asyncio.wait_for(asyncio.gather(*waiters), 1)

    asyncio.run(go())


def test_bodies_are_bounded_and_idle_topics_go_first(monkeypatch):
    monkeypatch.setattr(watch, "MAX_BODY_BYTES", 100)
    hub = WatchHub(start_index=1)
    for n in range(10):
        topic(hub, n, Source("x" * 30))
    assert hub.body_bytes <= 100 and hub.topics <= 3
    assert list(hub._topics)[-1] == 9  # the most recent stays


def test_topics_with_waiters_are_never_evicted(monkeypatch):
    monkeypatch.setattr(watch, "MAX_IDLE_TOPICS", 2)

    async def go():
        hub = WatchHub(start_index=1)
        held = topic(hub, "held", Source("h"))
        waiter = asyncio.ensure_future(hub.wait(held, held.index, 60))
        await asyncio.sleep(0)
        for n in range(5):
            topic(hub, n, Source(str(n)))
        assert "held" in hub._topics
        hub.release_all()
        await waiter

    asyncio.run(go())


@pytest.mark.parametrize("n", [1, 100])
def test_watch_count(n):
    async def go():
        hub = WatchHub(start_index=1)
        t = topic(hub, "k", Source("v"))
        waiters = [asyncio.ensure_future(hub.wait(t, t.index, 60)) for _ in range(n)]
        await asyncio.sleep(0)
        assert hub.watches == n
        hub.release_all()
        await asyncio.gather(*waiters)
        assert hub.watches == 0

    asyncio.run(go())
