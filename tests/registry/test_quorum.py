"""Writes acknowledged at W owners (k=3, W=2), over shards in this process: an owner whose calls never
complete does not hold a write once two others answered; it gets a hint when its send fails; fewer than
W answers is a 503."""
from __future__ import annotations

import asyncio

import pytest
from support.shards import FakePlacement, FakeShard, reg

from semreg.clock import FakeClock
from semreg.errors import NotFound, Unavailable
from semreg.registry.coordinator import Coordinator
from semreg.registry.quorum import Stragglers


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 10))


def ring(*hanging: str, down: tuple[str, ...] = ()) -> tuple[Coordinator, FakePlacement, dict[str, FakeShard]]:
    """Three owners a, b, c (a first); the ones named hang on a future nobody resolves, or are down."""
    shards = {name: FakeShard(name) for name in "abc"}
    for name in hanging:
        shards[name].hang = asyncio.get_running_loop().create_future()
    for name in down:
        shards[name].down = True
    placement = FakePlacement(list(shards.values()))
    return Coordinator(None, FakeClock(), placement), placement, shards  # type: ignore[arg-type]


def test_an_owner_that_never_answers_does_not_hold_the_acknowledgement():
    async def scenario():
        coordinator, placement, shards = ring("c")
        [(view, created)] = await coordinator.register([reg("i1")])
        assert created and view.holder == "a" and view.revision == shards["a"].revision("i1")
        assert shards["b"].revision("i1") == view.revision and shards["c"].revision("i1") is None
        assert len(coordinator.stragglers) == 1 and placement.hints == []
        await coordinator.close()
        assert len(coordinator.stragglers) == 0 and placement.hints == [("c", ["i1"])]  # called off: a hint

    run(scenario())


def test_the_view_comes_from_an_owner_that_answered_when_the_first_one_hangs():
    async def scenario():
        coordinator, _, shards = ring("a")
        [(view, created)] = await coordinator.register([reg("i1")])
        assert created and view.holder in ("b", "c") and view.revision == shards["b"].revision("i1")
        await coordinator.close()

    run(scenario())


def test_a_send_that_fails_after_the_acknowledgement_marks_its_member_and_leaves_a_hint():
    async def scenario():
        coordinator, placement, shards = ring("c")
        hung = shards["c"].hang
        await coordinator.register([reg("i1"), reg("i2")])
        shards["c"].down = True
        hung.set_result(None)  # it answers at last, with a failure (its timeout)
        while len(coordinator.stragglers):
            await asyncio.sleep(0)
        assert placement.hints == [("c", ["i1", "i2"])] and placement.suspects == {"c"}
        # the next write passes over the suspect at once
        [(_, created)] = await coordinator.register([reg("i3")])
        assert created and shards["c"].calls == ["put"]

    run(scenario())


def test_created_is_what_the_owners_that_acknowledged_say():
    async def scenario():
        coordinator, _, shards = ring()
        await coordinator.register([reg("i1")])
        shards["a"].hang = asyncio.get_running_loop().create_future()
        [(view, created)] = await coordinator.register([reg("i1", port=81)])
        assert not created and view.holder in ("b", "c")  # replaced: b and c held it already
        del shards["b"].records["i1"], shards["c"].records["i1"]
        [(_, created)] = await coordinator.register([reg("i1", port=82)])
        assert created  # neither of the two that answered held it (a, which does, is still hanging)
        await coordinator.close()

    run(scenario())


def test_fewer_than_w_answers_is_a_503():
    async def scenario():
        coordinator, placement, _ = ring(down=("b", "c"))
        with pytest.raises(Unavailable, match="held by 1 of the 2 owners"):
            await coordinator.register([reg("i1")])
        assert placement.suspects == {"b", "c"} and sorted(placement.hints) == [("b", ["i1"]), ("c", ["i1"])]
        with pytest.raises(Unavailable, match="reached 1 of the 2 owners"):
            await coordinator.deregister("i1")

    run(scenario())


def test_a_failed_send_is_tried_once_more_on_a_stand_in():
    async def scenario():
        shards = [FakeShard(name) for name in "abcd"]
        shards[1].down = True
        shards[2].hang = asyncio.get_running_loop().create_future()
        coordinator = Coordinator(None, FakeClock(), FakePlacement(shards))  # type: ignore[arg-type]
        [(_, created)] = await coordinator.register([reg("i1")])
        assert created and shards[3].revision("i1") == shards[0].revision("i1") is not None
        await coordinator.close()

    run(scenario())


