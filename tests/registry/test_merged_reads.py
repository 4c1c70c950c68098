"""Reads merged over several shards: the newest copy of each instance wins, and a removal hides every older
copy, whichever shard still holds one. Real shards (each on its own in-memory pyoxigraph store) behind a
coordinator, with a fixed placement: the first three of four shards own every instance, the fourth holds
whatever copy it was given (a node that owned it before the ring moved, or a stand-in)."""
from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import pyoxigraph as ox
import pytest
from hypothesis import given
from hypothesis import strategies as st

from semreg.clock import FakeClock
from semreg.rdf.terms import Tag
from semreg.reasoning.matching import DEFAULT_MATCH
from semreg.reasoning.reasoner import build_hierarchy, compute_closure
from semreg.registry.coordinator import Coordinator
from semreg.registry.discovery import DiscoverQuery
from semreg.registry.instances import Registration
from semreg.registry.local_shard import LocalShard
from semreg.registry.merged import newest_copies, newest_holders, removals_of
from semreg.registry.shard import Held
from semreg.storage.store import Store

EX = "http://ex.org/"
ONTOLOGY = f"""@prefix : <{EX}> . @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
:Livro rdfs:subClassOf :Obra . :Romance rdfs:subClassOf :Livro ."""
LIVRO_TERROR = Tag(EX + "Livro", EX + "temGenero", EX + "Terror")
OBRA_TERROR = Tag(EX + "Obra", EX + "temGenero", EX + "Terror")


class Fixed:
    """Every instance is owned by the first three shards; every shard is read."""

    replicas = 3
    here = "n1"

    def __init__(self, shards: dict[str, LocalShard]) -> None:
        self.shards = shards

    def owners(self, instance_id: str, avoid: frozenset[str] = frozenset()) -> list[tuple[str, Any]]:
        return [(m, s) for m, s in self.shards.items() if m not in avoid][:3]

    def accountable(self, instance_id: str) -> list[tuple[str, Any]]:
        return self.owners(instance_id)

    def needed(self, instance_id: str) -> int:
        return 2

    def readers(self) -> list[tuple[str, Any]]:
        return list(self.shards.items())

    def members(self) -> list[tuple[str, Any]]:
        return list(self.shards.items())

    def failed(self, member: str) -> None:
        return None

    def answered(self, member: str) -> None:
        return None

    def missing(self, failed: Iterable[str]) -> list[str]:
        return sorted(failed)

    def next_revision(self) -> int:
        return next(iter(self.shards.values())).revisions.next()

    def hint(self, member: str, ids: list[str]) -> None:
        return None

    def check_writable(self) -> None:
        return None


class Knowledge:
    def __init__(self, hierarchy: Any) -> None:
        self.hierarchy = hierarchy


def reg(iid: str, port: int = 80) -> Registration:
    return Registration(id=iid, service="svc", address="10.0.0.1", port=port, ttl_s=0.0, tags=(LIVRO_TERROR,))


@pytest.fixture
def ring():
    triples = [ox.Triple(q.subject, q.predicate, q.object)
               for q in ox.parse(ONTOLOGY.encode(), format=ox.RdfFormat.TURTLE)]
    hierarchy = build_hierarchy(triples, compute_closure(triples).inferred)
    clock = FakeClock()

    async def write(fn: Any, *args: Any) -> Any:
        return fn(*args)

    def submit(fn: Any, *args: Any) -> None:
        fn(*args)

    shards = {}
    for name in ("n1", "n2", "n3", "n4"):
        shard = LocalShard(clock, Store(None), write, submit, node_id=name)
        shard.registry.catalogue.set_hierarchy(hierarchy)
        shard.removals.enabled = True
        shards[name] = shard
    coordinator = Coordinator(Knowledge(hierarchy), clock, Fixed(shards))  # type: ignore[arg-type]
    yield coordinator, shards


def listed(coordinator: Coordinator) -> list[str]:
    return [i.id for i in asyncio.run(coordinator.instances(None)).payload.items]


def discovered(coordinator: Coordinator) -> list[str]:
    q = DiscoverQuery(tag=OBRA_TERROR, match=DEFAULT_MATCH)
    return [m.id for m in asyncio.run(coordinator.discover(q)).payload.members]


def tagged(coordinator: Coordinator) -> dict[str, int]:
    return {t.text: n for t, n in asyncio.run(coordinator.tags()).payload.items}


def held(coordinator: Coordinator) -> list[str]:
    found, _ = asyncio.run(coordinator.holders([LIVRO_TERROR]))
    return [i.id for i in found[LIVRO_TERROR]]


