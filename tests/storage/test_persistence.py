"""Restart on the same data directory keeps every ontology, prefix and registration."""
from __future__ import annotations

import pyoxigraph as ox
import pytest
from support.paths import DATA, ONTOLOGIES

pytestmark = pytest.mark.process

EX = "http://example.org/obras#"


def test_restart_keeps_everything(start_server, tmp_path):
    data = tmp_path / "data"
    srv = start_server(data_dir=data)
    with srv.client() as c:
        assert c.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                     headers={"Content-Type": "text/turtle"}).status_code == 201
        assert c.put("/v1/prefixes/k", json={"iri": "http://example.org/k#"}).status_code == 201
        batch = [{"id": f"i{n}", "service": "svc", "address": "h", "port": 1000 + n, "ttl": 0,
                  "tags": ["ex:Livro ex:temUmGenero ex:Terror", f"k:T{n}"]} for n in range(200)]
        assert c.post("/v1/instances/batch", json={"instances": batch}).status_code == 200
        assert c.put("/v1/instances/i0", json={**batch[0], "port": 1, "tags": ["ex:Filme"]}).status_code == 200
        assert c.put("/v1/instances/i1/heartbeat", json={"status": "draining"}).status_code == 200
        assert c.delete("/v1/instances/i2").status_code == 204
        assert c.put("/v1/instances/i3", json={**batch[3], "environment": "staging"}).status_code == 200
        leased = c.put("/v1/instances/leased", json={"service": "l", "address": "h", "port": 1, "ttl": 5}).json()
        before = {i["id"]: i for i in c.get("/v1/instances", params={"environment": "*"}).json()}
    assert srv.stop() == 0

    srv = start_server(data_dir=data)
    with srv.client() as c:
        after = {i["id"]: i for i in c.get("/v1/instances", params={"environment": "*"}).json()}
        assert after.keys() == before.keys() and len(after) == 200
        assert after["i0"]["port"] == 1 and after["i0"]["tags"] == [{"s": EX + "Filme", "p": "https://w3id.org/semreg#Any",
                                                                     "o": "https://w3id.org/semreg#Any"}]
        assert after["i1"]["status"] == "draining"
        assert after["i3"]["environment"] == "staging" and after["i4"]["environment"] == "default"
        assert after["leased"]["expires_at"] > leased["expires_at"]  # one fresh ttl on restore
        assert [o["name"] for o in c.get("/v1/ontologies").json()] == ["obras"]
        assert c.get("/v1/prefixes").json()["k"] == "http://example.org/k#"
        body = c.get("/v1/discover", params={"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}).json()
        assert len(body["instances"]) == 196  # i0 changed its tags, i1 is draining, i2 is gone, i3 is in staging
        q = ("PREFIX sr: <https://w3id.org/semreg#> SELECT (COUNT(?i) AS ?n) WHERE { ?i a sr:Instance }")
        r = c.get("/sparql", params={"query": q}, headers={"Accept": "application/sparql-results+json"})
        assert r.status_code == 200, r.text  # the SPARQL replica holds the restored registry
        assert r.json()["results"]["bindings"][0]["n"]["value"] == "200"


def test_unrelated_graphs_in_the_store_are_left_alone(start_server, tmp_path):
    data = tmp_path / "data"
    store = ox.Store(str(data))
    g = ox.NamedNode("http://example.org/mine")
    store.add(ox.Quad(ox.NamedNode("http://example.org/a"), ox.NamedNode("http://example.org/b"),
                      ox.Literal("c"), g))
    del store
    srv = start_server(data_dir=data)
    srv.stop()
    store = ox.Store(str(data))
    assert len(list(store.quads_for_pattern(None, None, None, g))) == 1


def test_second_server_on_a_locked_data_dir_says_why(start_server, tmp_path):
    import subprocess
    import sys

    data = tmp_path / "data"
    start_server(data_dir=data)
    out = subprocess.run([sys.executable, "-m", "semreg", "serve", "--port", "1", "--data-dir", str(data)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "in use by another process" in out.stderr and "Traceback" not in out.stderr


def test_preloaded_ontology_is_not_reasoned_again_when_unchanged(start_server, tmp_path):
    data = tmp_path / "data"
    path = str(ONTOLOGIES / "obras.ttl")
    srv = start_server("--ontology", path, data_dir=data)
    with srv.client() as c:
        first = c.get("/v1/ontologies").json()
    srv.stop()
    srv = start_server("--ontology", path, data_dir=data)
    with srv.client() as c:
        assert c.get("/v1/ontologies").json() == first
    assert "ontology unchanged" in srv.log()


def test_schema_org_and_dbpedia_discovery(start_server):
    srv = start_server("--ontology", str(DATA / "ontologies" / "schemaorg-30.0-current-https.ttl"),
                       "--ontology", str(DATA / "ontologies" / "dbpedia-ontology-2026.08.20.ttl"), data_dir=None)
    with srv.client() as c:
        regs = {"books": "schema:Book", "movies": "schema:Movie", "audio": "schema:Audiobook",
                "people": "schema:Person", "dbo-novels": "dbo:LightNovel"}
        prefixes = c.get("/v1/prefixes").json()
        assert prefixes["schema"] == "https://schema.org/"
        if "dbo" not in prefixes:
            c.put("/v1/prefixes/dbo", json={"iri": "http://dbpedia.org/ontology/"})
        for iid, cls in regs.items():
            tags = [f"{cls} schema:genre schema:Thing"] if cls.startswith("schema") else [f"{cls} dbo:literaryGenre dbo:Genre"]
            assert c.put(f"/v1/instances/{iid}", json={"service": iid, "address": "h", "port": 1, "ttl": 0,
                                                        "tags": tags}).status_code == 201
        body = c.get("/v1/discover", params={"s": "schema:CreativeWork", "p": "schema:genre"}).json()
        got = {i["id"]: (m["degree"], m["distance"]) for m in body["matches"] for i in m["instances"]}
        assert got == {"books": ("narrower", 1), "movies": ("narrower", 1), "audio": ("narrower", 2)}
        body = c.get("/v1/discover", params={"s": "dbo:Novel"}).json()
        assert [i["id"] for i in body["instances"]] == ["dbo-novels"]


def test_unusable_data_dirs_are_clear_errors(tmp_path):
    import subprocess
    import sys

    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "CURRENT").write_text("junk\n")
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for path, fragment in ((damaged, "damaged"), (a_file, "not a directory")):
        out = subprocess.run([sys.executable, "-m", "semreg", "serve", "--port", "1", "--data-dir", str(path)],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 1 and fragment in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_an_acknowledged_upload_survives_kill_before_its_graph_is_written(start_server, tmp_path):
    data = tmp_path / "data"
    srv = start_server(data_dir=data)
    body = (DATA / "ontologies" / "dbpedia-ontology-2026.08.20.ttl").read_bytes()
    with srv.client() as c:
        assert c.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                     headers={"Content-Type": "text/turtle"}).status_code == 201
        r = c.put("/v1/ontologies/dbo", content=body, headers={"Content-Type": "text/turtle"})
        assert r.status_code == 201
        triples = r.json()["triples"]
        assert c.delete("/v1/ontologies/obras").status_code == 204
    srv.kill()  # the graph writes are behind the acknowledgement: likely still pending
    srv = start_server(data_dir=data)
    with srv.client() as c:
        assert [o["name"] for o in c.get("/v1/ontologies").json()] == ["dbo"]
        q = "SELECT (COUNT(*) AS ?n) WHERE { GRAPH <urn:semreg:ontology:dbo> { ?s ?p ?o } }"
        n = c.get("/sparql", params={"query": q}, headers={"Accept": "application/sparql-results+json"}).json()
        assert int(n["results"]["bindings"][0]["n"]["value"]) == triples
        q = "ASK { GRAPH <urn:semreg:ontology:obras> { ?s ?p ?o } }"
        r = c.get("/sparql", params={"query": q}, headers={"Accept": "application/sparql-results+json"})
        assert r.json()["boolean"] is False
        assert c.get("/v1/concepts/" + "http://dbpedia.org/ontology/LightNovel".replace("#", "%23")).status_code == 200


def test_ontology_flag_takes_several_files(start_server):
    srv = start_server("--ontology", str(ONTOLOGIES / "obras.ttl"), str(ONTOLOGIES / "transport.ttl"), data_dir=None)
    with srv.client() as c:
        assert sorted(o["name"] for o in c.get("/v1/ontologies").json()) == ["obras", "transport"]
        cluster = c.get("/v1/cluster").json()
        assert cluster["checksum"] > 0 and cluster["replicas"] == 1


def test_a_clean_restart_reads_the_snapshot_and_a_crash_after_it_the_records(start_server, tmp_path):
    """The snapshot a clean stop writes serves the next start-up only; what is written after it, then a kill -9,
    comes back from the records."""
    data = tmp_path / "data"
    batch = [{"id": f"i{n}", "service": "svc", "address": "h", "port": 1000 + n, "ttl": 0, "tags": [f"<http://x.org/C{n % 3}>"]}
             for n in range(50)]
    srv = start_server(data_dir=data)
    with srv.client() as c:
        assert c.post("/v1/instances/batch", json={"instances": batch}).status_code == 200
        assert c.put("/v1/instances/i1/heartbeat", json={"status": "draining"}).status_code == 200
    assert srv.stop() == 0
    assert (data / "registry.snapshot").exists()

    srv = start_server(data_dir=data)
    assert '"from":"snapshot"' in srv.log() and not (data / "registry.snapshot").exists()
    with srv.client() as c:
        assert c.get("/v1/instances/i1").json()["status"] == "draining"
        assert c.put("/v1/instances/late", json={**batch[0], "id": "late"}).status_code == 201
        assert c.delete("/v1/instances/i2").status_code == 204
        assert c.put("/v1/instances/i3", json={**batch[3], "port": 1}).status_code == 200
        before = {i["id"]: i for i in c.get("/v1/instances").json()}
    srv.kill()

    srv = start_server(data_dir=data)
    assert '"from":"records"' in srv.log()
    with srv.client() as c:
        after = {i["id"]: i for i in c.get("/v1/instances").json()}
    assert after.keys() == before.keys() and "late" in after and "i2" not in after
    assert after["i3"]["port"] == 1 and after["i1"]["status"] == "draining"
