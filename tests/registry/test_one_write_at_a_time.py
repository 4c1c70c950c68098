"""One instance's record is written by one write at a time: an admin status and a registration of the same instance
that meet (the first one's record still on its way to the store) end as the newest registration with the status, at
a revision newer than both, in memory and in the store alike, and the instance's revision never goes back.

Real shard on an in-memory pyoxigraph store, fake clock. The store's writes run at once, except one held open until
the test lets it land, after whatever else was written meanwhile (the worst order a writer could give them)."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from semreg.clock import FakeClock
from semreg.registry.instances import Registration
from semreg.registry.local_shard import LocalShard
from semreg.registry.registry import Change
from semreg.storage.store import Store


class HeldWrites:
    """The shard's `write`: each store operation at once, but the next record write asked to be held waits until
    `release()` (`held` is set once it waits)."""

    def __init__(self) -> None:
        self.gate: asyncio.Event | None = None
        self.held = asyncio.Event()

    def hold_next(self) -> None:
        self.gate = asyncio.Event()

    def release(self) -> None:
        assert self.gate is not None
        self.gate.set()

    async def write(self, fn: Any, *args: Any) -> Any:
        gate = self.gate
        if gate is not None and not gate.is_set() and fn.__name__ == "save_records" and not self.held.is_set():
            self.held.set()
            await gate.wait()
        return fn(*args)


def reg(port: int) -> Registration:
    return Registration(id="a", service="svc", address="10.0.0.1", port=port, ttl_s=0.0)


async def setting_up() -> tuple[LocalShard, HeldWrites, list[int]]:
    writes = HeldWrites()
    shard = LocalShard(FakeClock(), Store(None), writes.write, lambda fn, *args: fn(*args), node_id="n1")
    revisions: list[int] = []

    def seen(changes: list[Change]) -> None:
        revisions.extend(c.revision for c in changes if c.id == "a")
    shard.subscribe(seen)
    await shard.put_records([(reg(80), shard.revisions.next())])
    return shard, writes, revisions


async def turns(n: int = 20) -> None:
    """Let the loop run what is ready (the other write, as far as it goes)."""
    for _ in range(n):
        await asyncio.sleep(0)


def assert_newest_registration_drained(shard: LocalShard, revisions: list[int], newer_than: int) -> None:
    inst = shard.registry.get("a")
    assert (inst.reg.port, inst.admin_status) == (81, "draining")
    assert inst.revision > newer_than
    assert revisions == sorted(revisions) and revisions[-1] == inst.revision  # never back
    stored = shard.store.read_record("a")
    assert stored is not None
    rec, revision = stored
    assert (rec["port"], rec.get("admin_status"), revision) == (81, "draining", inst.revision)
    assert shard.store.load_records() == [(rec, revision)]  # as the next start-up finds it: that record alone


def test_a_registration_while_a_drain_is_being_written_keeps_the_drain_and_goes_after_it() -> None:
    async def scenario() -> None:
        shard, writes, revisions = await setting_up()
        drain_at = shard.revisions.next()
        registered_at = shard.revisions.next()
        writes.hold_next()
        drain = asyncio.ensure_future(shard.set_status("a", "draining", None, drain_at))
        await writes.held.wait()  # the drain's record on its way
        registration = asyncio.ensure_future(shard.put_records([(reg(81), registered_at)]))
        await turns()
        writes.release()
        await drain
        [(stored, created)] = await registration
        assert not created and stored is not None and stored.revision == registered_at
        assert_newest_registration_drained(shard, revisions, drain_at)
    asyncio.run(scenario())


@pytest.mark.parametrize("dated", ["before", "after"])
def test_a_drain_while_a_registration_is_being_written_is_kept_in_the_store_too(dated: str) -> None:
    """The drain's coordinator dated it before the registration's (it goes just after the registration), or after."""
    async def scenario() -> None:
        shard, writes, revisions = await setting_up()
        drain_at = shard.revisions.next()
        registered_at = shard.revisions.next()
        if dated == "after":
            drain_at = shard.revisions.next()
        writes.hold_next()
        registration = asyncio.ensure_future(shard.put_records([(reg(81), registered_at)]))
        await writes.held.wait()  # the registration's record (not drained) on its way
        drain = asyncio.ensure_future(shard.heartbeat("a", None, "draining", drain_at))
        await turns()
        writes.release()
        await registration
        assert (await drain).admin_status == "draining"
        assert_newest_registration_drained(shard, revisions, registered_at)
    asyncio.run(scenario())


def test_a_removal_dated_before_a_registration_being_written_leaves_it_in_memory_and_in_the_store() -> None:
    async def scenario() -> None:
        shard, writes, revisions = await setting_up()
        removed_at = shard.revisions.next()
        registered_at = shard.revisions.next()
        writes.hold_next()
        registration = asyncio.ensure_future(shard.put_records([(reg(81), registered_at)]))
        await writes.held.wait()
        removal = asyncio.ensure_future(shard.delete_record("a", removed_at))
        await turns()
        writes.release()
        await registration
        assert await removal is False  # older than the registration it met
        assert shard.registry.get("a").revision == registered_at
        assert shard.store.load_records() == [(shard.registry.get("a").durable(), registered_at)]
    asyncio.run(scenario())


def test_only_the_instance_being_written_waits_and_its_heartbeats_never_do() -> None:
    """A registration's record on its way: a batch with other instances is taken at once (the one being written,
    once it is done), and a heartbeat of that instance with no new status renews its lease at once."""
    async def scenario() -> None:
        shard, writes, _ = await setting_up()
        writes.hold_next()
        registration = asyncio.ensure_future(shard.put_records([(reg(81), shard.revisions.next())]))
        await writes.held.wait()
        other = Registration(id="b", service="svc", address="10.0.0.2", port=80, ttl_s=0.0)
        batch = asyncio.ensure_future(shard.put_records([(other, shard.revisions.next()), (reg(82), shard.revisions.next())]))
        heartbeat = asyncio.ensure_future(shard.heartbeat("a", 0.5, "up"))
        await turns()
        assert heartbeat.done() and heartbeat.result().load == 0.5
        assert "b" in shard.registry.instances and not batch.done()  # "a" waits for the registration on its way
        writes.release()
        await registration
        [(b, created_b), (a, created_a)] = await batch
        assert created_b and not created_a and a is not None and a.reg.port == 82
        assert shard.store.read_record("a") == (a.durable(), a.revision)
    asyncio.run(scenario())


def test_a_copy_being_written_is_not_let_go_by_a_hand_off_pass() -> None:
    """A pass that found the owners holding the copy at its revision lets go of it only if nothing is being written
    to it meanwhile: a drain on its way is kept, for the next pass to hand on."""
    async def scenario() -> None:
        shard, writes, _ = await setting_up()
        held = await shard.inventory(["a"])
        writes.hold_next()
        drain = asyncio.ensure_future(shard.set_status("a", "draining"))
        await writes.held.wait()
        assert await shard.drop(["a"], held) == 0
        writes.release()
        drained = await drain
        assert shard.registry.get("a") is drained and drained.admin_status == "draining"
        assert shard.store.load_records() == [(drained.durable(), drained.revision)]
        assert await shard.drop(["a"], held) == 0  # written since: the next pass hands it on
    asyncio.run(scenario())