def test_a_stale_copy_on_a_shard_that_missed_the_removal_is_hidden_from_every_read(ring) -> None:
    coordinator, shards = ring
    asyncio.run(coordinator.register([reg("i1"), reg("i2")]))
    old = shards["n1"].held("i1").revision
    asyncio.run(shards["n4"].put_records([(reg("i1"), old)]))  # a copy from before the ring moved
    asyncio.run(coordinator.deregister("i1"))
    assert "i1" in shards["n4"].registry.instances  # nobody told it yet
    assert listed(coordinator) == ["i2"]
    assert discovered(coordinator) == ["i2"]
    assert held(coordinator) == ["i2"]
    assert list(tagged(coordinator).values()) == [1]
    with pytest.raises(Exception, match="is registered"):
        asyncio.run(coordinator.get("i1"))


def test_an_owner_that_missed_the_removal_does_not_bring_it_back(ring) -> None:
    coordinator, shards = ring
    asyncio.run(coordinator.register([reg("i1")]))
    revision = shards["n1"].held("i1").revision
    for name in ("n1", "n2"):  # the removal reached two of the three owners, as a write needs
        asyncio.run(shards[name].delete_record("i1", revision + 1_000_000))
    assert "i1" in shards["n3"].registry.instances
    assert listed(coordinator) == [] and discovered(coordinator) == [] and held(coordinator) == []
    assert tagged(coordinator) == {}
    assert asyncio.run(coordinator.registered_by(["i1"])) == {}


def test_a_registration_newer_than_the_removal_is_read(ring) -> None:
    coordinator, shards = ring
    asyncio.run(coordinator.register([reg("i1")]))
    asyncio.run(coordinator.deregister("i1"))
    asyncio.run(coordinator.register([reg("i1", port=81)]))
    assert listed(coordinator) == ["i1"] and discovered(coordinator) == ["i1"]
    assert asyncio.run(coordinator.get("i1")).reg.port == 81
    assert list(tagged(coordinator).values()) == [1]


def test_settled_removals_stop_travelling_with_reads(ring) -> None:
    coordinator, shards = ring
    asyncio.run(coordinator.register([reg("i1")]))
    asyncio.run(coordinator.deregister("i1"))
    pending = shards["n1"].removals.current()
    assert set(pending) == {"i1"}
    assert asyncio.run(shards["n1"].instances(None)).removed == pending
    shards["n1"].removals.settled(pending)
    assert asyncio.run(shards["n1"].instances(None)).removed == {}
    shards["n1"].removals.reopen(0.0)  # a member joined: they travel again until settled with it
    assert asyncio.run(shards["n1"].instances(None)).removed == pending


def test_newest_copies_keeps_the_newest_unless_removed_later() -> None:
    class Copy:
        def __init__(self, iid: str, revision: int) -> None:
            self.id, self.revision, self.state_version, self.routes_since_report = iid, revision, 0, 0

    copies = [Copy("a", 1), Copy("a", 3), Copy("b", 2), Copy("c", 5)]
    assert [(c.id, c.revision) for c in newest_copies(copies, {"a": 2, "b": 4, "c": 4})] == [("a", 3), ("c", 5)]


class Listed:
    """A copy as a shard lists it under tags: its id, revision and state version, and whether it is up."""

    def __init__(self, iid: str, revision: int, state_version: int, up: bool) -> None:
        self.id, self.revision, self.state_version, self.routes_since_report = iid, revision, state_version, 0
        self.up = up


TAGS = [Tag(EX + "A", EX + "p", EX + c) for c in "BCDE"]
copies_st = st.builds(Listed, st.sampled_from("abcd"), st.integers(1, 4), st.integers(0, 2), st.booleans())
answer_st = st.builds(lambda held, removed: Held(held, removed),
                      st.dictionaries(st.sampled_from(TAGS), st.lists(copies_st, max_size=4)),
                      st.dictionaries(st.sampled_from("abcd"), st.integers(1, 4)))


@given(answers=st.lists(answer_st, min_size=1, max_size=3))
def test_each_tags_holders_are_the_newest_listed_under_it_unless_removed_later(answers: list[Held[Any]]) -> None:
    """The lookup's merge is, tag by tag, what `newest_copies` gives over the copies listed under that tag (an
    instance judged once however many tags list it)."""
    removed = removals_of(answers)
    expected: dict[Tag, list[Any]] = {}
    for answer in answers:
        for tag, listed in answer.items.items():
            expected.setdefault(tag, []).extend(listed)
    expected = {tag: [c for c in newest_copies(listed, removed) if c.up] for tag, listed in expected.items()}
    assert newest_holders(answers, lambda c: c.up) == expected
