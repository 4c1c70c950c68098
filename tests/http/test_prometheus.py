"""A real Prometheus (Debian's `prometheus`) finds its scrape targets by meaning: its `http_sd_configs` point
at `GET /v1/prometheus/targets` of a semreg server process (with a read token in its `authorization`
block), two small HTTP servers of the test serve `/metrics` and are registered by what they handle, and
Prometheus's own `/api/v1/targets` lists them with their `__meta_semreg_*` labels, scrapes them, and lets a
drained one go within its refresh interval. Every wait polls with a deadline."""
from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from support.paths import ONTOLOGIES
from support.server import ServerProcess, free_port, wait_for

pytestmark = [pytest.mark.process, pytest.mark.slow, pytest.mark.needs_tool("prometheus", "prometheus")]
ADMIN, READER = "prom-admin-0123456789", "prom-reader-0123456789"
REFRESH_S = 1


class Metrics(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"# TYPE books_served counter\nbooks_served 42\n" if self.path == "/metrics" else b""
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def exporters():
    """Two `/metrics` servers on loopback ports, stopped at the end."""
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), Metrics) for _ in range(2)]
    threads = [threading.Thread(target=s.serve_forever, name=f"metrics-{n}", daemon=True) for n, s in enumerate(servers)]
    for t in threads:
        t.start()
    try:
        yield [s.server_address[1] for s in servers]
    finally:
        for s, t in zip(servers, threads):
            s.shutdown()
            s.server_close()
            t.join(5)


@pytest.fixture
def semreg(tmp_path):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [{"name": "ops", "token": ADMIN, "scopes": ["admin"]},
                                             {"name": "prometheus", "token": READER, "scopes": ["read"]}]}))
    server = ServerProcess(tmp_path / "data", "--tokens", str(tokens), "--ontology", str(ONTOLOGIES / "obras.ttl"))
    server.start(tmp_path / "logs")
    try:
        yield server
    finally:
        server.stop()


def start_prometheus(tmp_path, semreg_url: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(f"""
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: horror
    http_sd_configs:
      - url: {semreg_url}/v1/prometheus/targets?query=horror
        refresh_interval: {REFRESH_S}s
        authorization:
          type: Bearer
          credentials: {READER}
""")
    log = open(tmp_path / "prometheus.log", "wb")
    proc = subprocess.Popen(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    return proc, f"http://127.0.0.1:{port}"


def active(prometheus: str) -> list[dict]:
    try:
        r = httpx.get(prometheus + "/api/v1/targets", params={"state": "active"}, timeout=2)
    except httpx.HTTPError:
        return []
    return r.json()["data"]["activeTargets"] if r.status_code == 200 else []


def test_prometheus_discovers_scrapes_and_lets_go_by_meaning(tmp_path, semreg, exporters):
    admin = {"Authorization": f"Bearer {ADMIN}"}
    with httpx.Client(base_url=semreg.url, headers=admin, timeout=10) as c:
        for n, (kind, port) in enumerate(zip(("Livro", "Filme"), exporters)):
            r = c.put(f"/v1/instances/exporter-{n}", json={
                "service": f"{kind.lower()}s", "address": "127.0.0.1", "port": port, "ttl": 0,
                "tags": [f"ex:{kind} ex:temUmGenero ex:Terror"], "meta": {"team": "horror-desk", "tier.class": "gold"}})
            assert r.status_code == 201, r.text
        assert c.put("/v1/queries/horror", json={"s": "ex:Obra", "p": "ex:temUmGenero",
                                                  "o": "ex:Terror"}).status_code == 201
        proc, prometheus = start_prometheus(tmp_path, semreg.url)
        try:
            wanted = {f"127.0.0.1:{p}" for p in exporters}
            wait_for(lambda: {t["labels"]["instance"] for t in active(prometheus)
                              if t["health"] == "up"} == wanted, 60, "Prometheus scraping both exporters")
            by_instance = {t["labels"]["instance"]: t["discoveredLabels"] for t in active(prometheus)}
            labels = by_instance[f"127.0.0.1:{exporters[0]}"]
            assert labels["__meta_semreg_instance_id"] == "exporter-0"
            assert labels["__meta_semreg_service"] == "livros"
            assert labels["__meta_semreg_environment"] == "default"
            assert labels["__meta_semreg_degree"] == "narrower"
            assert labels["__meta_semreg_meta_team"] == "horror-desk"
            assert labels["__meta_semreg_meta_tier_class"] == "gold"
            assert by_instance[f"127.0.0.1:{exporters[1]}"]["__meta_semreg_service"] == "filmes"

            assert c.put("/v1/instances/exporter-1/heartbeat", json={"status": "draining"}).status_code == 200
            wait_for(lambda: {t["labels"]["instance"] for t in active(prometheus)} == {f"127.0.0.1:{exporters[0]}"},
                     REFRESH_S + 5, "the drained exporter out of Prometheus's targets")
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
