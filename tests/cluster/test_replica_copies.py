"""Which copy of each instance a node's SPARQL replica shows, when copies come from every member: the table
alone, and a ring in this process (`support.inprocess_ring`, one fake clock) answering `/sparql`."""
from __future__ import annotations

import asyncio
import random
import tracemalloc

import pytest
from support.inprocess_ring import InProcessRing, RingNode
from support.server import wait_for

from semreg.cluster.barrier import ReadBarrier
from semreg.cluster.replica_copies import ReplicaCopies


class Replica:
    """What the feed would publish: the views shown, by id."""

    def __init__(self) -> None:
        self.views: dict[str, dict] = {}
        self.calls = 0

    def show(self, view: dict) -> None:
        self.views[view["id"]] = view
        self.calls += 1

    def hide(self, iid: str) -> None:
        self.views.pop(iid, None)
        self.calls += 1


def view(iid: str, status: str = "up", port: int = 1) -> dict:
    return {"id": iid, "status": status, "port": port}


@pytest.fixture
def table() -> tuple[ReplicaCopies, Replica]:
    replica = Replica()
    return ReplicaCopies(replica.show, replica.hide), replica


def test_the_newest_copy_wins_whatever_the_order_copies_arrive_in(table):
    copies, replica = table
    copies.put("b", view("i", "critical"), 3, 7)
    copies.put("a", view("i", "up"), 3, 5)  # an owner that has not heard of the expiry yet
    assert replica.views["i"]["status"] == "critical"
    copies.put("a", view("i", "up", port=2), 4, 0)  # replaced: a newer revision beats any state version
    assert replica.views["i"] == view("i", "up", port=2)
    calls = replica.calls
    copies.put("b", view("i", "up", port=2), 4, 0)  # the same copy from the other owner: nothing to do
    assert replica.calls == calls and copies.shown() == {"i": (4, 0)}


def test_a_removal_leaves_a_tombstone_so_a_late_copy_never_brings_the_instance_back(table):
    copies, replica = table
    copies.put("a", view("i"), 3, 0)
    copies.put("b", view("i"), 3, 0)
    copies.removed("a", "i", 5)
    assert "i" not in replica.views
    copies.put("b", view("i"), 3, 0)  # b's copy arrives late (or b resyncs before it heard)
    copies.resync("c", [(view("i"), 5, 0)])  # a copy of the removed revision itself
    assert "i" not in replica.views
    copies.put("a", view("i", port=9), 6, 0)  # registered again: a newer revision
    assert replica.views["i"]["port"] == 9


def test_a_removal_is_forgotten_once_older_than_the_members_keep_their_tombstones(table):
    """The table does not grow with every id ever removed: past the age the members forget their own
    tombstones, a removal is forgotten (a removal made again later stays until it is as old)."""
    copies, replica = table
    for n in range(100):
        copies.put("a", view(f"i{n}"), 10 + n, 0)
        copies.removed("a", f"i{n}", 200 + n)
    copies.put("a", view("kept"), 10, 0)
    copies.put("b", view("kept"), 10, 0)
    copies.removed("a", "kept", 250)  # b still holds its copy: the entry stays with it
    copies.removed("a", "i7", 400)  # removed again later: its newer tombstone is not yet old
    assert copies.forget_removed(before=250) == 49  # i0..i49 but i7
    assert copies.forget_removed(before=250) == 0  # each removal looked at once
    assert copies.forget_removed(before=1000) == 51  # i50..i99 and i7, not kept (b holds it)
    assert "kept" not in replica.views
    # past the keep, a copy older than the forgotten removal shows again, as the members' stores would take it
    copies.put("c", view("i3"), 150, 0)
    copies.put("b", view("kept"), 10, 0)
    assert copies.shown().keys() == {"kept", "i3"}
    copies.removed("b", "kept", 1100)
    copies.removed("c", "i3", 1100)
    assert copies.forget_removed(before=2000) == 2 and copies.shown() == {}


def test_an_old_removal_does_not_remove_a_newer_registration(table):
    copies, replica = table
    copies.put("a", view("i", port=2), 7, 0)
    copies.removed("b", "i", 6)
    assert replica.views["i"]["port"] == 2


