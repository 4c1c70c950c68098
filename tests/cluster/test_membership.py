"""Membership on a fake etcd and a fake clock: joins, lapsed leases, goodbyes, etcd going away, and
recovering from whatever etcd (or its client) does: outages back to back, calls cancelled under the loops,
unexpected errors, watches that end or go quiet, a lease lost while the node was cut off."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from support.fakeetcd import FakeEtcd
from support.faultykv import FaultyKV

from semreg.clock import FakeClock
from semreg.cluster.kv import KV, EtcdKV, MemoryKV, parse_endpoints
from semreg.cluster.membership import ALIVE, FAULTY, LEFT, RESYNC_S, SUSPECT, Membership


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def cluster(kv: MemoryKV, clock: FakeClock, names=("a", "b", "c"), kvs: dict[str, KV] | None = None,
                  **kw: Any) -> dict[str, Membership]:
    nodes = {}
    for name in names:
        node = Membership((kvs or {}).get(name, kv), "test", name, f"http://{name}:8080", clock, lease_ttl_s=9, **kw)
        await node.start()
        nodes[name] = node
    await settle()
    return nodes


async def advance(kv: MemoryKV, clock: FakeClock, seconds: float, step: float = 1.0) -> None:
    moved = 0.0
    while moved < seconds:
        clock.advance(min(step, seconds - moved))
        moved += step
        kv.tick()
        await settle()


def statuses(node: Membership) -> dict[str, str]:
    return {m.id: m.status for m in node.view.members.values()}


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 10))


def test_every_node_sees_the_same_members_ring_and_checksum():
    async def go():
        clock = FakeClock()
        kv = MemoryKV(clock)
        nodes = await cluster(kv, clock)
        views = [n.view for n in nodes.values()]
        assert all(statuses(n) == {"a": ALIVE, "b": ALIVE, "c": ALIVE} for n in nodes.values())
        assert len({v.checksum for v in views}) == 1 and len({v.revision for v in views}) == 1
        assert views[0].ring.members == ("a", "b", "c") and views[0].address("b") == "http://b:8080"
        await advance(kv, clock, 60)  # leases kept alive
        assert all(statuses(n) == {"a": ALIVE, "b": ALIVE, "c": ALIVE} for n in nodes.values())
        for n in nodes.values():
            await n.stop()
    run(go())


def test_a_lapsed_lease_makes_a_member_faulty_and_a_goodbye_makes_it_left():
    async def go():
        clock = FakeClock()
        kv = MemoryKV(clock)
        nodes = await cluster(kv, clock)
        await nodes["b"].stop()  # b freezes: no more keepalives
        await advance(kv, clock, 8)
        assert statuses(nodes["a"])["b"] == ALIVE
        await advance(kv, clock, 2)
        assert statuses(nodes["a"])["b"] == FAULTY and nodes["a"].view.ring.members == ("a", "c")
        assert nodes["a"].view.checksum == nodes["c"].view.checksum
        await nodes["c"].leave()
        await settle()
        assert statuses(nodes["a"]) == {"a": ALIVE, "b": FAULTY, "c": LEFT}
        assert nodes["a"].view.ring.members == ("a",)
        await advance(kv, clock, 400)  # gone members are forgotten after a while
        assert statuses(nodes["a"]) == {"a": ALIVE}
        await nodes["a"].stop()
    run(go())


def test_a_goodbye_after_the_lease_lapsed_still_makes_the_member_left():
    """A keep-alive held up past the lease on a loaded machine, then a clean stop: the peers first list the
    member failed, then, once it says goodbye on a lease of its own, left."""
    async def go():
        clock = FakeClock()
        kv = MemoryKV(clock)
        nodes = await cluster(kv, clock, ("a", "b"))
        await nodes["b"].stop()  # its keep-alive held up
        await advance(kv, clock, 12)
        assert statuses(nodes["a"])["b"] == FAULTY
        await nodes["b"].leave()
        await settle()
        assert statuses(nodes["a"]) == {"a": ALIVE, "b": LEFT} and nodes["a"].view.ring.members == ("a",)
        assert not [key for key in kv.data if key.endswith("/b")] and len(kv.leases) == 1  # only a's
        await nodes["a"].stop()
    run(go())


def test_a_frozen_node_rejoins_when_it_thaws():
    async def go():
        clock = FakeClock()
        kv = MemoryKV(clock)
        nodes = await cluster(kv, clock, ("a", "b"))
        b = nodes["b"]
        await b.stop()
        await advance(kv, clock, 12)
        assert statuses(nodes["a"])["b"] == FAULTY
        await b.start()  # SIGCONT: its old lease is gone; it joins again
        await settle()
        assert statuses(nodes["a"]) == {"a": ALIVE, "b": ALIVE} and nodes["a"].view.ring.members == ("a", "b")
        for n in nodes.values():
            await n.stop()
    run(go())


def test_suspicion_is_local_and_leaves_the_ring_alone():
    async def go():
        clock = FakeClock()
        kv = MemoryKV(clock)
        nodes = await cluster(kv, clock)
        checksum = nodes["a"].view.checksum
        nodes["a"].suspect("b")
        assert statuses(nodes["a"])["b"] == SUSPECT and statuses(nodes["c"])["b"] == ALIVE
        assert nodes["a"].view.checksum == checksum and "b" in nodes["a"].view.ring.members
        nodes["a"].unsuspect("b")
        assert statuses(nodes["a"])["b"] == ALIVE
        for n in nodes.values():
            await n.stop()
    run(go())


def test_when_etcd_goes_away_the_last_ring_stays_and_membership_resumes_after():
    async def go():
        clock = FakeClock()
        kv = MemoryKV(clock)
        nodes = await cluster(kv, clock)
        checksum = nodes["a"].view.checksum
        kv.fail()
        await advance(kv, clock, 5)
        assert all(n.degraded for n in nodes.values())
        assert nodes["a"].view.checksum == checksum and statuses(nodes["a"])["b"] == ALIVE
        await advance(kv, clock, 30)  # longer than a lease: etcd gives every lease its time again when back
        assert all(n.writable for n in nodes.values())  # nobody's ring moved: writes go on
        kv.recover()
        await advance(kv, clock, 10)
        assert not any(n.degraded for n in nodes.values())
        assert all(statuses(n) == {"a": ALIVE, "b": ALIVE, "c": ALIVE} for n in nodes.values())
        assert len({n.view.checksum for n in nodes.values()}) == 1
        assert all(n.writable and n.trouble == "" for n in nodes.values())
        for n in nodes.values():
            await n.stop()
    run(go())


async def until(kv: MemoryKV, clock: FakeClock, done: Any, step: float = 0.05, limit_s: float = 30.0) -> None:
    """Move the clock in small steps until `done()`."""
    moved = 0.0
    while not done():
        assert moved < limit_s, "not within half a minute on the clock"
        await advance(kv, clock, step, step)
        moved += step


def test_back_to_back_outages_with_calls_cancelled_under_the_loops_leave_every_node_on_the_ring():
    """The chaos run's wedge: etcd stopped twice close together. Node a's watch broke, its etcd client was
    closed, and gRPC cancelled the keep-alive's call in flight on that client: the keep-alive loop saw a
    CancelledError nobody asked for and ended, silently. a must keep its lease and its watch through it."""
    async def go():
        clock = FakeClock()
        kv = MemoryKV(clock)
        etcd = FakeEtcd(kv, clock)
        a_kv = EtcdKV([("etcd", 2379)], timeout_s=2.0, clock=clock, client=etcd.client)
        nodes = {name: Membership(a_kv if name == "a" else kv, "test", name, f"http://{name}:8080", clock,
                                  lease_ttl_s=9) for name in ("a", "b", "c")}
        for node in nodes.values():
            starting = asyncio.ensure_future(node.start())
            await until(kv, clock, starting.done)
            starting.result()
        for _ in range(2):  # two outages of 5 s, a second apart
            await until(kv, clock, lambda: etcd.in_flight("refresh_lease") > 0)
            kv.fail()  # the watch stream breaks; its client is closed under the keep-alive's call
            await advance(kv, clock, 5, 0.05)
            kv.recover()
            await advance(kv, clock, 1, 0.05)
        assert etcd.cancelled_calls >= 2
        await advance(kv, clock, 30, 0.1)  # three leases' time
        a = nodes["a"]
        assert not a.degraded and a.writable and a.trouble == ""
        assert all(statuses(n) == {"a": ALIVE, "b": ALIVE, "c": ALIVE} for n in nodes.values())
        await nodes["b"].leave()
        await advance(kv, clock, 1, 0.05)
        assert statuses(a)["b"] == LEFT and a.view.ring.members == ("a", "c")  # a's watch still follows
        for n in nodes.values():
            await n.stop()
        await a_kv.close()
    run(go())


def errors(caplog: Any, says: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.ERROR and says in r.getMessage()]


def test_a_keep_alive_that_raises_something_unexpected_is_logged_reported_and_started_again(caplog):
    async def go():
        clock = FakeClock()
        kv = MemoryKV(clock)
        faulty = FaultyKV(kv)
        nodes = await cluster(kv, clock, kvs={"a": faulty})
        a = nodes["a"]
        faulty.raises["keepalive"] = RuntimeError("an aetcd internal went wrong")
        await advance(kv, clock, 3)
        assert a.trouble == ("its membership lease's keep-alive failed (RuntimeError: an aetcd internal went "
                             "wrong); starting it again")
        [record] = errors(caplog, "membership lease's keep-alive failed; starting it again")
        assert record.exc_info is not None and record.node == "a"
        await advance(kv, clock, 4)  # started again after half a second, then a good round
        assert a.trouble == "" and a.restarts == 1
        await advance(kv, clock, 30)
        assert all(statuses(n) == {"a": ALIVE, "b": ALIVE, "c": ALIVE} for n in nodes.values())
        for n in nodes.values():
            await n.stop()
    with caplog.at_level(logging.INFO):
        run(go())


class Compacted(Exception):
    """What etcd's client raises for a watch from a revision compacted away."""