def test_a_removal_waits_neither_for_a_hanging_owner_nor_to_find_the_instance():
    async def scenario():
        coordinator, _, shards = ring()
        await coordinator.register([reg("i1")])
        hung = shards["c"].hang = asyncio.get_running_loop().create_future()
        await coordinator.deregister("i1")
        assert shards["a"].records["i1"][0]["deleted"] and shards["b"].records["i1"][0]["deleted"]
        assert shards["c"].calls == ["put", "get", "delete"]  # the lookup's get was called off
        hung.set_result(None)
        while len(coordinator.stragglers):
            await asyncio.sleep(0)
        assert shards["c"].records["i1"][0]["deleted"]
        assert not await coordinator.exists("i1")
        with pytest.raises(NotFound):
            await coordinator.deregister("i1")

    run(scenario())


def test_not_found_takes_every_owner_asked_since_a_stand_in_holds_nothing():
    async def scenario():
        shards = [FakeShard(name) for name in "abcd"]
        placement = FakePlacement(shards)
        coordinator = Coordinator(None, FakeClock(), placement)  # type: ignore[arg-type]
        await coordinator.register([reg("i1")])
        placement.suspects = {"a", "b"}  # the owners asked now: c, then the stand-ins d (and none more)
        shards[2].hang = asyncio.get_running_loop().create_future()
        asked = asyncio.ensure_future(coordinator.exists("i1"))
        while "d" not in placement.answers:
            await asyncio.sleep(0)
        assert not asked.done()  # d said it has none (taken in the step that would have ended the lookup)
        shards[2].hang.set_result(None)
        assert await asked

    run(scenario())


def test_stragglers_are_bounded_past_which_a_send_is_called_off_for_a_hint():
    async def scenario():
        coordinator, placement, shards = ring("c")
        coordinator.stragglers = Stragglers(limit=1)
        await coordinator.register([reg("i1")])
        await coordinator.register([reg("i2")])
        while not placement.hints:  # the send called off ends on the loop's next turns
            await asyncio.sleep(0)
        assert len(coordinator.stragglers) == 1 and placement.hints == [("c", ["i2"])]
        await coordinator.close()

    run(scenario())


def test_an_error_that_is_not_a_shard_failure_is_raised():
    async def scenario():
        coordinator, _, shards = ring()

        async def broken(items, views=True):
            raise RuntimeError("a bug")

        shards["b"].put_records = broken  # type: ignore[method-assign]
        with pytest.raises(RuntimeError, match="a bug"):
            await coordinator.register([reg("i1")])
        await coordinator.close()

    run(scenario())



@pytest.mark.parametrize("ask", ["deregister", "get", "exists"])
def test_an_instance_written_to_a_stand_in_is_found_while_its_one_owner_holding_it_does_not_answer(ask: str):
    """Owners a and b (k=2), b away when the instance was written: a and the stand-in c took it. b back on
    the ring does not hold it yet (c hands it back soon). While a does not answer, b's word that it holds
    none is not the ring's: the other members are asked before the instance is said not to be registered."""
    async def scenario():
        shards = {name: FakeShard(name) for name in "abcd"}
        placement = FakePlacement(list(shards.values()), replicas=2)
        coordinator = Coordinator(None, FakeClock(), placement)  # type: ignore[arg-type]
        placement.suspects = {"b"}  # away: the write goes to a and the stand-in c
        await coordinator.register([reg("i1")])
        assert {n for n, s in shards.items() if "i1" in s.records} == {"a", "c"}
        placement.suspects = set()  # b is back, holding nothing of it yet
        shards["a"].down = True
        if ask == "deregister":
            await coordinator.deregister("i1")
            assert shards["c"].records["i1"][0]["deleted"] or shards["b"].records["i1"][0]["deleted"]
        elif ask == "get":
            assert (await coordinator.get("i1")).id == "i1"
        else:
            assert await coordinator.exists("i1")

    run(scenario())


def test_an_instance_no_member_that_answers_holds_is_not_registered_while_one_owner_is_down():
    """The other members asked hold nothing either: the one owner that does not answer cannot be the only
    holder of an acknowledged write (W=2), so it is not registered."""
    async def scenario():
        shards = {name: FakeShard(name) for name in "abcd"}
        placement = FakePlacement(list(shards.values()), replicas=2)
        coordinator = Coordinator(None, FakeClock(), placement)  # type: ignore[arg-type]
        shards["a"].down = True
        with pytest.raises(NotFound):
            await coordinator.get("i1")
        with pytest.raises(NotFound):
            await coordinator.deregister("i1")
        assert all("get" in shards[n].calls for n in "bcd")

    run(scenario())
