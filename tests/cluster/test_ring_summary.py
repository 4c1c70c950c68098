"""The overview's counts in a ring (`GET /v1/summary`) are the sum of what each member keeps of the instances it
is the first owner of: whatever the replicas, they equal what a node alone holding the same instances would
count (instances, by status, service and environment, distinct tags), through registrations, removals, status
changes, lapsed leases, a member joining and one leaving; for every environment and for one. The summary
never reads any member's instance list, and is never `partial` while every member answers.

Rings of two and three apps in this process (`support.inprocess_ring`), each record on one owner or two. The
counting rule itself, over any ring, replicas and ids and through a ring change, is a property test at the end.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.inprocess_ring import InProcessRing, RingNode
from support.server import wait_for

from semreg.clock import FakeClock
from semreg.cluster.ring import Ring
from semreg.rdf.terms import Tag
from semreg.registry import primaries
from semreg.registry.environment_counts import tag_hashes
from semreg.registry.instances import STATUSES, Registration
from semreg.registry.registry import Registry
from semreg.registry.tag_union import distinct

EX = "http://example.org/summary#"
ENVIRONMENTS = ("default", "prod", "qa")
SHAPES = [(2, 1), (2, 2), (3, 1), (3, 2)]  # (members, replicas)


def registration(n: int) -> dict[str, Any]:
    """Instance `n`: of one of three services and environments, with tags some others share; every fourth
    with a lease of 5 s."""
    tags = [{"s": f"{EX}C{n % 5}", "p": f"{EX}p", "o": f"{EX}D{n % 7}"}, {"s": f"{EX}Shared", "p": f"{EX}p",
                                                                          "o": f"{EX}E{n % 2}"}]
    return {"id": f"i{n:03d}", "service": f"svc{n % 3}", "environment": ENVIRONMENTS[n // 3 % 3],
            "address": "10.0.0.1", "port": 8000 + n, "tags": tags, "ttl": 5 if n % 4 == 0 else 0}


def counted(views: list[dict[str, Any]], environment: str | None) -> dict[str, Any]:
    """What a node alone holding these instances counts in `environment` (None: all)."""
    chosen = [v for v in views if environment is None or v["environment"] == environment]
    return {"instances": len(chosen),
            "by_status": {s: sum(v["status"] == s for v in chosen) for s in ("up", "draining", "blocked", "critical")},
            "services": dict(sorted(Counter(v["service"] for v in chosen).items())),
            "environments": dict(sorted(Counter(v["environment"] for v in chosen).items())),
            "tags": len({(t["s"], t["p"], t["o"]) for v in chosen for t in v["tags"]})}


class ListingsCounted:
    """Each node's reads of a whole instance list (`Shard.instances(None)`), from this node or another."""

    def __init__(self, ring: InProcessRing) -> None:
        self.calls: Counter[str] = Counter()
        for name, node in ring.nodes.items():
            self.watch(ring, name, node)

    def watch(self, ring: InProcessRing, name: str, node: RingNode) -> None:
        shard = node.node.shard
        answer = shard.instances

        async def counting(service: str | None, **options: Any) -> Any:
            if service is None:
                self.calls[name] += 1
            return await answer(service, **options)
        ring.call(lambda: setattr(shard, "instances", counting))


def agree(ring: InProcessRing, listings: ListingsCounted) -> bool:
    """Every node's summary, of every environment and of each one, is what counting the ring's instances gives,
    whole; and no summary read a whole instance list."""
    views = next(iter(ring.nodes.values())).get("/v1/instances", params={"environment": "*"}).json()
    listings.calls.clear()
    for node in ring.nodes.values():
        for environment in (None, *ENVIRONMENTS):
            answer = node.get("/v1/summary", params={"environment": environment} if environment else {}).json()
            if "partial" in answer or {k: answer[k] for k in counted(views, None)} != counted(views, environment):
                return False
    assert not listings.calls, f"a summary read a whole instance list: {dict(listings.calls)}"
    return True


def settled(ring: InProcessRing, listings: ListingsCounted, what: str) -> None:
    wait_for(lambda: (ring.settle(), agree(ring, listings))[1], 30, f"the summaries agree {what}")


