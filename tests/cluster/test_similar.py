"""The `similar` degree on a ring (API.md, Discovery; Cluster): whichever node is asked, a question naming
`similar` (`GET /v1/discover` and `POST /v1/discover`, with `min_similarity` and `provided`) answers as one node
holding every instance does: the near misses, their similarity and the ranking within each degree. Nodes as apps
in this process, on one fake clock and one etcd in memory; the one node beside them likewise."""
from __future__ import annotations

from support.inprocess import InProcess
from support.inprocess_ring import InProcessRing

ONTOLOGY = b"""@prefix : <http://example.org/f#> . @prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
:Film rdfs:subClassOf :Media . :ComedyFilm rdfs:subClassOf :Film . :ActionFilm rdfs:subClassOf :Film .
:ScienceFictionFilm rdfs:subClassOf :Film . :RomanticComedyFilm rdfs:subClassOf :ComedyFilm .
:Price a owl:Class . :EuroPrice rdfs:subClassOf :Price . :DollarPrice rdfs:subClassOf :Price . :Camera a owl:Class .
:out a owl:ObjectProperty . :in a owl:ObjectProperty .
"""
EX = "http://example.org/f#"
FILMS = ["ComedyFilm", "ActionFilm", "ScienceFictionFilm", "RomanticComedyFilm", "Film", "Camera"]
PRICES = ["Price", "EuroPrice", "DollarPrice"]
INPUTS = ["Camera", "Price", "Film"]


def tag(term: str, predicate: str) -> dict[str, str]:
    return {"s": EX + term, "p": EX + predicate}


def registrations() -> list[tuple[str, dict]]:
    """Eighteen instances: an output film and price each, an input for most."""
    out = []
    for n in range(18):
        tags = [tag(FILMS[n % len(FILMS)], "out"), tag(PRICES[n % len(PRICES)], "out")]
        if n % 4:
            tags.append(tag(INPUTS[n % len(INPUTS)], "in"))
        out.append((f"i{n:02d}", {"service": "films", "address": f"10.0.0.{n + 1}", "port": 80, "ttl": 0, "tags": tags}))
    return out


GETS = [{"s": EX + "ComedyFilm", "p": EX + "out", "match": "all,similar"},
        {"s": EX + "ActionFilm", "p": EX + "out", "match": "similar", "min_similarity": "0.5"},
        {"s": EX + "EuroPrice", "p": EX + "out", "match": "exact,similar", "limit": "8"}]
POSTS = [{"all": [tag("ComedyFilm", "out"), tag("EuroPrice", "out")], "match": "all,similar"},
         {"all": [tag("ActionFilm", "out"), tag("Price", "out")], "match": "all,similar",
          "provided": [tag("Camera", "in")]},
         {"all": [tag("ScienceFictionFilm", "out")], "match": "narrower,similar", "min_similarity": 0.4, "limit": 5}]


def ranked(body: dict) -> tuple:
    """What an answer says, without the live fields a node's clock writes."""
    return (body["query"], body["matches"], body["truncated"],
            [(i["id"], i["status"], i["match"]) for i in body["instances"]])


def test_a_ring_answers_similar_questions_as_one_node(in_ring: InProcessRing) -> None:
    n1, n2, n3 = (in_ring.add(name) for name in ("n1", "n2", "n3"))
    pending = in_ring.start(n1.http.put("/v1/ontologies/films", content=ONTOLOGY,
                                        headers={"Content-Type": "text/turtle"}))
    while not pending.done():  # answered once every member applied it, waiting on the ring's clock
        in_ring.advance(0.1, step=0.1)
    assert pending.result().status_code == 201
    with InProcess() as alone:
        one = alone.client()
        assert one.put("/v1/ontologies/films", content=ONTOLOGY,
                       headers={"Content-Type": "text/turtle"}).status_code == 201
        for iid, body in registrations():
            assert n2.put(f"/v1/instances/{iid}", json=body).status_code == 201
            assert one.put(f"/v1/instances/{iid}", json=body).status_code == 201
        for params in GETS:
            expected = one.get("/v1/discover", params=params)
            assert expected.status_code == 200, expected.text
            assert any(i["match"]["degree"] == "similar" for i in expected.json()["instances"])
            for node in (n1, n2, n3):
                got = node.request("GET", "/v1/discover", params=params)
                assert got.status_code == 200, got.text
                assert ranked(got.json()) == ranked(expected.json())
        for question in POSTS:
            expected = one.post("/v1/discover", json=question)
            assert expected.status_code == 200, expected.text
            assert any(i["match"]["degree"] == "similar" for i in expected.json()["instances"])
            for node in (n1, n2, n3):
                got = node.request("POST", "/v1/discover", json=question)
                assert got.status_code == 200, got.text
                assert ranked(got.json()) == ranked(expected.json())
