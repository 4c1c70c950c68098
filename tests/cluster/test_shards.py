"""The `Shard` interface, one table of cases run against both of its implementations: this node's own shard
(`LocalShard`, called in process) and the same node's shard reached as another node reaches it
(`RemoteShard`, over the node-to-node listener on a loopback port). Whatever a coordinator or a ring's repair
asks, both answer alike.

The node is a ring of one in this process (`support.inprocess_ring`: fake clock, etcd in memory) with the
case study's ontology; each case writes ids of its own, so the two runs of a case never meet.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import orjson
import pytest
from support.inprocess_ring import InProcessRing, RingNode

from semreg.cluster.peer import RemoteShard
from semreg.errors import NotFound
from semreg.rdf.terms import Tag
from semreg.reasoning.matching import DEFAULT_MATCH
from semreg.registry.digests import by_arc, digests
from semreg.registry.discovery import DiscoverQuery
from semreg.registry.instances import Registration
from semreg.registry.selector import Selector
from semreg.registry.shard import Removed, Shard
from semreg.registry.tag_union import distinct

EX = "http://example.org/obras#"
LIVRO_TERROR = Tag(EX + "Livro", EX + "temUmGenero", EX + "Terror")
OBRA_TERROR = Tag(EX + "Obra", EX + "temUmGenero", EX + "Terror")

Case = Callable[[Shard, str, RingNode], Awaitable[None]]
CASES: dict[str, Case] = {}


def case(fn: Case) -> Case:
    CASES[fn.__name__] = fn
    return fn


def reg(iid: str, *, port: int = 80, service: str = "svc", tags: tuple[Tag, ...] = (LIVRO_TERROR,),
        **kw: Any) -> Registration:
    return Registration(id=iid, service=service, address="10.0.0.1", port=port, ttl_s=0.0, tags=tags, **kw)


def own_tag(p: str) -> Tag:
    """A tag no other case registers."""
    return Tag(EX + "Livro", EX + "temUmGenero", f"http://example.org/{p}genre")


@case
async def a_copy_is_stored_once_and_a_newer_one_replaces_it(shard: Shard, p: str, node: RingNode) -> None:
    [(stored, created)] = await shard.put_records([(reg(p + "a"), 10)])
    assert created and stored is not None and (stored.id, stored.revision) == (p + "a", 10)
    assert await shard.put_records([(reg(p + "a"), 10)]) == [(None, False)]  # held already
    assert await shard.put_records([(reg(p + "a", port=81), 5)]) == [(None, False)]  # older
    [(stored, created)] = await shard.put_records([(reg(p + "a", port=81), 11)])
    assert not created and stored is not None and stored.revision == 11
    got = await shard.get(p + "a")
    assert got.revision == 11 and orjson.loads(got.view_json())["port"] == 81


@case
async def without_views_a_write_says_only_whether_it_was_new(shard: Shard, p: str, node: RingNode) -> None:
    assert await shard.put_records([(reg(p + "a"), 3), (reg(p + "b"), 4)], views=False) == [(None, True), (None, True)]
    assert (await shard.get(p + "b")).revision == 4


@case
async def a_removal_leaves_a_tombstone_that_reads_name(shard: Shard, p: str, node: RingNode) -> None:
    await shard.put_records([(reg(p + "a"), 10)])
    assert await shard.delete_record(p + "a", 11) is True
    assert await shard.delete_record(p + "a", 11) is False  # held already
    with pytest.raises(Removed) as removed:
        await shard.get(p + "a")
    assert removed.value.revision == 11
    assert await shard.put_records([(reg(p + "a"), 9)]) == [(None, False)]  # a copy older than its removal
    assert await shard.registered_by([p + "a"]) == {p + "a": (-11, None, "")}


@case
async def an_unknown_instance_is_not_found(shard: Shard, p: str, node: RingNode) -> None:
    with pytest.raises(NotFound) as raised:
        await shard.get(p + "nobody")
    assert not isinstance(raised.value, Removed)
    with pytest.raises(NotFound):
        await shard.heartbeat(p + "nobody", 0.5, None)
    assert await shard.registered_by([p + "nobody"]) == {}


@case
async def who_registered_an_instance_and_where(shard: Shard, p: str, node: RingNode) -> None:
    await shard.put_records([(reg(p + "a", owner="alice", environment="staging"), 10), (reg(p + "b"), 12)])
    assert await shard.registered_by([p + "a", p + "b", p + "c"]) == {p + "a": (10, "alice", "staging"),
                                                                       p + "b": (12, None, "default")}


@case
async def a_heartbeat_reports_load_and_status(shard: Shard, p: str, node: RingNode) -> None:
    await shard.put_records([(reg(p + "a"), 10)])
    beat: Any = await shard.heartbeat(p + "a", 0.25, None)
    assert (beat.id, beat.load, beat.status) == (p + "a", 0.25, "up")
    beat = await shard.heartbeat(p + "a", None, "draining")
    assert beat.status == "draining" and beat.revision > 10  # an admin status is written down: a new revision
    assert (await shard.get(p + "a")).status == "draining"


@case
async def a_route_is_counted_on_the_copy(shard: Shard, p: str, node: RingNode) -> None:
    await shard.put_records([(reg(p + "a"), 10)])
    await shard.record_route(p + "a")
    await shard.record_route(p + "a")
    assert (await shard.get(p + "a")).routes_since_report == 2


@case
async def a_status_newer_than_the_one_held_is_taken(shard: Shard, p: str, node: RingNode) -> None:
    await shard.put_records([(reg(p + "a"), 10)])
    version = 10**15
    assert await shard.apply_states([(p + "a", 10, version, "blocked", False, True)]) == 1
    assert await shard.apply_states([(p + "a", 10, version, "blocked", False, True)]) == 0  # held already
    got = await shard.get(p + "a")
    assert got.status == "blocked" and got.state_version == version


@case
async def the_instances_of_a_service(shard: Shard, p: str, node: RingNode) -> None:
    await shard.put_records([(reg(p + "a", service=p + "svc"), 10), (reg(p + "b", service=p + "svc"), 10),
                             (reg(p + "c", service=p + "other"), 10)])
    held = await shard.instances(p + "svc")
    assert sorted(i.id for i in held.items) == [p + "a", p + "b"]
    assert all(i.revision == 10 for i in held.items)


@case
async def a_discovery_part_matches_through_the_hierarchy(shard: Shard, p: str, node: RingNode) -> None:
    await shard.put_records([(reg(p + "a", service=p + "svc"), 10)])
    part = await shard.resolve(DiscoverQuery(OBRA_TERROR, DEFAULT_MATCH, service=p + "svc"))
    assert [(m[0], [i.id for i in group]) for m, group in part.matches] == [(LIVRO_TERROR, [p + "a"])]
    assert LIVRO_TERROR in part.matched_tags


@case
async def each_tag_with_its_holders(shard: Shard, p: str, node: RingNode) -> None:
    tag = own_tag(p)
    await shard.put_records([(reg(p + "a", tags=(tag, LIVRO_TERROR)), 10), (reg(p + "b", tags=(tag,)), 10)])
    held = await shard.holders([tag], with_tags=False)
    assert sorted(i.id for i in held.items[tag]) == [p + "a", p + "b"]
    every = await shard.tag_holders(Selector())
    assert set(every.items[tag]) == {p + "a", p + "b"} and p + "a" in set(every.items[LIVRO_TERROR])


@case
async def the_tags_matching_a_pattern(shard: Shard, p: str, node: RingNode) -> None:
    await shard.put_records([(reg(p + "a"), 10)])
    matched = await shard.matching_tags(OBRA_TERROR, DEFAULT_MATCH)
    assert LIVRO_TERROR in [m[0] for m in matched]
    assert OBRA_TERROR not in [m[0] for m in matched]  # registered by nobody


@case
async def whether_a_registered_tag_names_a_term(shard: Shard, p: str, node: RingNode) -> None:
    await shard.put_records([(reg(p + "a", tags=(own_tag(p),)), 10)])
    assert await shard.names_term(f"http://example.org/{p}genre") is True
    assert await shard.names_term(f"http://example.org/{p}nothing") is False


@case
async def revisions_records_and_copies_from_another_owner(shard: Shard, p: str, node: RingNode) -> None:
    await shard.put_records([(reg(p + "a"), 10), (reg(p + "b"), 10)])
    await shard.delete_record(p + "b", 11)
    assert await shard.inventory([p + "a", p + "b", p + "c"]) == {p + "a": 10, p + "b": -11}
    whole = await shard.inventory()
    assert (whole[p + "a"], whole[p + "b"]) == (10, -11) and p + "c" not in whole
    exported = {rec["id"]: (rec, revision) for rec, revision in await shard.export([p + "a", p + "b", p + "c"])}
    assert sorted(exported) == [p + "a", p + "b"]
    assert exported[p + "a"][1] == 10 and exported[p + "a"][0]["port"] == 80
    assert exported[p + "b"][1] == 11 and exported[p + "b"][0]["deleted"] is True
    assert await shard.restore_records(list(exported.values())) == 0  # held already
    newer = {**exported[p + "a"][0], "id": p + "c", "port": 82}
    assert await shard.restore_records([(newer, 3), ({"id": p + "d", "deleted": True, "deleted_at": 0.0}, 4)]) == 2
    assert await shard.inventory([p + "c", p + "d"]) == {p + "c": 3, p + "d": -4}
    assert orjson.loads((await shard.get(p + "c")).view_json())["port"] == 82


@case
async def a_copy_from_another_owner_says_its_admin_status_even_when_it_is_up(shard: Shard, p: str,
                                                                            node: RingNode) -> None:
    """A record is the whole of a copy: one written at a newer revision without an admin status (its
    maintenance ended) brings a drained copy back up, unlike a client's registration, which keeps a drain."""
    [(rec, _)] = await shard.export([(await shard.put_records([(reg(p + "a"), 10)]))[0][0].id])
    assert await shard.restore_records([({**rec, "admin_status": "draining"}, 11)]) == 1
    assert orjson.loads((await shard.get(p + "a")).view_json())["status"] == "draining"
    assert await shard.restore_records([(rec, 12)]) == 1
    assert orjson.loads((await shard.get(p + "a")).view_json())["status"] == "up"