def test_a_removal_its_member_let_go_of_shows_the_copies_again_once_no_member_holds_it(table):
    """Seed 702 of the fault test: a removal answered 503 reached one owner alone, which then let go of its
    tombstone and took the other owners' live copies back; every node listed the instance, and no replica
    showed it. A copy at or below the tombstone from a member that said the removal is its own again."""
    copies, replica = table
    for member in "abc":
        copies.put(member, view("i"), 3, 0)
    copies.removed("b", "i", 5)
    assert "i" not in replica.views
    copies.put("c", view("i"), 3, 0)  # a late copy from a member that never said the removal: still out
    assert "i" not in replica.views
    copies.put("b", view("i"), 3, 0)  # b holds the registration again: nobody holds the removal any more
    assert replica.views["i"] == view("i") and copies.shown() == {"i": (3, 0)}
    copies.let_go("b", "i")  # the other owners' copies hold it
    assert "i" in replica.views

    copies.removed("a", "j", 5)
    copies.removed("b", "j", 5)
    copies.put("b", view("j"), 3, 0)  # a still holds the removal
    assert "j" not in replica.views
    copies.put("a", view("j"), 3, 0)
    assert "j" in replica.views


def test_a_copy_handed_to_new_owners_stays_while_anyone_holds_it(table):
    copies, replica = table
    copies.put("a", view("i"), 1, 0)
    copies.put("b", view("i"), 1, 0)
    copies.let_go("a", "i")
    assert "i" in replica.views
    copies.put("c", view("i"), 1, 0)  # the new owner
    copies.let_go("b", "i")
    assert "i" in replica.views
    copies.let_go("c", "i")
    assert "i" not in replica.views


def test_a_resync_holds_exactly_what_the_member_listed(table):
    copies, replica = table
    copies.put("a", view("i"), 1, 0)
    copies.put("a", view("j"), 1, 0)
    copies.put("b", view("j"), 1, 0)
    # a's follower reconnected: meanwhile i was removed (on its only owner) and k registered
    copies.resync("a", [(view("j"), 1, 0), (view("k"), 2, 0)])
    assert sorted(replica.views) == ["j", "k"]
    copies.forget("b")
    assert sorted(replica.views) == ["j", "k"]
    copies.forget("a")
    assert replica.views == {}


def test_an_instance_of_the_ring_costs_its_entry_and_little_more():
    """A member serving SPARQL keeps an entry for every instance of the ring: the members holding each copy
    are shared, not a set per instance."""
    ids = [f"inst-{i:06d}" for i in range(20_000)]  # made before measuring: the view's id is the caller's
    views = [{"id": iid} for iid in ids]
    copies = ReplicaCopies(lambda view: None, lambda iid: None)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i, view in enumerate(views):
            copies.put("n1", view, 10_000 + i, 300 + i)
            copies.put(("n2", "n3")[i % 2], view, 10_000 + i, 300 + i)
        taken = (tracemalloc.get_traced_memory()[0] - before) / len(views)
    finally:
        tracemalloc.stop()
    # the entry (~80 bytes), its revision and state version (~56), its place in the table (~40-80); a set of
    # holders of its own was ~216 bytes more
    assert taken < 250, taken
    assert len(copies.shown()) == len(views)
    copies.let_go("n1", ids[0])
    copies.let_go("n2", ids[0])
    assert ids[0] not in copies.shown()


def test_any_interleaving_of_two_owners_streams_shows_what_one_registry_would():
    """Two owners log the same history of an instance; however their streams interleave, and whichever
    arrives twice, the replica ends with the last state of the history."""
    history = [("put", 1, 0, "up"), ("put", 1, 1, "critical"), ("put", 1, 2, "up"), ("removed", 1),
               ("put", 3, 0, "up"), ("put", 3, 1, "draining")]
    rng = random.Random(5)
    for _ in range(300):
        replica = Replica()
        copies = ReplicaCopies(replica.show, replica.hide)
        streams = {m: list(history) for m in ("a", "b")}
        while any(streams.values()):
            member = rng.choice([m for m, s in streams.items() if s])
            event = streams[member].pop(0)
            if event[0] == "put":
                copies.put(member, view("i", event[3]), event[1], event[2])
            else:
                copies.removed(member, "i", event[1])
        assert replica.views == {"i": view("i", "draining")}


