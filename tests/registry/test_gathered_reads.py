"""A read over every member: the other members' requests go out before this node computes its own part, so
that they work while it does; a member that does not answer is told to the placement and named missing.
Shards in this process (`support.shards`) that note when each call starts and ends."""
from __future__ import annotations

import asyncio
from typing import Any

from support.shards import FakePlacement, FakeShard

from semreg.clock import FakeClock
from semreg.rdf.terms import Tag
from semreg.registry.coordinator import Coordinator
from semreg.registry.shard import Held, ShardUnavailable

TAG = Tag("http://ex.org/A", "http://ex.org/p", "http://ex.org/B")


class Noting(FakeShard):
    """A shard whose `holders` notes when it starts and ends; another node's waits for the network first."""

    def __init__(self, name: str, events: list[str], remote: bool) -> None:
        super().__init__(name)
        self.events = events
        self.remote = remote

    async def holders(self, tags: list[Tag], with_tags: bool = True) -> Held[dict[Tag, list[Any]]]:
        self.events.append(f"{self.name} asked")
        if self.remote:
            await asyncio.sleep(0)  # its request is on the wire; the answer comes later
        if self.down:
            raise ShardUnavailable(self.name, "down")
        self.events.append(f"{self.name} answered")
        return Held({tag: [] for tag in tags})


def test_the_other_members_are_asked_before_this_node_computes_its_part() -> None:
    events: list[str] = []
    shards = [Noting("a", events, remote=False), Noting("b", events, remote=True), Noting("c", events, remote=True)]
    coordinator = Coordinator(None, FakeClock(), FakePlacement(shards, here="a"))  # type: ignore[arg-type]
    found, missing = asyncio.run(coordinator.holders([TAG]))
    assert found == {TAG: []} and missing == ()
    assert events.index("b asked") < events.index("a asked") and events.index("c asked") < events.index("a asked")


def test_a_member_that_does_not_answer_is_missing_and_suspected() -> None:
    events: list[str] = []
    shards = [Noting("a", events, remote=False), Noting("b", events, remote=True), Noting("c", events, remote=True)]
    shards[2].down = True
    placement = FakePlacement(shards, here="a")
    coordinator = Coordinator(None, FakeClock(), placement)  # type: ignore[arg-type]
    found, missing = asyncio.run(coordinator.holders([TAG]))
    assert found == {TAG: []} and missing == ("c",)
    assert placement.suspects == {"c"} and sorted(placement.answers) == ["a", "b"]
