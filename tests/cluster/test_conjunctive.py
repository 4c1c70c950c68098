"""Conjunctive discovery on a ring (API.md, Discovery; Cluster): each owner evaluates the conjunction over the
instances it holds (an instance and all its tags live on each of its owners), and whichever node is asked
answers as one node holding every instance does, a saved conjunctive query included. Nodes as apps in this
process, on one fake clock and one etcd in memory; the one node beside them likewise."""
from __future__ import annotations

import itertools

from support.inprocess import InProcess
from support.inprocess_ring import InProcessRing
from support.paths import ONTOLOGIES
from support.server import wait_for

OBRAS = (ONTOLOGIES / "obras.ttl").read_bytes()
KINDS = ["Livro", "Filme", "Pintura", "Romance"]
QUESTIONS = [{"all": ["ex:Obra ex:temUmGenero ex:Terror", "ex:Obra a ex:Obra"]},
             {"all": ["ex:Obra ex:temUmGenero ex:Genero", "ex:Obra a ex:Livro"], "match": "all", "limit": 3},
             {"all": ["ex:Obra ex:temUmGenero ex:Terror"], "provided": ["ex:Obra a ex:Romance"], "match": "all"}]


def registrations() -> list[tuple[str, dict]]:
    """Twelve instances over the kinds, each with a genre tag and some with a type tag."""
    out = []
    for n, (kind, typed) in enumerate(itertools.islice(itertools.product(KINDS, (True, False, True)), 12)):
        tags = [f"ex:{kind} ex:temUmGenero ex:Terror"] + ([f"ex:Obra a ex:{KINDS[(n + 1) % 4]}"] if typed else [])
        out.append((f"i{n:02d}", {"service": kind.lower(), "address": f"10.0.0.{n + 1}", "port": 80, "ttl": 0,
                                  "tags": tags}))
    return out


def ranked(body: dict) -> tuple:
    """What an answer says, without the live fields a node's clock writes."""
    return (body["query"], body["matches"], body["truncated"],
            [(i["id"], i["status"], i["match"]) for i in body["instances"]])


def test_a_ring_answers_a_conjunction_as_one_node(in_ring: InProcessRing) -> None:
    n1, n2, n3 = (in_ring.add(name) for name in ("n1", "n2", "n3"))
    pending = in_ring.start(n1.http.put("/v1/ontologies/obras", content=OBRAS, headers={"Content-Type": "text/turtle"}))
    while not pending.done():  # answered once every member applied it, waiting on the ring's clock
        in_ring.advance(0.1, step=0.1)
    assert pending.result().status_code == 201
    with InProcess() as alone:
        one = alone.client()
        assert one.put("/v1/ontologies/obras", content=OBRAS, headers={"Content-Type": "text/turtle"}).status_code == 201
        for iid, body in registrations():
            assert n2.put(f"/v1/instances/{iid}", json=body).status_code == 201
            assert one.put(f"/v1/instances/{iid}", json=body).status_code == 201
        for question in QUESTIONS:
            expected = one.post("/v1/discover", json=question)
            assert expected.status_code == 200 and expected.json()["instances"], expected.text
            for node in (n1, n2, n3):
                got = node.request("POST", "/v1/discover", json=question)
                assert got.status_code == 200, got.text
                assert ranked(got.json()) == ranked(expected.json())
        r = n3.put("/v1/queries/both", json=QUESTIONS[0])
        assert r.status_code == 201, r.text
        wait_for(lambda: (in_ring.settle(), all(n.get("/v1/queries/both").status_code == 200
                                                for n in (n1, n2, n3)))[1], 10, "the query on every node")
        expected = one.post("/v1/discover", json=QUESTIONS[0]).json()
        for node in (n1, n2, n3):
            assert ranked(node.get("/v1/queries/both/discover").json()) == ranked(expected)
