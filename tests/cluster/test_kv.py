"""`EtcdKV` over a client that fails as etcd's does (`support.fakeetcd`), on the fake clock: a call cancelled
under its task, a close or a watch cancel that never returns, a watch whose client was retired. And against a
real etcd, the words it answers a write on a lapsed lease with, which the fake only copies."""
from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from collections.abc import Awaitable
from typing import Any

import pytest
from support.fakeetcd import FakeEtcd

from semreg.clock import FakeClock
from semreg.cluster.kv import LEASE_GONE, PUT, EtcdKV, KVUnavailable, LeaseGone, MemoryKV


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def drive(clock: FakeClock, aw: Awaitable[Any], step: float = 0.05, limit_s: float = 60.0) -> Any:
    """`aw`'s result, moving the clock in steps until it has one (at most `limit_s` of fake time)."""
    task = asyncio.ensure_future(aw)
    moved = 0.0
    await settle()
    while not task.done():
        assert moved < limit_s, "still waiting after a minute on the clock"
        clock.advance(step)
        moved += step
        await settle()
    return task.result()


def world() -> tuple[FakeClock, MemoryKV, FakeEtcd, EtcdKV]:
    clock = FakeClock()
    memory = MemoryKV(clock)
    etcd = FakeEtcd(memory, clock)
    return clock, memory, etcd, EtcdKV([("etcd", 2379)], timeout_s=2.0, clock=clock, client=etcd.client)


def run(coro: Awaitable[Any]) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(coro, 10)
    return asyncio.run(bounded())


def test_a_call_cancelled_under_its_task_is_a_failed_call_and_the_task_goes_on():
    """gRPC cancels the calls of a channel another task closed: the task awaiting one sees CancelledError
    though nobody cancelled it. It must be a failed call, not the end of (say) the keep-alive loop."""
    async def go():
        clock, _, etcd, kv = world()
        lease = await drive(clock, kv.grant(9))
        keeping = asyncio.ensure_future(kv.keepalive(lease))
        await settle()
        assert etcd.in_flight("refresh_lease") == 1
        await etcd.clients[0].close()  # another task's call failed, and its client was closed
        with pytest.raises(KVUnavailable):
            await keeping
        assert etcd.cancelled_calls == 1
        assert await drive(clock, kv.keepalive(lease)) is True  # on a client of its own
        assert len(etcd.clients) == 2
    run(go())


def test_a_write_on_a_lapsed_lease_is_said_at_once_and_keeps_the_connection():
    """etcd's "requested lease not found" is an answer: raised as LeaseGone on the first try, with the client
    kept, unlike an endpoint that does not answer."""
    async def go():
        clock, memory, etcd, kv = world()
        lease = await drive(clock, kv.grant(9))
        await drive(clock, kv.revoke(lease))
        with pytest.raises(LeaseGone):
            await drive(clock, kv.put("/k", b"v", lease=lease))
        assert len(etcd.clients) == 1 and not etcd.clients[0].closed
        assert "/k" not in memory.data
    run(go())


def test_a_close_that_never_returns_holds_up_no_call(caplog):
    async def go():
        clock, memory, etcd, kv = world()
        lease = await drive(clock, kv.grant(9))
        etcd.close_hangs = True
        memory.fail()
        with pytest.raises(KVUnavailable):
            await drive(clock, kv.keepalive(lease), limit_s=1.0)  # failed at once, not after the close
        memory.recover()
        assert await drive(clock, kv.keepalive(lease), limit_s=1.0) is True
        first = etcd.clients[0]
        assert first.close_started and not first.close_cancelled
        await settle()
        clock.advance(2.0)  # the close's time is up
        await settle()
        assert first.close_cancelled
        assert any(r.getMessage() == "an etcd client did not close; left behind" for r in caplog.records)
    with caplog.at_level(logging.WARNING, logger="semreg.kv"):
        run(go())


def test_a_watch_whose_client_is_retired_ends_even_if_the_client_never_says_so():
    async def go():
        clock, memory, etcd, kv = world()
        seen = []

        async def watch() -> None:
            async for event in kv.watch_prefix("/k/", 1):
                seen.append(event)

        watching = asyncio.ensure_future(watch())
        await settle()
        clock.advance(0.2)
        await settle()
        await memory.put("/k/a", b"1")
        await settle()
        assert [(e.kind, e.key) for e in seen] == [(PUT, "/k/a")]
        etcd.close_hangs = True  # the close never reaches the watch
        memory.fail()  # the next call fails: its client is retired
        with pytest.raises(KVUnavailable):
            await drive(clock, kv.get_prefix("/k/"), limit_s=1.0)
        with pytest.raises(KVUnavailable):
            await drive(clock, watching, limit_s=1.0)
    run(go())


def test_a_watch_cancel_that_never_returns_lets_the_watcher_stop():
    async def go():
        clock, _, etcd, kv = world()

        async def watch() -> None:
            async for _ in kv.watch_prefix("/k/", 1):
                pass

        watching = asyncio.ensure_future(watch())
        await settle()
        clock.advance(0.2)
        await settle()
        etcd.cancel_hangs = True
        watching.cancel()
        await settle()
        assert not watching.done()  # in the watch's cancel, which does not return
        clock.advance(2.0)
        await settle()
        assert watching.cancelled()
    run(go())


LAPSE = """
import asyncio, json, sys, time
from semreg.clock import LoopClock
from semreg.cluster.kv import EtcdKV, KVUnavailable, LeaseGone

async def main():
    kv = EtcdKV([("127.0.0.1", int(sys.argv[1]))], timeout_s=3, clock=LoopClock())
    try:
        for _ in range(60):
            try:
                lease = await kv.grant(1)
                break
            except KVUnavailable:
                await asyncio.sleep(0.5)  # etcd still starting
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # a write on the lease, until etcd says it lapsed
            try:
                await kv.put("/lapse/k", b"v", lease=lease)
            except LeaseGone as exc:
                return {"raised": "LeaseGone", "etcd_said": str(exc.__cause__), "kept": kv._connection is not None,
                        "keepalive": await kv.keepalive(lease), "left": (await kv.get_prefix("/lapse/"))[1]}
            except KVUnavailable as exc:
                return {"raised": type(exc).__name__, "etcd_said": str(exc.__cause__)}
            await asyncio.sleep(0.1)
        return {"raised": None}
    finally:
        await kv.close()

print(json.dumps(asyncio.run(main())))
"""


@pytest.mark.process
def test_a_lease_that_lapsed_in_a_real_etcd_is_recognised_by_its_words(etcd_factory):
    """A lease of one second left to lapse in a real etcd: the next write on it is refused in etcd's words, which
    `EtcdKV` recognises (`LEASE_GONE`), raising LeaseGone with its connection kept; a keep-alive of it says it
    lapsed, and its key went with it. In a process of its own (gRPC's poller thread outlives its event loop)."""
    _, port = etcd_factory("http")
    out = subprocess.run([sys.executable, "-c", LAPSE, str(port)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["raised"] == "LeaseGone", found
    assert LEASE_GONE in found["etcd_said"] and found["kept"] is True, found
    assert found["keepalive"] is False and found["left"] == [], found