def test_reads_arriving_together_share_a_round_that_started_after_each_of_them():
    async def main() -> None:
        started: list[int] = []
        release, running = asyncio.Event(), asyncio.Event()

        async def round_() -> None:
            started.append(len(started))
            running.set()
            await release.wait()

        barrier = ReadBarrier(round_)
        first = asyncio.ensure_future(barrier.wait())
        await running.wait()
        assert started == [0]
        # these arrive while round 0 is in flight: it started before them, so they need round 1
        later = [asyncio.ensure_future(barrier.wait()) for _ in range(50)]
        release.set()
        await first
        await asyncio.gather(*later)
        assert started == [0, 1] and barrier.rounds == 2

    asyncio.run(main())


def test_a_failed_round_ends_the_wait_and_the_next_read_starts_a_new_one():
    async def main() -> None:
        calls = 0

        async def round_() -> None:
            nonlocal calls
            calls += 1
            raise RuntimeError("a member answered nonsense")

        barrier = ReadBarrier(round_)
        await barrier.wait()
        await barrier.wait()
        assert calls == 2

    asyncio.run(main())


SR = "PREFIX sr: <https://w3id.org/semreg#>\n"


def counted(node: RingNode, iid: str) -> tuple[bool, int]:
    """Whether `node`'s `/sparql` sees instance `iid`, and how many instances it counts."""
    def ask(query: str) -> dict:
        r = node.request("POST", "/sparql", content=(SR + query).encode(),
                         headers={"Content-Type": "application/sparql-query",
                                  "Accept": "application/sparql-results+json"})
        assert r.status_code == 200, r.text
        return r.json()
    seen = ask(f'ASK {{ ?i a sr:Instance ; sr:id "{iid}" }}')["boolean"]
    return seen, int(ask("SELECT (COUNT(?i) AS ?n) WHERE { ?i a sr:Instance }")["results"]["bindings"][0]["n"]["value"])


def test_a_removal_hides_the_instance_though_the_removing_owner_never_held_its_newest_copy(in_ring: InProcessRing):
    """As on the fault test's seed 702, the copy a replica shows is one the removing owner never held: a drain
    written on the first owner, which could not send it on to the second, is the newest copy; the first owner
    is then away, and the removal reaches the second alone. The removal is newer than both copies: the
    replicas leave the instance out at once, the remover's own included; and none shows it again once the first
    owner, back, has taken the removal and the others have read its change log to the end."""
    a, b, c = (in_ring.add(name) for name in "abc")
    iid = next(i for i in (f"i{n}" for n in range(1000)) if b.cluster.ring.owners(i, 2) == ["b", "c"])
    r = a.put(f"/v1/instances/{iid}", json={"id": iid, "service": "svc", "address": "127.0.0.1", "port": 10000,
                                             "tags": [], "ttl": 0})
    assert r.status_code == 201, r.text
    registered = in_ring.call(lambda: c.node.shard.held(iid).revision)

    in_ring.run(c.stop_listening())  # the drain is written on b, which cannot send it on to c
    assert b.put(f"/v1/instances/{iid}/heartbeat", json={"status": "draining"}).status_code == 200
    drained = in_ring.call(lambda: b.node.shard.held(iid).revision)
    assert drained > registered

    def shows_the_drain() -> bool:  # c reads b's change log, which carries b's copy
        in_ring.settle()
        return in_ring.call(lambda: c.cluster.copies.shown().get(iid, (0, 0))[0]) == drained
    wait_for(shows_the_drain, 20, "c's replica showing b's drained copy")

    in_ring.run(b.stop_listening())  # b away: the removal, dated by its coordinator, reaches c alone
    removal = in_ring.call(a.cluster.next_revision)
    assert in_ring.run(c.node.shard.delete_record(iid, removal))
    assert in_ring.call(lambda: c.node.shard.held(iid)) is None
    assert counted(c, iid) == (False, 0), "c's /sparql after its own removal"

    for node in (b, c):  # both back: b holds its drained copy until the removal reaches it
        in_ring.run(node.listen())

    def removed_everywhere() -> bool:
        in_ring.advance(0.5)
        if in_ring.call(lambda: b.node.shard.held(iid)) is not None:
            return False
        head = in_ring.call(lambda: b.node.changelog.cursor)
        return all(in_ring.call(lambda node=node: node.cluster.followers._followed.get("b", (0, 0))[1]) == head
                   for node in (a, c))
    wait_for(removed_everywhere, 30, "b taking the removal, and the others reading b's log to its end")
    for node in (a, b, c):
        assert counted(node, iid) == (False, 0), f"{node.name}'s /sparql once b is back"