@case
async def a_copy_another_hand_off_is_storing_is_waited_for_so_a_state_made_at_it_is_taken(shard: Shard, p: str,
                                                                                        node: RingNode) -> None:
    """Two owners hand over the same record at once (a status change's coordinator, and the owner that made it,
    which sends the state next): the second is not stored twice, but answered once the first is held, so the
    state made at that revision is taken, not dropped as a state of another revision."""
    [(rec, _)] = await shard.export([(await shard.put_records([(reg(p + "a"), 10)]))[0][0].id])
    drained = ({**rec, "admin_status": "draining"}, 11)
    first = asyncio.ensure_future(shard.restore_records([drained]))
    await asyncio.sleep(0)  # on its way (here: being stored on the writer thread)
    await shard.restore_records([drained])
    assert await shard.apply_states([(p + "a", 11, 10**15, "draining", True, True)]) == 1
    assert await first == 1
    got = await shard.get(p + "a")
    assert (got.revision, got.status) == (11, "critical")  # drained, and its lease lapsed where it runs


@case
async def a_status_is_written_down_at_the_revision_its_request_was_dated_with(shard: Shard, p: str,
                                                                             node: RingNode) -> None:
    """An owner that carries a status out late (after a removal dated 35 elsewhere) writes it down at the
    revision its coordinator dated the request with, older than the removal; one dated before a newer
    registration goes just after that registration, which it then outlives no more than a microsecond."""
    await shard.put_records([(reg(p + "a"), 10 << 10)])
    assert (await shard.heartbeat(p + "a", None, "draining", 20 << 10)).revision == 20 << 10
    assert (await shard.heartbeat(p + "a", None, "draining", 21 << 10)).revision == 20 << 10  # no change
    await shard.put_records([(reg(p + "a"), 30 << 10)])
    after = (await shard.set_status(p + "a", "up", None, 25 << 10)).revision
    assert after >> 10 == 31  # a microsecond later, in this node's slot
    assert orjson.loads((await shard.get(p + "a")).view_json())["status"] == "up"
    [(rec, revision)] = await shard.export([p + "a"])
    assert revision == after and "admin_status" not in rec


