"""Fencing, on a ring of apps in this process (one fake clock, etcd in memory, `support.inprocess_ring`): a node
never acknowledges a write on a ring the others moved past, takes none from the moment it knows its lease
lapsed until it is back on the ring, and an outage of etcd itself stops no write."""
from __future__ import annotations

from typing import Any

import pytest
from support.inprocess_ring import InProcessRing, RingNode

from semreg.cluster.peer import RemoteShard
from semreg.cluster.ring import Ring
from semreg.registry.shard import StaleRing


def body(iid: str) -> dict[str, Any]:
    return {"id": iid, "service": "svc", "address": "127.0.0.1", "port": 10000, "tags": [], "ttl": 0}


def register(node: RingNode, iid: str) -> Any:
    return node.put(f"/v1/instances/{iid}", json=body(iid))


def owned_by_all(members: list[str], k: int = 2, prefix: str = "i") -> str:
    """An instance id whose owners on the ring of `members` are its first `k` members."""
    ring = Ring(members)
    return next(i for i in (f"{prefix}{n}" for n in range(1000)) if sorted(ring.owners(i, k)) == members[:k])


def refused_for_now(r: Any, says: str) -> None:
    assert r.status_code == 503, r.text
    assert int(r.headers["Retry-After"]) >= 1 and says in r.json()["error"], r.text


def test_an_outage_of_etcd_itself_stops_no_write(in_ring: InProcessRing) -> None:
    n1, n2 = in_ring.add("n1"), in_ring.add("n2")
    assert register(n1, "before").status_code == 201
    in_ring.call(in_ring.etcd.fail)
    in_ring.advance(30)  # longer than a lease
    assert n1.readyz() == (200, {**n1.readyz()[1], "status": "degraded"})
    assert register(n1, "during").status_code == 201
    assert n2.delete("/v1/instances/before").status_code == 204
    in_ring.call(in_ring.etcd.recover)
    in_ring.advance(5)
    assert in_ring.converged() and n1.readyz()[1]["status"] == n2.readyz()[1]["status"] == "ready"
    assert register(n2, "after").status_code == 201


def test_a_node_cut_off_past_its_lease_has_its_writes_refused_then_is_fenced_until_back_on_the_ring(
        in_ring: InProcessRing) -> None:
    n1, n2 = in_ring.add("n1"), in_ring.add("n2")
    first, second = owned_by_all(["n1", "n2"], prefix="a"), owned_by_all(["n1", "n2"], prefix="b")
    assert register(n1, first).status_code == 201
    in_ring.call(n1.kv.cut)
    in_ring.advance(12)  # past n1's lease: n2 takes the ring without it
    assert n2.cluster.ring.members == ("n2",)
    assert n1.cluster.ring.members == ("n1", "n2") and n1.cluster.degraded  # n1 cannot know it yet
    # n1 still places on its old ring; n2, at a newer revision with another ring, refuses its share
    refused_for_now(register(n1, second), "owners a write needs")
    in_ring.call(lambda: n1.kv.hold("grant"))  # the new lease, once n1 knows, waits: the fence can be seen
    in_ring.call(n1.kv.mend)
    in_ring.advance(3)  # etcd answers n1 again: its lease is gone
    refused_for_now(register(n1, second), "membership lease lapsed")
    refused_for_now(n1.delete(f"/v1/instances/{first}"), "membership lease lapsed")
    status, ready = n1.readyz()
    assert status == 503 and ready["status"] == "recovering"
    assert ready["error"].startswith("its membership lease lapsed: rejoining the ring")
    in_ring.call(lambda: n1.kv.release("grant"))
    in_ring.settle()
    assert in_ring.converged() and n1.readyz()[1]["status"] == "ready"
    assert register(n1, second).status_code in (200, 201)  # n1 kept the copy of the write it could not finish
    assert n1.delete(f"/v1/instances/{first}").status_code == 204


def test_a_write_on_a_ring_the_others_moved_past_is_refused_and_the_sender_reads_the_list_again(
        in_ring: InProcessRing) -> None:
    n1, n2 = in_ring.add("n1"), in_ring.add("n2")
    in_ring.call(n1.kv.mute_watches)  # n1's watch goes quiet: it misses the next member
    in_ring.add("n3")
    assert n1.cluster.ring.members == ("n1", "n2") and sorted(n2.cluster.ring.members) == ["n1", "n2", "n3"]
    iid = owned_by_all(["n1", "n2"])
    refused_for_now(register(n1, iid), "owners a write needs")  # n2 refused it: n1's ring is stale
    assert "n2" not in n1.cluster.membership.suspects  # it answered: a refusal, not a failure
    in_ring.settle()
    assert sorted(n1.cluster.ring.members) == ["n1", "n2", "n3"]  # n1 read the member list again
    assert register(n1, iid).status_code in (200, 201)
    in_ring.remove("n3")  # n1 misses this one too
    assert n1.cluster.ring.members != n2.cluster.ring.members
    refused_for_now(n1.delete(f"/v1/instances/{iid}"), "owners it needs")
    in_ring.settle()
    assert n1.cluster.ring.members == n2.cluster.ring.members == ("n1", "n2")
    # n1 kept its copy of the removal it could not finish and hints it to n2: the retry finds the instance
    # still on n2 (204) or the hint there first (404, it is gone); either way it is gone on both
    assert n1.delete(f"/v1/instances/{iid}").status_code in (204, 404)
    in_ring.settle()
    assert n1.get(f"/v1/instances/{iid}").status_code == n2.get(f"/v1/instances/{iid}").status_code == 404


def test_a_member_refuses_a_write_sent_on_a_ring_it_moved_past_and_takes_one_from_a_sender_ahead(
        in_ring: InProcessRing) -> None:
    n1 = in_ring.add("n1")
    view = n1.cluster.view
    items = {"items": [[{"id": "x", "service": "svc", "address": "127.0.0.1", "port": 1, "tags": []}, 5]]}
    secret = {"X-Semreg-Cluster": in_ring.secret.read_text().strip()}

    def write(sent: list[int] | None, path: str = "/internal/v1/records") -> Any:
        return n1.internal_request("POST", path, json={**items, **({"view": sent} if sent else {})}, headers=secret)

    other = Ring(["n1", "n0"]).checksum
    r = write([view.revision - 1, other])
    assert r.status_code == 409 and "one this node moved past" in r.json()["error"]
    r = n1.internal_request("POST", "/internal/v1/delete", json={"items": [["x", 6]], "view": [view.revision - 1, other]},
                   headers=secret)
    assert r.status_code == 409
    assert write([view.revision - 1, n1.cluster.ring.checksum]).status_code == 200  # same ring: fine
    assert write(None).status_code == 200  # a node that sends no view
    reads = n1.kv.calls["get_prefix"]
    assert write([view.revision + 5, other]).status_code == 200  # the sender is ahead: n1 reads the list
    in_ring.settle()
    assert n1.kv.calls["get_prefix"] > reads


def test_a_member_s_refusal_is_a_stale_ring_to_the_sender_who_reads_the_list_again(in_ring: InProcessRing) -> None:
    n1 = in_ring.add("n1")
    told: list[bool] = []

    async def send() -> None:
        peer = RemoteShard("n1", n1.url, in_ring.secret.read_text().strip(), view=lambda: (1, Ring(["n0"]).checksum),
                           on_stale=lambda: told.append(True))
        try:
            with pytest.raises(StaleRing, match="n1 refused the write: the sender's ring"):
                await peer.delete_record("x", 7)
        finally:
            await peer.close()

    in_ring.run(send())
    assert told == [True]
