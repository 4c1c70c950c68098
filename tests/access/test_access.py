"""Tokens, scopes, ownership, rate and size limits over HTTP (API.md, Access): in this process on a fake
clock, except what needs a process (SIGHUP, the command line refusing to start)."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import subprocess
import sys

import httpx
import pytest
from support.inprocess import InProcess
from support.server import free_port, wait_for

from semreg.access.tokens import Tokens, TokensFileError
from semreg.cli.serve import beyond_loopback
from semreg.config import Settings
from semreg.logs import JsonFormatter

ADMIN, A, B, R = "t-admin-0123456789ab", "t-a-0123456789ab", "t-b-0123456789ab", "t-r-0123456789ab"  # 16 or more
TOKENS = {"tokens": [
    {"name": "ops", "token": "t-admin-0123456789ab", "scopes": ["admin"]},
    {"name": "team-a", "token": "t-a-0123456789ab", "scopes": ["read", "write"]},
    {"name": "team-b", "sha256": hashlib.sha256(b"t-b-0123456789ab").hexdigest(), "scopes": ["read", "write"]},
    {"name": "reader", "token": "t-r-0123456789ab", "scopes": ["read"]},
]}
BODY = {"service": "cars", "address": "10.2.0.1", "port": 1, "tags": ["<http://x.org/Car>"], "ttl": 0}


class Records(logging.Handler):
    """Every log record, formatted the way the server writes them."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(self.format(record))


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    path = tmp_path_factory.mktemp("secured") / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    records = Records()
    root = logging.getLogger()
    level = root.level
    root.addHandler(records)
    root.setLevel(logging.DEBUG)
    server = InProcess(tokens_file=path)
    try:
        yield server.start()
    finally:
        server.stop()
        root.removeHandler(records)
        root.setLevel(level)
    log = "\n".join(records.lines)
    assert "tokens loaded" in log
    assert "t-admin-0123456789ab" not in log and "t-a-0123456789ab\"" not in log  # tokens are never logged


def client(server, token=None):
    return server.client(token)


def test_auth_matrix(secured):
    anon, admin, a, b, r = (client(secured, t) for t in (None, ADMIN, A, B, R))
    bad = client(secured, "nope")
    assert anon.get("/healthz").status_code == 200 and anon.get("/readyz").status_code == 200
    for c in (anon, bad):
        resp = c.get("/v1/instances")
        assert resp.status_code == 401 and resp.json()["error"] and resp.headers["www-authenticate"].startswith("Bearer")
    assert anon.get("/v1/instances", headers={"Authorization": "Basic abc"}).status_code == 401
    assert r.get("/v1/instances").status_code == 200
    assert r.get("/sparql", params={"query": "ASK {}"}).status_code == 200
    assert r.put("/v1/instances/x", json=BODY).status_code == 403
    assert a.put("/v1/ontologies/o", content=b"<a:b> <a:c> <a:d> .", headers={"Content-Type": "text/turtle"}).status_code == 403
    assert a.put("/v1/prefixes/p", json={"iri": "http://p/"}).status_code == 403
    assert a.put("/v1/prefixes/p", params={"force": "true"}, json={"iri": "http://p/"}).status_code == 403
    assert a.put("/v1/instances/x", json=BODY).status_code == 201
    assert b.put("/v1/instances/x", json=BODY).status_code == 403          # replacing another's
    assert b.put("/v1/instances/x/heartbeat", json={}).status_code == 403  # renewing another's
    assert b.delete("/v1/instances/x").status_code == 403                  # removing another's
    assert b.post("/v1/instances/batch", json={"instances": [{**BODY, "id": "x"}]}).status_code == 403
    assert a.put("/v1/instances/x/heartbeat", json={}).status_code == 200
    assert a.put("/v1/instances/x", json=BODY).status_code == 200
    assert admin.put("/v1/instances/x/heartbeat", json={}).status_code == 200
    assert admin.put("/v1/ontologies/o", content=b"<a:b> <a:c> <a:d> .",
                     headers={"Content-Type": "text/turtle"}).status_code == 201
    assert admin.delete("/v1/instances/x").status_code == 204
    assert b.put("/v1/instances/y", json=BODY).status_code == 201  # sha256 tokens work
    assert b.delete("/v1/instances/y").status_code == 204
    assert a.delete("/v1/instances/missing").status_code == 404