@case
async def digests_of_what_is_held_per_arc(shard: Shard, p: str, node: RingNode) -> None:
    ids = [f"{p}{n}" for n in range(20)]
    await shard.put_records([(reg(iid), 10) for iid in ids])
    ring = node.cluster.ring
    arcs = sorted(by_arc(ring, ids))
    found = await shard.digests(ring, arcs)
    assert found == digests(ring, await shard.inventory(), arcs)
    assert found is not None and sum(found[a][0] for a in arcs) >= len(ids)


@case
async def the_counts_of_the_instances_whose_lease_runs_here(shard: Shard, p: str, node: RingNode) -> None:
    e1, e2 = p + "one", p + "two"
    await shard.put_records([(reg(p + "a", service=p + "s1", environment=e1), 10),
                             (reg(p + "b", service=p + "s2", environment=e1, tags=(LIVRO_TERROR, own_tag(p))), 10),
                             (reg(p + "c", service=p + "s1", environment=e2), 10)])
    await shard.apply_states([(p + "b", 10, 10**15, "blocked", False, True)])
    tally = await shard.counts(frozenset({e1, e2, p + "none"}))
    assert tally.by_status == {"up": 2, "blocked": 1, "draining": 0, "critical": 0}
    assert tally.services == {p + "s1": 2, p + "s2": 1}
    assert tally.environments == {e1: 2, e2: 1} and tally.instances == 3
    assert distinct([tally.tags]) == 2 and set(tally.ring) <= {"n1"}  # the ring of one it counted on
    assert distinct([(await shard.counts(frozenset({e2}))).tags]) == 1
    await shard.delete_record(p + "c", 11)
    everything = await shard.counts(None)
    assert everything.environments[e1] == 2 and e2 not in everything.environments
    assert everything.instances == sum(everything.by_status.values()) >= 2


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcessRing, RingNode]]:
    ring = InProcessRing(tmp_path_factory.mktemp("shards"))
    try:
        n1 = ring.add("n1")
        ring.upload(n1)
        yield ring, n1
    finally:
        ring.close()


@pytest.fixture(params=["local", "remote"])
def shard(request: pytest.FixtureRequest, node: tuple[InProcessRing, RingNode]) -> Iterator[tuple[str, Shard]]:
    ring, n1 = node
    if request.param == "local":
        own: Shard = n1.node.shard
        yield "local", own
        return
    peer: Shard = ring.call(lambda: RemoteShard("n1", n1.url, ring.secret.read_text().strip()))
    try:
        yield "remote", peer
    finally:
        assert isinstance(peer, RemoteShard)
        ring.run(peer.close())


@pytest.mark.parametrize("name", sorted(CASES))
def test_both_shards_answer_alike(name: str, shard: tuple[str, Shard], node: tuple[InProcessRing, RingNode]) -> None:
    ring, n1 = node
    variant, under_test = shard
    ring.run(CASES[name](under_test, f"{variant}-{name[:12]}-", n1))