@pytest.fixture(params=SHAPES, ids=[f"{n}-members-k{k}" for n, k in SHAPES])
def ring(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[InProcessRing]:
    members, replicas = request.param
    ring = InProcessRing(tmp_path / "ring", replicas=replicas)
    try:
        for name in "abc"[:members]:
            ring.add(name)
        assert ring.converged()
        yield ring
    finally:
        ring.close()


def test_the_ring_summary_counts_each_instance_once_through_changes(ring: InProcessRing) -> None:
    listings = ListingsCounted(ring)
    nodes = list(ring.nodes.values())
    settled(ring, listings, "on an empty ring")
    for n in range(36):
        assert nodes[n % len(nodes)].put(f"/v1/instances/i{n:03d}", json=registration(n)).status_code == 201
    settled(ring, listings, "after registrations")

    for n in (1, 2, 7):
        assert nodes[0].delete(f"/v1/instances/i{n:03d}").status_code == 204
    for n, status in ((3, "draining"), (5, "blocked"), (6, "draining")):
        assert nodes[-1].put(f"/v1/instances/i{n:03d}/heartbeat", json={"status": status}).status_code == 200
    settled(ring, listings, "after removals and status changes")

    joined = ring.add("d")
    listings.watch(ring, "d", joined)
    settled(ring, listings, "after a member joined")
    assert nodes[1].put("/v1/instances/i101", json=registration(101)).status_code == 201
    settled(ring, listings, "after a registration on the ring of the joined member")

    ring.remove("a")
    settled(ring, listings, "after a member left")
    views = nodes[-1].get("/v1/instances", params={"environment": "*"}).json()
    assert len(views) == 36 - 3 + 1

    ring.advance(6.0)  # the leases of 5 s lapse, on their first owners: critical
    views = nodes[-1].get("/v1/instances", params={"environment": "*"}).json()
    assert sum(v["status"] == "critical" for v in views) == 9
    settled(ring, listings, "after leases lapsed")


def test_a_member_that_does_not_answer_makes_the_summary_partial(tmp_path: Path) -> None:
    """Its counts are of the instances it first-owns, which no other member counts: the summary says it is
    missing, even where other owners hold copies of its instances; once it answers again (and holds what was
    written while it was away), whole."""
    ring = InProcessRing(tmp_path / "ring", replicas=2)
    try:
        a, b, c = (ring.add(name) for name in "abc")
        for n in range(12):
            assert a.put(f"/v1/instances/i{n:03d}", json=registration(n)).status_code == 201
        whole = b.get("/v1/summary").json()
        assert whole["instances"] == 12 and "partial" not in whole
        ring.run(c.stop_listening())
        assert a.put("/v1/instances/i012", json=registration(12)).status_code == 201  # a change: counted again
        answer = b.get("/v1/summary").json()
        assert (answer["partial"], answer["missing"]) == (True, ["c"])
        assert answer["instances"] < 13
        ring.run(c.listen())
        # the registration made while it was away reaches it (a hint), and its change log the others (both wait
        # on the ring's clock to try again)
        # (the ring's clock in steps of 0.1 s, the hint and the change log travelling on real sockets meanwhile: in
        # the 30 s waited, at most ~60 s of ring time pass, short of the 95 s after which the instances with a 5 s
        # lease are deleted and 13 is never reached again)
        wait_for(lambda: (ring.advance(0.1, step=0.1), b.get("/v1/summary").json())[1].get("instances") == 13
                 and "partial" not in b.get("/v1/summary").json(), 30, "the summary whole again")
    finally:
        ring.close()


def test_a_summary_after_a_status_change_has_no_member_send_its_tags_again(tmp_path: Path) -> None:
    """Each member's distinct tags travel as hashes (8 bytes a tag: megabytes a member at a million instances);
    asked again while its tags did not move, a member sends none, and only the one whose tags moved sends
    them again."""
    ring = InProcessRing(tmp_path / "ring", replicas=2)
    try:
        a, b, c = (ring.add(name) for name in "abc")
        sent: list[tuple[str, bool]] = []
        for name, node in ring.nodes.items():
            shard = node.node.shard
            answer = shard.counts

            async def counting(environments: Any, known: str | None = None, *, name: str = name,
                               answer: Any = answer) -> Any:
                tally = await answer(environments, known)
                sent.append((name, tally.tags is not None))
                return tally
            ring.call(lambda shard=shard, counting=counting: setattr(shard, "counts", counting))
        for n in range(12):
            assert a.put(f"/v1/instances/i{n:03d}", json=registration(n)).status_code == 201
        ring.settle()
        first = b.get("/v1/summary").json()
        assert first["tags"] == 14 and first["instances"] == 12
        assert sorted(sent) == [("a", True), ("b", True), ("c", True)]

        sent.clear()
        assert c.put("/v1/instances/i004/heartbeat", json={"status": "draining"}).status_code == 200
        ring.settle()
        again = b.get("/v1/summary").json()
        assert again["by_status"]["draining"] == 1 and again["tags"] == 14
        assert sorted(sent) == [("a", False), ("b", False), ("c", False)]

        sent.clear()
        new = registration(40) | {"tags": [{"s": f"{EX}New", "p": f"{EX}p", "o": f"{EX}Tag"}]}
        assert a.put("/v1/instances/i040", json=new).status_code == 201
        ring.settle()
        assert b.get("/v1/summary").json()["tags"] == 15
        [owner] = [m for m, hashes in sent if hashes]  # the new instance's first owner only
        assert Ring(sorted(ring.nodes)).owners("i040", 1) == [owner]
    finally:
        ring.close()


def first_owner(ring: Ring, member: str) -> Callable[[str], bool]:
    """What `RingPlacement.is_primary` says on `member` over `ring`."""
    return lambda iid: ring.owners(iid, 1) == [member]


def hold(registries: dict[str, Registry], ring: Ring, replicas: int, ids: list[str]) -> None:
    """Each member of `ring` holds the ids it owns (a copy handed to it, one it no longer owns let go of), its
    leases moved as a ring change moves them (`primaries.moved`)."""
    for member in ring.members:
        registry = registries.setdefault(member, Registry(FakeClock()))
        primary = first_owner(ring, member)
        for iid, leased in primaries.moved(registry.instances, primary):
            registry.set_leased(iid, leased)
        registry.leases_here = primary
        owned = [i for i in ids if member in ring.owners(i, replicas)]
        registry.put_many([Registration(id=i, service=f"s{len(i) % 3}", address="h", port=1, tags=(Tag(EX + i),))
                           for i in owned if i not in registry.instances])
        for iid in set(registry.instances) - set(owned):
            registry.drop(iid)
    for gone in set(registries) - set(ring.members):
        del registries[gone]


@given(before=st.sets(st.sampled_from("abcdefgh"), min_size=1, max_size=6),
       after=st.sets(st.sampled_from("abcdefgh"), min_size=1, max_size=6), replicas=st.integers(1, 4),
       ids=st.lists(st.text(min_size=1, max_size=12), max_size=60, unique=True))
@settings(max_examples=200, deadline=None)
def test_the_first_owners_count_every_id_exactly_once(before: set[str], after: set[str], replicas: int,
                                                      ids: list[str]) -> None:
    """The counting rule, over any ring, replicas and ids: each member's kept counts are of the ids it holds and
    is the first owner of on its ring; summed over the members, every id is counted exactly once (its tag
    too), and again once a ring change's leases have moved and its copies have been handed over."""
    registries: dict[str, Registry] = {}
    for members in (before, after):
        ring = Ring(members)
        hold(registries, ring, replicas, ids)
        tallies = [r.leased_counts.tally(None, STATUSES, tag_hashes(r.leased_counts.tag_lists(None)))
                   for r in registries.values()]
        assert sum(t.instances for t in tallies) == len(ids)
        assert sum(t.by_status["up"] for t in tallies) == len(ids)
        assert distinct([t.tags for t in tallies]) == len(ids)
        counted_by = Counter(i for m, r in registries.items() for i, inst in r.instances.items() if inst.leased)
        assert counted_by == Counter(ids)
