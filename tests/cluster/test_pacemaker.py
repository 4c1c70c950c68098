"""The membership lease refreshed from a thread of its own (`semreg.cluster.pacemaker`): a member whose event
loop is held up keeps its place on the ring, one whose loop stopped for good still leaves it; and the
pacemaker keeps only the lease the membership holds now."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading

import pytest
from support.faultykv import FaultyKV

from semreg.bench.localcluster import LocalCluster
from semreg.clock import FakeClock
from semreg.cluster.kv import MemoryKV
from semreg.cluster.membership import ALIVE, FAULTY, Membership
from semreg.cluster.pacemaker import Pacemaker

TTL = 9


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def refresher(kv: MemoryKV, clock: FakeClock):
    """What the pacemaker's own etcd client does from its thread: etcd gives a held lease its time again."""
    def refresh(lease: int) -> bool:
        if lease not in kv.leases:
            return False
        kv.leases[lease] = (clock.monotonic() + TTL, TTL)
        return True
    return refresh


def test_a_member_whose_keep_alive_is_held_up_stays_then_leaves_once_its_loop_is_gone_past_the_grace():
    async def go():
        clock = FakeClock()
        kv = MemoryKV(clock)
        b_kv = FaultyKV(kv)
        pacemaker = Pacemaker(refresher(kv, clock), TTL, monotonic=clock.monotonic)
        pacemaker.start = lambda: None  # type: ignore[method-assign]  # its rounds are run here, on the clock
        a = Membership(kv, "test", "a", "http://a:8080", clock, lease_ttl_s=TTL)
        b = Membership(b_kv, "test", "b", "http://b:8080", clock, lease_ttl_s=TTL, pacemaker=pacemaker)
        await a.start()
        await b.start()
        await settle()
        assert pacemaker.lease == b.lease is not None
        b_kv.hold("keepalive")  # b's loop keep-alive waits from its next round on, as on a busy loop

        async def run(seconds: int) -> None:
            for second in range(seconds):
                clock.advance(1)
                kv.tick()
                if second % 3 == 2:
                    pacemaker.beat()
                await settle()

        await run(24)  # past two leases: the pacemaker kept it
        assert {m.id: m.status for m in a.view.members.values()} == {"a": ALIVE, "b": ALIVE}
        assert pacemaker.beats >= 7
        await run(3 * TTL + TTL)  # the loop not seen for three leases: the pacemaker stops, and the lease lapses
        assert a.view.members["b"].status == FAULTY and a.view.ring.members == ("a",)
        b_kv.release("keepalive")
        await a.stop()
        await b.stop()
    asyncio.run(asyncio.wait_for(go(), 10))


def test_the_pacemaker_refreshes_only_the_lease_held_now():
    now = [0.0]
    asked: list[int] = []
    answers = {7: True, 8: False}

    def refresh(lease: int) -> bool:
        asked.append(lease)
        return answers[lease]

    pacemaker = Pacemaker(refresh, TTL, monotonic=lambda: now[0])
    assert not pacemaker.beat() and asked == []  # not a member yet
    pacemaker.hold(7)
    assert pacemaker.beat() and asked == [7] and pacemaker.lease == 7
    pacemaker.hold(8)
    assert not pacemaker.beat() and pacemaker.lease is None  # etcd says it lapsed: let go
    pacemaker.hold(7)
    now[0] = 3 * TTL + 1  # the event loop not seen since
    assert not pacemaker.beat() and asked == [7, 8]
    pacemaker.loop_alive()
    assert pacemaker.beat() and asked == [7, 8, 7]


def test_a_refresh_that_fails_keeps_the_lease_for_the_next_round():
    calls = []

    def refresh(lease: int) -> bool:
        calls.append(lease)
        if len(calls) == 1:
            raise OSError("etcd cannot be reached")
        return True

    pacemaker = Pacemaker(refresh, TTL)
    pacemaker.hold(5)
    assert not pacemaker.beat() and pacemaker.lease == 5 and pacemaker.beats == 0
    assert pacemaker.beat() and pacemaker.beats == 1


def test_the_pacemakers_thread_beats_on_its_own_and_ends_when_stopped():
    twice = threading.Event()
    seen: list[int] = []

    def refresh(lease: int) -> bool:
        seen.append(lease)
        if len(seen) >= 2:
            twice.set()
        return True

    closed = threading.Event()
    pacemaker = Pacemaker(refresh, 0.03, grace_s=3600, close=closed.set)
    pacemaker.hold(3)
    pacemaker.start()
    assert twice.wait(10)
    pacemaker.stop()
    assert closed.is_set() and pacemaker.lease is None and set(seen) == {3}


KEPT = """
import asyncio, json, sys, time
from semreg.clock import LoopClock
from semreg.cluster import pacemaker as pacemakers
from semreg.cluster.etcd_access import client_factory, read_access
from semreg.cluster.kv import EtcdKV

endpoints = [("127.0.0.1", int(sys.argv[1]))]
client = client_factory(read_access(None, None, None, "", None))

async def on_etcd(call):
    kv = EtcdKV(endpoints, timeout_s=5, clock=LoopClock(), client=client)
    try:
        return await call(kv)
    finally:
        await kv.close()

lease = asyncio.run(on_etcd(lambda kv: kv.grant(2)))
began = time.monotonic()
pacemaker = pacemakers.for_etcd(endpoints, client, 2)
pacemaker.hold(lease)
pacemaker.start()
while time.monotonic() - began < 60 and not (pacemaker.beats >= 4 and time.monotonic() - began > 2.5):
    pacemaker.loop_alive()
    time.sleep(0.05)
pacemaker.stop()
held_for = time.monotonic() - began
pacemaker.hold(lease)
pacemaker.start()  # a membership stopped and started again: a new loop and client
again = pacemaker.beats
while time.monotonic() - began < 90 and pacemaker.beats == again:
    pacemaker.loop_alive()
    time.sleep(0.05)
pacemaker.stop()
print(json.dumps({"beats": pacemaker.beats, "again": pacemaker.beats > again, "held_for_s": held_for,
                  "alive": asyncio.run(on_etcd(lambda kv: kv.keepalive(lease)))}))
"""


@pytest.mark.process
def test_a_pacemaker_keeps_a_lease_of_a_real_etcd_alive_past_its_time(tmp_path):
    """Its own event loop and etcd client, in its thread (of a process of its own: gRPC's poller thread stays
    for the process's life): a 2 s lease refreshed by nothing else is still held after more than 2 s."""
    cluster = LocalCluster(tmp_path / "ring")
    cluster.start(0)  # etcd alone
    try:
        port = cluster.etcd.url.rsplit(":", 1)[1]
        out = subprocess.run([sys.executable, "-c", KEPT, port], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        kept = json.loads(out.stdout.strip().splitlines()[-1])
        assert kept["beats"] >= 4 and kept["held_for_s"] > 2.5 and kept["alive"] is True and kept["again"] is True
    finally:
        cluster.close()
