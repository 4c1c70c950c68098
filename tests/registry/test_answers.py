"""Discovery answers stay small: each instance once, with its best match and without its tags, so an
answer grows with what it names and not with how many tags each instance carries (API.md, Discovery)."""
from __future__ import annotations

import gc
import random
import threading
from pathlib import Path

import httpx
import pytest
from support.inprocess import InProcess
from support.paths import ONTOLOGIES

from semreg.http import fastpath
from semreg.registry import catalogue, watch
from semreg.registry.discovery import MATCHES_LISTED

EX = "http://example.org/obras#"
ANY = "https://w3id.org/semreg#Any"
Q = {"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}


def put(c, iid, tags, **kw):
    r = c.put(f"/v1/instances/{iid}", json={"service": "s", "address": "10.0.0.1", "port": 80, "ttl": 0,
                                           "tags": tags, **kw})
    assert r.status_code in (200, 201), r.text
    return r


def filler(n: int) -> list[dict[str, str]]:
    """`n` tags that match nothing the tests ask."""
    return [{"s": f"http://example.org/other#C{k}", "p": f"http://example.org/other#p{k % 7}"} for k in range(n)]


def test_the_answer_does_not_grow_with_the_tags_an_instance_carries(api):
    put(api, "many", ["ex:Livro ex:temUmGenero ex:Terror", *filler(9)])
    small = api.get("/v1/discover", params=Q).content
    put(api, "many", ["ex:Livro ex:temUmGenero ex:Terror", *filler(999)])
    large = api.get("/v1/discover", params=Q).content
    assert len(large) == len(small) < 2_000
    full = api.get("/v1/discover", params={**Q, "tags": "true"}).json()["instances"][0]
    assert len(full["tags"]) == 1000 and full["tags"] == api.get("/v1/instances/many").json()["tags"]
    api.delete("/v1/instances/many")


def test_each_view_names_its_best_match_and_matches_name_instances_by_id(api):
    put(api, "both", ["ex:Livro ex:temUmGenero ex:Terror", "ex:Obra ex:temUmGenero ex:Terror"])
    put(api, "film", ["ex:Filme ex:temUmGenero ex:Terror"])
    body = api.get("/v1/discover", params=Q).json()
    views = {v["id"]: v for v in body["instances"]}
    assert views["both"]["match"] == {"tag": {"s": EX + "Obra", "p": EX + "temUmGenero", "o": EX + "Terror"},
                                      "degree": "exact", "distance": 0}
    assert views["film"]["match"]["degree"] == "narrower" and views["film"]["match"]["distance"] == 1
    assert [v["id"] for v in body["instances"]] == ["both", "film"]  # ranked at their best match
    assert all("tags" not in v for v in body["instances"])
    listed = {(m["tag"]["s"], tuple(i["id"] for i in m["instances"])) for m in body["matches"]}
    assert listed == {(EX + "Obra", ("both",)), (EX + "Filme", ("film",)), (EX + "Livro", ("both",))}
    assert body["truncated"] is False
    limited = api.get("/v1/discover", params={**Q, "limit": 1}).json()
    assert [v["id"] for v in limited["instances"]] == ["both"]
    assert {i["id"] for m in limited["matches"] for i in m["instances"]} == {"both"}
    for iid in ("both", "film"):
        api.delete(f"/v1/instances/{iid}")


def test_lists_and_exact_lookups_can_leave_tags_out(api):
    put(api, "listed", ["ex:Livro", *filler(50)])
    [view] = [v for v in api.get("/v1/instances", params={"tags": "false"}).json() if v["id"] == "listed"]
    assert "tags" not in view and view["service"] == "s"
    assert len(api.get("/v1/instances/listed").json()["tags"]) == 51
    peers = api.post("/v1/discover/tags", params={"tags": "false"}, json={"tags": ["ex:Livro"]}).json()["peers"]
    assert [("tags" in v, v["id"]) for v in peers[f"{EX}Livro {ANY} {ANY}"]] == [(False, "listed")]
    peers = api.post("/v1/discover/tags", json={"tags": ["ex:Livro"]}).json()["peers"]
    assert len(peers[f"{EX}Livro {ANY} {ANY}"][0]["tags"]) == 51
    assert api.get("/v1/discover", params={**Q, "tags": "maybe"}).status_code == 400
    api.delete("/v1/instances/listed")


def test_a_watch_wakes_when_only_the_listed_tags_of_an_instance_change(app_server, api):
    put(api, "w", ["ex:Livro ex:temUmGenero ex:Terror"])
    index = api.get("/v1/discover", params=Q).headers["x-semreg-index"]
    watch_ = api.submit("GET", "/v1/discover", params={**Q, "index": index, "wait": "60s"})
    app_server.settle()
    put(api, "w", ["ex:Livro ex:temUmGenero ex:Terror", "ex:Filme ex:temUmGenero ex:Terror"])  # a second match
    body = watch_.result(10).json()
    assert {m["tag"]["s"] for m in body["matches"]} == {EX + "Livro", EX + "Filme"}
    api.delete("/v1/instances/w")


def big_instance(n: int) -> dict:
    return {"service": "big", "address": "10.0.0.9", "port": 80, "ttl": 0,
            "tags": [{"s": "ex:Livro", "p": "ex:temUmGenero", "o": f"http://example.org/genre#G{k}"} for k in range(n)]}


def test_ten_thousand_matching_tags_of_one_instance_answer_in_under_a_megabyte(in_process):
    srv = in_process(ontologies=(ONTOLOGIES / "obras.ttl",))
    c = srv.client()
    assert c.put("/v1/instances/big", json=big_instance(10_000)).status_code == 201
    for params in ({"s": "ex:Obra", "p": "ex:temUmGenero", "o": "sr:Any"},
                   {"s": "ex:Obra", "p": "ex:temUmGenero", "o": "sr:Any", "limit": 5}):
        r = c.get("/v1/discover", params=params)
        body = r.json()
        assert r.status_code == 200 and len(r.content) < 1_000_000
        assert body["truncated"] is True and len(body["matches"]) == MATCHES_LISTED
        assert [v["id"] for v in body["instances"]] == ["big"]


@pytest.mark.process
def test_the_big_answer_leaves_the_server_responsive(start_server):
    node = start_server("--ontology", str(ONTOLOGIES / "obras.ttl"), data_dir=None)
    with httpx.Client(base_url=node.url, timeout=60) as http:
        assert http.put("/v1/instances/big", json=big_instance(10_000)).status_code == 201
        sizes: list[int] = []

        def ask() -> None:
            with httpx.Client(base_url=node.url, timeout=60) as own:
                sizes.append(len(own.get("/v1/discover", params={"s": "ex:Obra", "p": "ex:temUmGenero"}).content))

        askers = [threading.Thread(target=ask) for _ in range(4)]
        for t in askers:
            t.start()
        health = http.get("/healthz", timeout=2.0)  # far under the 40 s such an answer once took
        for t in askers:
            t.join(60)
        assert health.status_code == 200 and len(sizes) == 4 and max(sizes) < 1_000_000


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.slow
def test_twenty_thousand_new_questions_leave_memory_bounded():
    """Every question a new one: what is kept for them is bounded by count, and memory with it."""
    rng = random.Random(3)
    classes = [f"http://example.org/bounded#C{k}" for k in range(200)]
    lines = ["@prefix b: <http://example.org/bounded#> . @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> ."]
    lines += [f"<{c}> rdfs:subClassOf <{classes[k // 4]}> ." for k, c in enumerate(classes) if k >= 4]
    with InProcess() as srv:
        c = srv.client()
        assert c.put("/v1/ontologies/b", content="\n".join(lines).encode(),
                     headers={"Content-Type": "text/turtle"}).status_code == 201
        batch = [{"id": f"i{n}", "service": "s", "address": "10.0.0.1", "port": 80, "ttl": 0,
                  "tags": [{"s": rng.choice(classes), "p": f"http://example.org/bounded#p{rng.randrange(5)}",
                            "o": rng.choice(classes)}]} for n in range(2000)]
        assert c.post("/v1/instances/batch", json={"instances": batch}).status_code == 200
        questions = {(s, p, o) for s in classes for p in range(10) for o in classes[:20]}
        assert len(questions) >= 20_000
        asked = iter(sorted(questions)[:20_000])

        def ask(count: int) -> None:
            for _, (s, p, o) in zip(range(count), asked):
                r = c.get("/v1/discover", params={"s": s, "p": f"http://example.org/bounded#p{p}", "o": o})
                assert r.status_code == 200

        ask(6_000)  # every bounded table is full by now
        gc.collect()
        before = rss_kib()
        ask(14_000)
        gc.collect()
        after = rss_kib()
        coordinator = srv.node.coordinator
        shard_catalogue = srv.node.shard.registry.catalogue
        assert coordinator.hub.topics <= watch.MAX_IDLE_TOPICS
        assert len(srv.app.state.semreg.known_queries._known) <= fastpath.MAX_QUERIES
        assert len(shard_catalogue._cache) <= catalogue.CACHE_SIZE
        assert shard_catalogue._component_terms <= catalogue.COMPONENT_TERMS_KEPT
        assert after - before < 25 * 1024, (before, after)  # KiB: within 25 MiB once the tables are full
