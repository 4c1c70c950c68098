"""An admin status (a drain, maintenance) is acknowledged as a write is: the owner that decides it (the first to
answer, the one running the lease) writes it down, and the answer waits until enough owners hold its record
(`semreg.registry.writes.spread_status`). So an owner cut off right after deciding, and whose copy is then lost,
takes no acknowledged status with it; a change short of enough owners is a 503 whose record still reaches the
owner that missed it. A renewal, or a status that changes nothing, goes to the one owner alone, as before.

Rings of apps in this process (`support.inprocess_ring`), on one fake clock moved at most a few seconds (for a
member to be asked again): no lease lapses, no periodic anti-entropy pass runs, so only what a request itself
carried, or a hint it left, is where it is.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.inprocess_ring import InProcessRing, RingNode
from support.server import wait_for

from semreg.cluster.antientropy import SYNC_INTERVAL_S
from semreg.registry.shard import ShardUnavailable


@pytest.fixture
def three(tmp_path: Path) -> Iterator[InProcessRing]:
    """Three nodes, each instance on all three."""
    ring = InProcessRing(tmp_path / "ring", replicas=3)
    try:
        for name in "abc":
            ring.add(name, consul_listen="127.0.0.1:8500")
        assert ring.converged()
        yield ring
    finally:
        ring.close()


def owned_by(node: RingNode, owners: list[str]) -> str:
    """An instance id whose owners on `node`'s ring are `owners`, in that order (the first runs its lease)."""
    ring = node.cluster.ring
    return next(i for i in (f"i{n}" for n in range(10_000)) if ring.owners(i, len(owners)) == owners)


def register(ring: InProcessRing, node: RingNode, iid: str) -> None:
    """Through `node`; back once every member holds it (the answer came once two did)."""
    r = node.put(f"/v1/instances/{iid}", json={"id": iid, "service": "svc", "address": "127.0.0.1", "port": 10000,
                                               "tags": [], "ttl": 60})
    assert r.status_code == 201, r.text
    wait_for(lambda: ring.settle() or all(admin_status(ring, n, iid) == "up" for n in ring.nodes.values()), 10,
             "every member holding the registration")


def cut_off(ring: InProcessRing, node: RingNode) -> None:
    """`node` sends no status change on to the other members any more (as an owner stopped right after it
    wrote one down): what it sends them fails as a member that does not answer."""
    async def unanswered(*args: Any, **kw: Any) -> Any:
        raise ShardUnavailable("cut off", "sent nothing")

    def cut() -> None:
        for peer in node.cluster.placement.peers.values():
            peer.restore_records = unanswered  # type: ignore[method-assign]
            peer.apply_states = unanswered  # type: ignore[method-assign]
    ring.call(cut)


def lose(ring: InProcessRing, node: RingNode, iid: str) -> None:
    """`node` no longer answers, and holds no copy of `iid` when it does."""
    ring.run(node.stop_listening())
    assert ring.run(node.node.shard.drop([iid])) == 1


def admin_status(ring: InProcessRing, node: RingNode, iid: str) -> str | None:
    inst = ring.call(lambda: node.node.shard.held(iid))
    return None if inst is None else inst.admin_status


def maintenance(ring: InProcessRing, node: RingNode, iid: str, enable: str) -> Any:
    async def put() -> Any:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(node.node.consul_app, client=("127.0.0.1", 40002)),
                                     base_url=f"http://{node.name}.consul.test") as client:
            return await client.put(f"/v1/agent/service/maintenance/{iid}", params={"enable": enable})
    return ring.run(put())


def drain(ring: InProcessRing, node: RingNode, iid: str, how: str) -> Any:
    if how == "heartbeat":
        return node.put(f"/v1/instances/{iid}/heartbeat", json={"status": "draining"})
    return maintenance(ring, node, iid, "true")


@pytest.mark.parametrize("how", ["heartbeat", "maintenance"])
def test_an_acknowledged_drain_outlives_the_lease_owner_that_decided_it(three: InProcessRing, how: str) -> None:
    a, b, c = (three.nodes[n] for n in "abc")
    iid = owned_by(b, ["a", "b", "c"])
    register(three, c, iid)
    cut_off(three, a)
    r = drain(three, b, iid, how)  # through another owner: a, running the lease, decides it
    assert r.status_code == 200, r.text
    # answered once two owners held it: a, and b or c (the send to the other may still be on its way)
    assert admin_status(three, a, iid) == "draining" and "draining" in {admin_status(three, n, iid) for n in (b, c)}
    lose(three, a, iid)  # a is stopped before its own sends could leave, and its copy is gone
    wait_for(lambda: three.settle() or admin_status(three, b, iid) == admin_status(three, c, iid) == "draining", 10,
             "the drain on both other owners")
    for node in (b, c):
        r = node.get(f"/v1/instances/{iid}")
        assert r.status_code == 200 and r.json()["status"] == "draining", r.text


