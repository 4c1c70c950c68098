"""Membership on a fake etcd and a fake clock: joins, lapsed leases, goodbyes, etcd going away."""
from __future__ import annotations

import asyncio

import pytest

from semreg.clock import FakeClock
from semreg.cluster.kv import MemoryKV, parse_endpoints
from semreg.cluster.membership import ALIVE, FAULTY, LEFT, SUSPECT, Membership


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def cluster(kv: MemoryKV, clock: FakeClock, names=("a", "b", "c")) -> dict[str, Membership]:
    nodes = {}
    for name in names:
        node = Membership(kv, "test", name, f"http://{name}:8080", clock, lease_ttl_s=9)
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
        await advance(kv, clock, 30)  # longer than a lease: every lease lapses while etcd is away
        kv.recover()
        await advance(kv, clock, 10)
        assert not any(n.degraded for n in nodes.values())
        assert all(statuses(n) == {"a": ALIVE, "b": ALIVE, "c": ALIVE} for n in nodes.values())
        assert len({n.view.checksum for n in nodes.values()}) == 1
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