def test_tokens_reload_on_sighup(start_server, tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    secured = start_server("--tokens", str(path), data_dir=None)
    extra = {"tokens": [*TOKENS["tokens"], {"name": "late", "token": "t-late-0123456789ab", "scopes": ["read"]}]}
    path.write_text(json.dumps(extra))
    os.kill(secured.proc.pid, signal.SIGHUP)
    late = httpx.Client(base_url=secured.url, timeout=30, headers={"Authorization": "Bearer t-late-0123456789ab"})
    wait_for(lambda: late.get("/v1/instances").status_code == 200, 10, "the new token loaded")
    path.write_text("{broken")
    os.kill(secured.proc.pid, signal.SIGHUP)
    wait_for(lambda: "not reloaded" in secured.log(), 10, "the broken file reported")
    assert late.get("/v1/instances").status_code == 200  # a broken file keeps the tokens in force


@pytest.mark.parametrize("content, fragment", [
    ("{broken", "not JSON"), ('{"tokens": {}}', "expected"), ('{"tokens": [{"name": "x", "scopes": ["read"]}]}', "exactly one"),
    ('{"tokens": [{"name": "x", "token": "t", "scopes": ["root"]}]}', "scopes"),
    ('{"tokens": [{"name": "x", "sha256": "abc", "scopes": ["read"]}]}', "64 hex"),
    ('{"tokens": [{"name": "x", "token": "t-0123456789abcdef", "scopes": ["read"]}, '
     '{"name": "x", "token": "u-0123456789abcdef", "scopes": ["read"]}]}', "twice"),
])
def test_bad_tokens_file_is_a_clear_error(tmp_path, content, fragment):
    path = tmp_path / "tokens.json"
    path.write_text(content)
    with pytest.raises(TokensFileError) as caught:
        Tokens(path)
    assert fragment in str(caught.value) and str(path) in str(caught.value)


@pytest.mark.parametrize("token", ["x", "fifteen-chars-x", ""])
def test_a_token_shorter_than_16_characters_is_refused_naming_its_entry(tmp_path, token):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tokens": [TOKENS["tokens"][0], {"name": "short-one", "token": token, "scopes": ["read"]}]}))
    with pytest.raises(TokensFileError) as caught:
        Tokens(path)
    message = str(caught.value)
    assert "tokens[1]" in message and "'short-one'" in message and "16 characters" in message and str(path) in message
    assert token == "" or token not in message  # the entry is named, the secret is not shown


def test_a_token_of_16_characters_is_accepted_and_a_short_one_presented_is_not(in_process, tmp_path):
    path = tmp_path / "tokens.json"
    short = hashlib.sha256(b"abc").hexdigest()  # a sha256 entry cannot show its token's length
    path.write_text(json.dumps({"tokens": [{"name": "edge", "token": "s" * 16, "scopes": ["read"]},
                                           {"name": "hashed", "sha256": short, "scopes": ["read"]}]}))
    srv = in_process(tokens_file=path)
    assert srv.client("s" * 16).get("/v1/instances").status_code == 200
    assert srv.client("abc").get("/v1/instances").status_code == 401


@pytest.mark.process
def test_serve_refuses_a_bad_tokens_file_with_its_sentence(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text("{broken")
    out = subprocess.run([sys.executable, "-m", "semreg", "serve", "--memory", "--port", "1", "--tokens", str(path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "not JSON" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.process
def test_refuses_non_loopback_without_tokens():
    out = subprocess.run([sys.executable, "-m", "semreg", "serve", "--memory", "--host", "0.0.0.0", "--port", "1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "--insecure" in out.stderr and "--tokens" in out.stderr


@pytest.mark.process
@pytest.mark.parametrize("flag", ["--dns", "--cluster-listen", "--consul-listen"])
def test_refuses_any_other_listener_beyond_loopback_without_tokens(tmp_path, flag):
    """`--dns 0.0.0.0:PORT` (or the cluster listener) without tokens: refused before anything listens."""
    secret = tmp_path / "cluster.secret"
    secret.write_text("a-cluster-secret-0123456789")
    port = free_port()
    cluster = ["--etcd", "http://127.0.0.1:9", "--cluster-secret", str(secret), "--advertise",
               f"http://127.0.0.1:{port}"] if flag == "--cluster-listen" else []
    argv = [sys.executable, "-m", "semreg", "serve", "--memory", "--no-sparql", "--port", str(free_port()),
            flag, f"0.0.0.0:{port}", *cluster]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"semreg serve {flag} 0.0.0.0:{port} without tokens started instead of refusing")
    assert out.returncode == 2, out.stderr
    assert f"{flag} 0.0.0.0:{port}" in out.stderr and "--insecure" in out.stderr and "--tokens" in out.stderr


@pytest.mark.parametrize("changes, exposed", [
    ({}, []),
    ({"host": "0.0.0.0"}, [("--host", "0.0.0.0")]),
    ({"dns": "0.0.0.0:53"}, [("--dns", "0.0.0.0:53")]),
    ({"dns": "[::]:53"}, [("--dns", "[::]:53")]),
    ({"dns": "[::1]:53", "cluster_listen": "localhost:7080"}, []),
    ({"cluster_listen": "10.0.0.5:7080", "dns": "127.0.0.2:53"}, [("--cluster-listen", "10.0.0.5:7080")]),
    ({"host": "::", "dns": "*:53", "cluster_listen": "0.0.0.0:7080"},
     [("--host", "::"), ("--dns", "*:53"), ("--cluster-listen", "0.0.0.0:7080")]),
    ({"consul_listen": "127.0.0.1:8500"}, []),
    ({"consul_listen": "0.0.0.0:8500"}, [("--consul-listen", "0.0.0.0:8500")]),
])
def test_every_listener_beyond_loopback_is_named(changes, exposed):
    settings = Settings(data_dir=None).replace(**changes)
    assert beyond_loopback(settings) == exposed


def test_rate_limit_answers_429_with_retry_after_and_refills_with_time(in_process):
    srv = in_process(rate_limit_per_s=0.5, rate_burst=5)  # one request back every 2 s of the fake clock
    c = srv.client()
    assert [c.get("/v1/instances").status_code for _ in range(5)] == [200] * 5
    r = c.get("/v1/instances")
    assert r.status_code == 429 and r.headers["retry-after"] == "2" and "rate" in r.json()["error"]
    assert c.get("/healthz").status_code == 200  # health probes are never limited
    srv.advance(1.9)
    assert c.get("/v1/instances").status_code == 429
    srv.advance(0.1)
    assert c.get("/v1/instances").status_code == 200


def test_limits_just_under_and_just_over(in_process):
    srv = in_process(max_tags_per_instance=100, max_batch_instances=20, json_body_limit_bytes=20000,
                     ontology_body_limit_bytes=2000)
    with srv.client() as c:
        tags = [f"<http://x.org/C{n}>" for n in range(101)]
        assert c.put("/v1/instances/t", json={**BODY, "tags": tags[:100]}).status_code == 201
        r = c.put("/v1/instances/t", json={**BODY, "tags": tags})
        assert r.status_code == 400 and "100" in r.json()["error"]
        batch = [{**BODY, "id": f"b{n}"} for n in range(21)]
        assert c.post("/v1/instances/batch", json={"instances": batch[:20]}).status_code == 200
        r = c.post("/v1/instances/batch", json={"instances": batch})
        assert r.status_code == 400 and "20" in r.json()["error"]
        exact = sized_body(20000)
        hdr = {"Content-Type": "application/json"}
        assert c.put("/v1/instances/m", content=exact, headers=hdr).status_code == 201
        assert c.put("/v1/instances/m", content=sized_body(20001), headers=hdr).status_code == 413
        ttl = b"@prefix x: <http://x.org/> .\n" + b"#" * (2000 - 30) + b"\n"
        assert len(ttl) == 2000
        assert c.put("/v1/ontologies/o", content=ttl, headers={"Content-Type": "text/turtle"}).status_code == 400
        assert c.put("/v1/ontologies/o", content=ttl + b"#", headers={"Content-Type": "text/turtle"}).status_code == 413


def sized_body(size: int) -> bytes:
    """A valid registration of exactly `size` bytes (meta values padded, each within its 4096 limit)."""
    meta = {f"k{n}": "x" * 4000 for n in range(size // 4100)}
    body = json.dumps({**BODY, "meta": {**meta, "last": ""}}).encode()
    meta["last"] = "x" * (size - len(body))
    out = json.dumps({**BODY, "meta": meta}).encode()
    assert len(out) == size
    return out


def test_a_repeated_discovery_still_needs_a_token(secured):
    q = {"s": "<http://x.org/Car>"}
    assert client(secured, "t-r-0123456789ab").get("/v1/discover", params=q).status_code == 200
    assert client(secured, "t-r-0123456789ab").get("/v1/discover", params=q).status_code == 200
    assert client(secured).get("/v1/discover", params=q).status_code == 401
    assert client(secured, "nope").get("/v1/discover", params=q).status_code == 401
