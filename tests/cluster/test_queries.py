"""Saved queries on every node of a ring (API.md, Saved queries; Cluster): saved or removed through one node,
they are there on every other one, answer the same through each, and a node that joins later catches up.
Nodes as apps in this process, on one fake clock and one etcd in memory."""
from __future__ import annotations

from support.inprocess_ring import InProcessRing
from support.server import wait_for

QUERY = {"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}


def saved_everywhere(in_ring: InProcessRing, name: str) -> bool:
    return all(n.get(f"/v1/queries/{name}").status_code == 200 for n in in_ring.nodes.values())


def test_a_saved_query_is_on_every_node_and_answers_the_same_through_each(in_ring: InProcessRing) -> None:
    n1, n2, n3 = (in_ring.add(name) for name in ("n1", "n2", "n3"))
    in_ring.upload(n1)
    for k, kind in enumerate(("Livro", "Filme", "Pintura", "Livro")):
        r = n1.put(f"/v1/instances/i{k}", json={"service": kind.lower(), "address": f"10.0.0.{k + 1}", "port": 80,
                                               "ttl": 0, "tags": [f"ex:{kind} ex:temUmGenero ex:Terror"]})
        assert r.status_code == 201, r.text
    r = n2.put("/v1/queries/horror", json=QUERY)
    assert r.status_code == 201, r.text
    wait_for(lambda: (in_ring.settle(), saved_everywhere(in_ring, "horror"))[1], 10, "the query on every node")
    assert len({n.get("/v1/queries/horror").text for n in (n1, n2, n3)}) == 1
    answers = [sorted(i["id"] for i in n.get("/v1/queries/horror/discover").json()["instances"]) for n in (n1, n2, n3)]
    assert answers == [["i0", "i1", "i2", "i3"]] * 3
    targets = [sorted(t for g in n.get("/v1/prometheus/targets", params={"query": "horror"}).json()
                      for t in g["targets"]) for n in (n1, n2, n3)]
    assert targets[0] == targets[1] == targets[2] and len(targets[0]) == 4

    n4 = in_ring.add("n4")  # joins later: catches up before it is ready
    assert n4.get("/v1/queries/horror").status_code == 200

    assert n3.delete("/v1/queries/horror").status_code == 204
    wait_for(lambda: (in_ring.settle(), all(n.get("/v1/queries/horror").status_code == 404
                                            for n in in_ring.nodes.values()))[1], 10, "the query gone everywhere")
