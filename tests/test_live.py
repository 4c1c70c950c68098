"""Leases, active checks, watches and routing through the real server (API.md: Instances, Watching, Routing)."""
from __future__ import annotations

import collections
import http.server
import socket
import threading
import time

import httpx
import pytest
from conftest import ONTOLOGIES
from server import wait_for

Q = {"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}


@pytest.fixture(scope="module")
def srv(module_server):
    with module_server.client() as c:
        assert c.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                     headers={"Content-Type": "text/turtle"}).status_code == 201
    return module_server


@pytest.fixture
def api(srv):
    with srv.client() as c:
        yield c
        for inst in c.get("/v1/instances").json():
            c.delete(f"/v1/instances/{inst['id']}")


def put(c, iid, tag="ex:Livro ex:temUmGenero ex:Terror", **kw):
    body = {"service": "books", "address": "127.0.0.1", "port": 9000, "tags": [tag], "ttl": 0, **kw}
    r = c.put(f"/v1/instances/{iid}", json=body)
    assert r.status_code in (200, 201), r.text
    return r.json()


def ids(c, **extra):
    return [i["id"] for i in c.get("/v1/discover", params={**Q, **extra}).json()["instances"]]


def test_expiry_then_deletion_after_deregister_after(api):
    put(api, "short", ttl=0.5, deregister_after=1.5)
    assert ids(api) == ["short"]
    wait_for(lambda: ids(api) == [])
    assert api.get("/v1/instances/short").json()["status"] == "critical"
    wait_for(lambda: api.get("/v1/instances/short").status_code == 404)
    r = api.put("/v1/instances/short/heartbeat", json={})
    assert r.status_code == 404  # the client re-registers


def test_heartbeat_keeps_an_instance_up(api):
    put(api, "beating", ttl=2)
    for _ in range(4):
        time.sleep(0.4)
        assert api.put("/v1/instances/beating/heartbeat", json={"load": 1}).status_code == 200
    assert ids(api) == ["beating"]


class Target:
    """A local HTTP endpoint whose health the test switches."""

    def __init__(self):
        self.healthy = True
        target = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200 if target.healthy else 503)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_http_check_failure_and_recovery(api):
    target = Target()
    try:
        put(api, "checked", check={"http": f"http://127.0.0.1:{target.port}/health", "interval": 0.2, "timeout": 1})
        assert ids(api) == ["checked"]
        target.healthy = False
        wait_for(lambda: ids(api) == [])
        assert api.get("/v1/instances/checked").json()["status"] == "critical"
        target.healthy = True
        wait_for(lambda: ids(api) == ["checked"])
    finally:
        target.close()


def test_tcp_check_on_a_closed_port_fails(api):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    put(api, "tcp", check={"tcp": f"127.0.0.1:{port}", "interval": 0.2, "timeout": 0.5})
    wait_for(lambda: api.get("/v1/instances/tcp").json()["status"] == "critical")


def test_watch_wakes_fast_for_its_result_only(srv, api):
    r = api.get("/v1/discover", params=Q)
    index = int(r.headers["x-semreg-index"])
    out = {}

    def watch():
        t0 = time.monotonic()
        rr = httpx.get(srv.url + "/v1/discover", params={**Q, "index": index, "wait": "20s"}, timeout=30)
        out["at"] = time.monotonic()
        out["elapsed"] = time.monotonic() - t0
        out["ids"] = [i["id"] for i in rr.json()["instances"]]
        out["index"] = int(rr.headers["x-semreg-index"])

    t = threading.Thread(target=watch)
    t.start()
    time.sleep(0.3)
    put(api, "unrelated", tag="ex:Pintura")                  # a tag outside the query
    put(api, "unrelated-2", tag="ex:Livro ex:temUmGenero ex:Comedia")
    time.sleep(0.7)
    assert t.is_alive(), "an irrelevant write woke the watch"
    changed_at = time.monotonic()
    put(api, "relevant")
    t.join(10)
    assert out["ids"] == ["relevant"] and out["index"] > index
    assert out["at"] - changed_at < 1.0  # the wake itself is immediate; this bounds scheduling noise


