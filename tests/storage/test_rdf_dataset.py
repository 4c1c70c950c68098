"""A stopped node's data directory is a plain RDF dataset: the Oxigraph server, reading it, answers the
example queries in `queries/` with the node's own answers over `/sparql`, for everything that does not
come from live state (every instance here is healthy, so its live status is the status it was given)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from support.paths import ONTOLOGIES
from support.server import free_port, wait_for

pytestmark = pytest.mark.process

QUERIES = sorted((Path(__file__).resolve().parents[2] / "queries").glob("*.rq"))
RESULTS = {"Accept": "application/sparql-results+json"}


def solutions(answer: dict) -> list[dict]:
    rows = answer["results"]["bindings"]
    return [{k: (v["type"], v["value"], v.get("datatype")) for k, v in row.items()} for row in rows]


def oxigraph_read_only(data: Path) -> tuple[subprocess.Popen, str]:
    exe = shutil.which("oxigraph") or str(Path(sys.executable).with_name("oxigraph"))
    port = free_port()
    proc = subprocess.Popen([exe, "serve-read-only", "--location", str(data), "--bind", f"127.0.0.1:{port}",
                             "--union-default-graph"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        assert proc.poll() is None, "the Oxigraph server exited"
        try:
            return httpx.get(url + "/query", params={"query": "ASK {}"}, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False
    wait_for(answers, timeout_s=30, what="the Oxigraph server answering")
    return proc, url


def test_the_oxigraph_server_answers_the_example_queries_from_a_stopped_nodes_directory(start_server, tmp_path):
    data = tmp_path / "data"
    srv = start_server(data_dir=data)
    with srv.client() as c:
        for name in ("obras", "transport"):
            assert c.put(f"/v1/ontologies/{name}", content=(ONTOLOGIES / f"{name}.ttl").read_bytes(),
                         headers={"Content-Type": "text/turtle"}).status_code == 201
        for n, (service, tags) in enumerate([("livros", ["ex:Livro ex:temUmGenero ex:Terror"]),
                                             ("films", ["ex:Filme ex:temUmGenero ex:Terror", "ex:Filme"]),
                                             ("livros", ["ex:Obra ex:temUmGenero ex:Romance"]),
                                             ("catalogue", ["ex:Obra"]),
                                             ("livros", ["ex:Livro ex:temUmGenero ex:Terror"])]):
            body = {"service": service, "address": f"10.0.0.{n}", "port": 8000 + n, "ttl": 0, "tags": tags,
                    "meta": {"n": str(n)}, "environment": "staging" if n == 3 else "default"}
            assert c.put(f"/v1/instances/i{n}", json=body).status_code == 201
        assert c.put("/v1/instances/i1/heartbeat", json={"status": "draining"}).status_code == 200
        assert c.put("/v1/instances/i2", json={**body, "service": "livros", "port": 9}).status_code == 200
        assert c.delete("/v1/instances/i4").status_code == 204
        served = {q.name: solutions(c.get("/sparql", params={"query": q.read_text()}, headers=RESULTS).json())
                  for q in QUERIES}
    assert srv.stop() == 0
    assert all(served.values()) and "i4" not in str(served)
    proc, url = oxigraph_read_only(data)
    try:
        for q in QUERIES:
            answer = httpx.get(url + "/query", params={"query": q.read_text()}, headers=RESULTS, timeout=30)
            assert answer.status_code == 200, answer.text
            assert solutions(answer.json()) == served[q.name], q.name
    finally:
        proc.terminate()
        proc.wait(10)
