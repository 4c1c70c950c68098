"""Revision slots: no two live members of a ring hold the same one, so no two mint the same revision.

Members on an etcd in memory and a fake clock (`MemoryKV`, and `EtcdKV` over the fake etcd client for the
transaction itself), and a property over random joins, goodbyes and lapsed leases."""
from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st
from support.fakeetcd import FakeEtcd

from semreg.clock import FakeClock
from semreg.cluster import slots
from semreg.cluster.kv import EtcdKV, MemoryKV, parse_endpoints
from semreg.cluster.membership import Membership
from semreg.registry.revisions import SLOTS, Revisions, hashed_slot


def colliding(name: str, count: int) -> list[str]:
    """`count` ids whose hashed slot is `name`'s (two nodes that shared their revisions' low bits before)."""
    same = (f"n{i}" for i in range(1_000_000) if hashed_slot(f"n{i}") == hashed_slot(name))
    return [next(same) for _ in range(count)]


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def member(kv, clock: FakeClock, name: str, revisions: Revisions | None = None) -> Membership:
    return Membership(kv, "test", name, f"http://{name}:8080", clock, lease_ttl_s=9,
                      on_slot=revisions.assign if revisions is not None else None)


def held(kv: MemoryKV) -> dict[int, str]:
    prefix = slots.prefix_of("test")
    return {int(k[len(prefix):]): v.decode() for k, (v, _) in kv.data.items() if k.startswith(prefix)}


def test_members_whose_ids_hash_alike_hold_different_slots_and_mint_different_revisions():
    async def go():
        clock = FakeClock()
        kv = MemoryKV(clock)
        names = ["a", *colliding("a", 3)]
        revisions = {name: Revisions(clock, name) for name in names}
        assert len({r.next() for r in revisions.values()}) == 1  # before joining: one revision for all four
        nodes = [member(kv, clock, name, revisions[name]) for name in names]
        for node in nodes:
            await node.start()
        await settle()
        assert nodes[0].slot == hashed_slot("a")  # the first asks for its own, and gets it
        assert len({n.slot for n in nodes}) == 4 and held(kv) == {n.slot: n.node_id for n in nodes}
        minted = [r.next() for r in revisions.values()]  # the same microsecond on every node
        assert len(set(minted)) == 4
        for node in nodes:
            await node.stop()
    run(go())


def test_a_slot_goes_with_its_lease_and_a_member_that_joins_again_holds_one_nobody_else_does():
    async def go():
        clock = FakeClock()
        kv = MemoryKV(clock)
        a, b = member(kv, clock, "a"), member(kv, clock, colliding("a", 1)[0])
        await a.start()
        await b.start()
        await settle()
        first = a.slot
        await a.leave()  # its slot is free again
        assert first not in held(kv)
        c = member(kv, clock, colliding("a", 2)[1])
        await c.start()
        await settle()
        assert c.slot == first  # free, so the one it hashes to
        await b.stop()  # b freezes: its lease lapses, and its slot with it
        for _ in range(10):
            clock.advance(1)
            kv.tick()
            await settle()
        assert b.slot not in held(kv) and set(held(kv)) == {c.slot}
        await c.stop()
    run(go())


def test_the_claim_is_one_etcd_transaction_that_puts_a_key_only_if_it_is_absent():
    async def go():
        clock = FakeClock()
        etcd = FakeEtcd(MemoryKV(clock), clock)
        kv = EtcdKV(parse_endpoints("http://127.0.0.1:2379"), clock=clock, client=etcd.client)

        async def answered(call):  # each etcd call takes its latency on the clock
            pending = asyncio.ensure_future(call)
            while not pending.done():
                clock.advance(0.05)
                await settle()
            return pending.result()
        lease = await answered(kv.grant(9))
        assert await answered(kv.create("/k", b"first", lease)) is True
        assert await answered(kv.create("/k", b"second", lease)) is False
        assert etcd.kv.data["/k"][0] == b"first"
        names = colliding("a", 2)
        one = await answered(slots.claim(kv, "test", names[0], lease))
        other = await answered(slots.claim(kv, "test", names[1], lease))
        assert one == hashed_slot(names[0]) and other != one
        assert etcd.in_flight("transaction") == 0
    run(go())


def test_when_every_slot_is_held_a_join_says_so():
    async def go():
        clock = FakeClock()
        kv = MemoryKV(clock)
        lease = await kv.grant(9)
        for slot in range(SLOTS):
            await kv.put(f"{slots.prefix_of('test')}{slot:04d}", b"someone", lease)
        try:
            await slots.claim(kv, "test", "late", lease)
        except slots.SlotsExhausted as exc:
            assert str(SLOTS) in str(exc)
        else:
            raise AssertionError("a claim with every slot held succeeded")
    run(go())


def steps() -> st.SearchStrategy[list[tuple[str, int]]]:
    return st.lists(st.tuples(st.sampled_from(["join", "leave", "freeze", "wait"]), st.integers(0, 5)),
                    min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(steps())
def test_live_members_never_share_a_slot_nor_mint_one_revision(plan: list[tuple[str, int]]):
    """Six ids that all hash to one slot join, leave, freeze (their lease lapses) and join again in any order:
    at every step the slots held in etcd are distinct, each held by a member that believes it holds it, and
    the revisions the members holding them mint in one microsecond are distinct."""
    names = ["a", *colliding("a", 5)]

    async def go():
        clock = FakeClock()
        kv = MemoryKV(clock)
        revisions = {name: Revisions(clock, name) for name in names}
        live: dict[str, Membership] = {}
        for action, which in plan:
            name = names[which]
            if action == "join" and name not in live:
                live[name] = member(kv, clock, name, revisions[name])
                await live[name].start()
            elif action == "leave" and name in live:
                await live.pop(name).leave()
            elif action == "freeze" and name in live:
                await live.pop(name).stop()
            else:
                clock.advance(5)
                kv.tick()
            await settle()
            holders = held(kv)
            believed = {n.slot: name for name, n in live.items()}
            assert all(holders.get(slot) == name for slot, name in believed.items())  # no two believe one slot
            assert len({revisions[name].next() for name in live}) == len(live)
        for node in live.values():
            await node.stop()
    run(go())