def test_a_watch_that_ends_with_a_compaction_error_is_started_again_and_follows_the_list(caplog):
    async def go():
        clock = FakeClock()
        kv = MemoryKV(clock)
        faulty = FaultyKV(kv)
        nodes = await cluster(kv, clock, kvs={"a": faulty})
        a = nodes["a"]
        faulty.end_watches(Compacted("revision was already compacted below 7"))
        await settle()
        assert "member list's watch failed (Compacted: revision was already compacted below 7)" in a.trouble
        assert errors(caplog, "member list's watch failed; starting it again")
        await advance(kv, clock, 1)
        assert a.trouble == ""
        await nodes["b"].leave()
        await settle()
        assert statuses(a)["b"] == LEFT
        for n in nodes.values():
            await n.stop()
    with caplog.at_level(logging.INFO):
        run(go())


def test_a_watch_gone_quiet_is_caught_up_when_asked_and_at_every_resync():
    async def go():
        clock = FakeClock()
        kv = MemoryKV(clock)
        faulty = FaultyKV(kv)
        nodes = await cluster(kv, clock, kvs={"a": faulty})
        a = nodes["a"]
        faulty.mute_watches()  # its stream delivers nothing, and no error either
        await nodes["b"].leave()
        await settle()
        assert "b" in a.view.ring.members
        a.refresh()  # a peer said a's ring is stale
        await settle()
        assert a.view.ring.members == ("a", "c")
        await nodes["c"].leave()
        await advance(kv, clock, RESYNC_S)
        assert a.view.ring.members == ("a",)
        await a.stop()
    run(go())