def test_watch_times_out_with_the_same_index(api):
    r = api.get("/v1/tags")
    index = r.headers["x-semreg-index"]
    r2 = api.get("/v1/tags", params={"index": index, "wait": "300ms"})
    assert r2.status_code == 200 and r2.headers["x-semreg-index"] == index


def test_instances_watch_by_service(srv, api):
    index = api.get("/v1/instances", params={"service": "films"}).headers["x-semreg-index"]
    result = {}

    def watch():
        rr = httpx.get(srv.url + "/v1/instances", params={"service": "films", "index": index, "wait": "20s"},
                       timeout=30)
        result["ids"] = [i["id"] for i in rr.json()]

    t = threading.Thread(target=watch)
    t.start()
    time.sleep(0.3)
    put(api, "a-book")
    time.sleep(0.5)
    assert t.is_alive()
    put(api, "a-film", service="films")
    t.join(10)
    assert result["ids"] == ["a-film"]


def route(c, **params):
    r = c.get("/v1/route", params={**Q, **params}, follow_redirects=False)
    return r


def test_least_load_by_weight_4_2_2_2(api):
    for n, w in enumerate([40, 20, 20, 20]):
        put(api, f"w{n}", weight=w, port=9100 + n)
    got = collections.Counter()
    for _ in range(10):
        r = route(api, path="/books/1")
        assert r.status_code == 307
        assert r.headers["location"] == f"http://127.0.0.1:{9100 + int(r.headers['x-semreg-instance'][1])}/books/1"
        got[r.headers["x-semreg-instance"]] += 1
    assert got == {"w0": 4, "w1": 2, "w2": 2, "w3": 2}


def test_reported_load_steers_routes(api):
    put(api, "busy", port=1)
    put(api, "idle", port=2)
    api.put("/v1/instances/busy/heartbeat", json={"load": 10})
    assert [route(api).headers["x-semreg-instance"] for _ in range(5)] == ["idle"] * 5


def test_blocked_and_draining_get_no_routes_but_stay_listed(api):
    put(api, "b1")
    put(api, "b2")
    put(api, "b3")
    api.put("/v1/instances/b1/heartbeat", json={"status": "blocked"})
    api.put("/v1/instances/b2/heartbeat", json={"status": "draining"})
    assert {route(api).headers["x-semreg-instance"] for _ in range(4)} == {"b3"}
    assert sorted(ids(api, status="any")) == ["b1", "b2", "b3"]
    api.put("/v1/instances/b3/heartbeat", json={"status": "draining"})
    r = route(api)
    assert r.status_code == 503 and int(r.headers["retry-after"]) >= 1 and r.json()["error"]


def test_spillover_fills_by_priority(api):
    put(api, "first", capacity=2, meta={"priority": "1"})
    put(api, "second", capacity=2, meta={"priority": "2"})
    order = [route(api, policy="spillover").headers["x-semreg-instance"] for _ in range(4)]
    assert order == ["first", "first", "second", "second"]


def test_limit_answers_503_when_everyone_is_full(api):
    put(api, "c1", capacity=1)
    put(api, "c2", capacity=1)
    assert route(api, policy="limit").status_code == 307
    assert route(api, policy="limit").status_code == 307
    r = route(api, policy="limit")
    assert r.status_code == 503 and "capacity" in r.json()["error"] and "retry-after" in r.headers
    api.put("/v1/instances/c1/heartbeat", json={"load": 0})  # a report resets the count
    assert route(api, policy="limit").headers["x-semreg-instance"] == "c1"


def test_round_robin(api):
    for name in ("r1", "r2", "r3"):
        put(api, name)
    seq = [route(api, policy="round-robin").headers["x-semreg-instance"] for _ in range(6)]
    assert sorted(seq[:3]) == ["r1", "r2", "r3"] and seq[3:] == seq[:3]


def test_bad_route_parameters(api):
    assert route(api, policy="random").status_code == 400
    assert route(api, path="no-slash").status_code == 400
    assert api.get("/v1/route", params={"s": "nope:X"}).status_code == 400