def test_a_drain_whose_deciding_owner_let_go_of_its_copy_at_once_is_not_acknowledged(three: InProcessRing) -> None:
    """The owner that decided a drain lets go of its copy before the coordinator reads it (an anti-entropy pass of
    a ring it is no owner on, under way meanwhile): nobody holds the drain, so it is a 503, and asked again, the
    owners that hold the instance take it."""
    a, b, c = (three.nodes[n] for n in "abc")
    iid = owned_by(b, ["a", "b", "c"])
    register(three, c, iid)
    shard = a.node.shard
    beat = shard.heartbeat

    async def beat_then_let_go(instance_id: str, *args: Any) -> Any:
        inst = await beat(instance_id, *args)
        await shard.drop([instance_id])
        return inst
    three.call(lambda: setattr(shard, "heartbeat", beat_then_let_go))
    r = b.put(f"/v1/instances/{iid}/heartbeat", json={"status": "draining"})
    assert r.status_code == 503 and "try again" in r.json()["error"], r.text
    assert admin_status(three, a, iid) is None and admin_status(three, b, iid) == "up"
    r = b.put(f"/v1/instances/{iid}/heartbeat", json={"status": "draining"})  # a holds nothing now: b decides
    assert r.status_code == 200, r.text
    assert admin_status(three, b, iid) == "draining"


def count_calls(ring: InProcessRing) -> Counter[tuple[str, str]]:
    """Count, per node, the calls of its shard that a renewal or a status change may make (from any node)."""
    calls: Counter[tuple[str, str]] = Counter()
    for name, node in ring.nodes.items():
        shard = node.node.shard
        for what in ("heartbeat", "set_status", "export", "restore_records"):
            answer = getattr(shard, what)

            async def counted(*args: Any, name: str = name, what: str = what, answer: Any = answer) -> Any:
                calls[name, what] += 1
                return await answer(*args)
            ring.call(lambda shard=shard, what=what, counted=counted: setattr(shard, what, counted))
    return calls


def idle(ring: InProcessRing) -> bool:
    """Whether no node has sends on their way: a status change's (`Statuses`), or an acknowledged write's."""
    ring.settle()
    return ring.call(lambda: all(t.done() for n in ring.nodes.values() for t in n.cluster.statuses.tasks())
                     and not any(len(n.node.coordinator.stragglers) for n in ring.nodes.values()))


def test_a_renewal_or_an_unchanged_status_goes_to_the_lease_owner_alone(three: InProcessRing) -> None:
    a, b, c = (three.nodes[n] for n in "abc")
    iid = owned_by(b, ["a", "b", "c"])
    register(three, c, iid)
    calls = count_calls(three)
    assert b.put(f"/v1/instances/{iid}/heartbeat", json={"load": 0.5}).status_code == 200
    assert b.put(f"/v1/instances/{iid}/heartbeat", json={"status": "up"}).status_code == 200
    assert maintenance(three, b, iid, "false").status_code == 200  # no drain to end
    three.settle()
    assert calls == Counter({("a", "heartbeat"): 2, ("a", "set_status"): 1})
    calls.clear()
    assert b.put(f"/v1/instances/{iid}/heartbeat", json={"status": "draining"}).status_code == 200
    wait_for(lambda: idle(three), 10, "the drain's sends done")
    assert calls["b", "restore_records"] and calls["c", "restore_records"]  # the change, on every owner
    calls.clear()
    assert b.put(f"/v1/instances/{iid}/heartbeat", json={"status": "draining"}).status_code == 200  # held already
    assert maintenance(three, b, iid, "true").status_code == 200
    three.settle()
    assert calls == Counter({("a", "heartbeat"): 1, ("a", "set_status"): 1})


def test_a_drain_short_of_enough_owners_is_a_503_and_reaches_the_missing_owner_when_it_answers(tmp_path: Path
                                                                                             ) -> None:
    ring = InProcessRing(tmp_path / "ring", replicas=2)
    try:
        a, b = ring.add("a"), ring.add("b")
        iid = owned_by(a, ["a", "b"])
        register(ring, a, iid)
        ring.run(b.stop_listening())  # the other owner, and no member to stand in for it
        r = a.put(f"/v1/instances/{iid}/heartbeat", json={"status": "draining"})
        assert r.status_code == 503 and int(r.headers["Retry-After"]) >= 1 and "try again" in r.json()["error"], r.text
        assert admin_status(ring, a, iid) == "draining" and admin_status(ring, b, iid) == "up"
        ring.run(b.listen())  # once b answers a again (a's follower of b asks again), what it missed follows
        back = ring.clock.monotonic()
        wait_for(lambda: ring.advance(0.5) or admin_status(ring, b, iid) == "draining", 10, "the drain on b")
        assert ring.clock.monotonic() - back < SYNC_INTERVAL_S  # by a hint, not by a pass of anti-entropy
    finally:
        ring.close()
