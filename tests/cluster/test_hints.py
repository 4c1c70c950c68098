"""Hints over the ring's placement, with shards in this process: a write acknowledged without an owner is
brought to it when it answers again (not before), from this node's copy or another owner's."""
from __future__ import annotations

import asyncio

from support.shards import FakePeer, FakeShard, reg

from semreg.clock import FakeClock
from semreg.cluster.cluster import Cluster
from semreg.cluster.hints import Hints
from semreg.cluster.kv import MemoryKV
from semreg.cluster.placement import RingPlacement
from semreg.cluster.ring import Ring
from semreg.registry.coordinator import Coordinator
from semreg.registry.removals import RecentRemovals
from semreg.registry.revisions import Revisions
from semreg.work.lane import Lane


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 10))


class Suspects:
    """What the placement reads of membership: the members this node cannot reach."""

    def __init__(self) -> None:
        self.suspects: frozenset[str] = frozenset()

    def suspect(self, member: str) -> None:
        self.suspects |= {member}

    def unsuspect(self, member: str) -> None:
        self.suspects -= {member}


class Placed(RingPlacement):
    """The ring's placement with hints, wired as `Cluster` wires them."""

    def __init__(self, local: FakeShard, peers: list[FakeShard], members: list[str], replicas: int = 3) -> None:
        super().__init__(membership=Suspects(), node_id=local.name, replicas=replicas, secret="s",  # type: ignore[arg-type]
                         local=local, revisions=local.revisions)  # type: ignore[arg-type]
        self.ring = Ring(members)
        self.peers = {p.name: p for p in peers}  # type: ignore[misc]
        self.hints = Hints(placement=self, local=local, stopping=lambda: False)  # type: ignore[arg-type]
        self.on_answer = self.hints.answered

    def hint(self, member: str, ids: list[str]) -> None:
        self.hints.keep(member, ids)

    def check_writable(self) -> None:
        return None


async def delivered(placement: Placed) -> None:
    for task in placement.hints.tasks():
        await task


def test_a_write_an_owner_missed_reaches_it_when_it_answers_again():
    async def scenario():
        a, b, c = FakeShard("a"), FakePeer("b"), FakePeer("c")
        placement = Placed(a, [b, c], ["a", "b", "c"])
        coordinator = Coordinator(None, FakeClock(), placement)  # type: ignore[arg-type]
        hung = c.hang = asyncio.get_running_loop().create_future()
        await coordinator.register([reg("i1"), reg("i2")])
        c.down = True
        hung.set_result(None)  # its send fails at last (past its timeout)
        while len(coordinator.stragglers):
            await asyncio.sleep(0)
        assert placement.hints.held("c") == {"i1", "i2"} and "c" in placement.suspects
        assert placement.hints.tasks() == [] and c.revision("i1") is None  # nothing sent while it is away
        c.hang, c.down = None, False
        placement.answered("c")  # any request it answers
        await delivered(placement)
        assert c.revision("i1") == a.revision("i1") and c.revision("i2") == a.revision("i2")
        assert placement.hints.held("c") == set() and placement.hints.delivered == 2 and "c" not in placement.suspects

    run(scenario())


def test_a_record_this_node_does_not_hold_is_taken_from_another_owner():
    async def scenario():
        shards = {name: FakePeer(name) for name in "abc"} | {"d": FakeShard("d")}
        placement = Placed(shards["d"], [shards[n] for n in "abc"], ["a", "b", "c", "d"])
        iid = next(f"i{n}" for n in range(100) if "d" not in placement.ring.owners(f"i{n}", 3))
        first, second, missed = placement.ring.owners(iid, 3)  # d coordinated the write, owning none of it
        shards[second].records[iid] = (reg(iid).record(), 7)
        placement.hints.keep(missed, [iid])
        placement.answered(missed)
        await delivered(placement)
        assert shards[missed].revision(iid) == 7 and shards[first].calls == ["export"]  # it had none: the next

    run(scenario())


def test_hints_a_member_does_not_take_wait_for_its_next_answer():
    async def scenario():
        a, b, c = FakeShard("a"), FakePeer("b"), FakePeer("c")
        placement = Placed(a, [b, c], ["a", "b", "c"])
        a.records["i1"] = (reg("i1").record(), 3)
        placement.hints.keep("c", ["i1"])
        c.down = True
        placement.answered("c")  # it answered something else, then failed the hint's request
        await delivered(placement)
        assert placement.hints.held("c") == {"i1"} and "c" in placement.suspects
        c.down = False
        placement.answered("c")
        await delivered(placement)
        assert c.revision("i1") == 3 and placement.hints.held("c") == set()

    run(scenario())


def test_a_record_the_member_no_longer_owns_is_left_to_anti_entropy():
    async def scenario():
        a, b, c, d = FakeShard("a"), FakePeer("b"), FakePeer("c"), FakePeer("d")
        placement = Placed(a, [b, c, d], ["a", "b", "c", "d"], replicas=2)
        iid = next(f"i{n}" for n in range(100) if "d" not in placement.ring.owners(f"i{n}", 2))
        a.records[iid] = (reg(iid).record(), 3)
        placement.hints.keep("d", [iid])
        placement.answered("d")
        await delivered(placement)
        assert d.revision(iid) is None and d.calls == []

    run(scenario())


def test_the_cluster_wires_hints_to_its_placement():
    async def scenario():
        clock = FakeClock()
        local = FakeShard("a")
        coordinator = Coordinator(None, clock, None)  # type: ignore[arg-type]
        cluster = Cluster(kv=MemoryKV(clock), cluster="t", node_id="a", address="http://a:1", replicas=3, secret="s",
                          local=local, removals=RecentRemovals({}), revisions=Revisions(clock, "a"),  # type: ignore[arg-type]
                          lane=Lane(), coordinator=coordinator, knowledge=None, clock=clock)
        cluster.hint("b", ["i1"])
        assert cluster.hints.held("b") == {"i1"} and cluster.placement.on_answer == cluster.hints.answered

    run(scenario())