def test_a_node_cut_off_past_its_lease_is_fenced_from_when_it_knows_until_it_rejoined_and_read_the_list(caplog):
    async def go():
        clock = FakeClock()
        kv = MemoryKV(clock)
        faulty = FaultyKV(kv)
        repairs: list[bool] = []
        repaired = asyncio.Event()

        async def before_rejoin() -> None:
            repairs.append(nodes["a"].writable)
            if len(repairs) == 1:
                raise RuntimeError("a peer's answer made no sense")
            await repaired.wait()

        nodes = await cluster(kv, clock, kvs={"a": faulty}, before_rejoin=before_rejoin)
        a, b = nodes["a"], nodes["b"]
        faulty.cut()
        await advance(kv, clock, 12)  # past its lease: the others see it fail
        assert statuses(b)["a"] == FAULTY and b.view.ring.members == ("b", "c")
        assert a.degraded and a.writable and "a" in a.view.ring.members  # a cannot know it yet
        faulty.mend()
        await advance(kv, clock, 3)  # etcd answers a again: its lease is gone
        assert not a.writable and a.trouble.startswith("its membership lease lapsed: rejoining the ring")
        assert errors(caplog, "keep-alive failed; starting it again")  # the first repair failed
        await advance(kv, clock, 4)  # started again: the repair runs again
        assert repairs == [False, False] and not a.writable
        assert statuses(b)["a"] == FAULTY  # no key of a's before the repair is done
        repaired.set()
        await settle()
        assert a.writable and a.trouble == "" and statuses(b)["a"] == ALIVE
        assert a.view.ring.members == b.view.ring.members == ("a", "b", "c")
        for n in nodes.values():
            await n.stop()
    with caplog.at_level(logging.INFO):
        run(go())


def test_a_node_whose_key_went_without_a_goodbye_joins_again_though_its_lease_lives():
    async def go():
        clock = FakeClock()
        kv = MemoryKV(clock)
        nodes = await cluster(kv, clock)
        a = nodes["a"]
        await kv.delete(a.prefix + "a")
        await settle()
        assert not a.writable and statuses(nodes["b"])["a"] == FAULTY
        await advance(kv, clock, 3)
        assert a.writable and all(statuses(n)["a"] == ALIVE for n in nodes.values())
        for n in nodes.values():
            await n.stop()
    run(go())


@pytest.mark.parametrize("urls, expected", [
    ("http://127.0.0.1:2379", [("127.0.0.1", 2379)]),
    ("127.0.0.1:2379, http://[::1]:22379/", [("127.0.0.1", 2379), ("::1", 22379)]),
])
def test_etcd_endpoints(urls, expected):
    assert parse_endpoints(urls) == expected


@pytest.mark.parametrize("urls", ["", "http://host", "host:port"])
def test_bad_etcd_endpoints(urls):
    with pytest.raises(ValueError):
        parse_endpoints(urls)
