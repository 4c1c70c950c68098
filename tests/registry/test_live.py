"""Leases, active checks, watches and routing over HTTP (API.md: Instances, Watching, Routing), with the app
in this process on a fake clock: a lease expires when the test moves time past it, and a watch that must
not wake is checked once every recomputation the change started has finished."""
from __future__ import annotations

import collections
import http.server
import socket
import threading
from datetime import datetime

import pytest
from support.inprocess import InProcess
from support.paths import ONTOLOGIES
from support.server import wait_for

Q = {"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}


class FakeProbe:
    """Health-check answers the test sets per target."""

    def __init__(self):
        self.healthy: dict[str, bool] = {}
        self.calls = collections.Counter()

    async def __call__(self, check):
        target = check.get("http") or check.get("tcp")
        self.calls[target] += 1
        ok = self.healthy.get(target, True)
        return ok, "ok" if ok else "down"


@pytest.fixture(scope="module")
def probe():
    return FakeProbe()


@pytest.fixture(scope="module")
def srv(probe):
    server = InProcess(probe=probe)
    try:
        server.start()
        with server.client() as c:
            assert c.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                         headers={"Content-Type": "text/turtle"}).status_code == 201
        yield server
    finally:
        server.stop()


@pytest.fixture
def api(srv):
    c = srv.client()
    try:
        yield c
    finally:
        for inst in c.get("/v1/instances").json():
            c.delete(f"/v1/instances/{inst['id']}")


def put(c, iid, tag="ex:Livro ex:temUmGenero ex:Terror", **kw):
    body = {"service": "books", "address": "127.0.0.1", "port": 9000, "tags": [tag], "ttl": 0, **kw}
    r = c.put(f"/v1/instances/{iid}", json=body)
    assert r.status_code in (200, 201), r.text
    return r.json()


def ids(c, **extra):
    return [i["id"] for i in c.get("/v1/discover", params={**Q, **extra}).json()["instances"]]


def status(c, iid):
    return c.get(f"/v1/instances/{iid}").json()["status"]


# -- leases ---------------------------------------------------------------------------------------------
def test_expiry_at_the_ttl_then_deletion_after_deregister_after(srv, api):
    put(api, "short", ttl=5, deregister_after=15)
    assert ids(api) == ["short"]
    srv.advance(4.9)
    assert ids(api) == ["short"]
    srv.advance(0.1)
    assert ids(api) == [] and status(api, "short") == "critical"
    srv.advance(9.9)
    assert status(api, "short") == "critical"
    srv.advance(0.1)
    assert api.get("/v1/instances/short").status_code == 404
    assert api.put("/v1/instances/short/heartbeat", json={}).status_code == 404  # the client re-registers


def test_more_leases_than_a_batch_lapsing_at_once_all_leave_discovery_at_their_ttl(srv, api):
    from semreg.registry.registry import EXPIRE_BATCH

    count = EXPIRE_BATCH * 2 + 7
    body = {"instances": [{"id": f"many-{k:04d}", "service": "books", "address": "127.0.0.1", "port": 9000,
                           "tags": ["ex:Livro ex:temUmGenero ex:Terror"], "ttl": 5} for k in range(count)]}
    assert api.post("/v1/instances/batch", json=body).status_code == 200
    assert len(ids(api, limit=count)) == count
    srv.advance(5)  # every batch runs at the ttl, one turn of the loop after another
    assert ids(api, limit=count) == []
    critical = api.get("/v1/instances", params={"service": "books", "status": "critical", "limit": 1})
    assert critical.headers["X-Semreg-Total"] == str(count)


def test_an_instance_expired_and_deleted_by_one_timer_leaves_every_follower(srv, api):
    """With deregister_after within the ttl, one timer expires an instance and deletes it: both changes
    reach everything that follows them (the SPARQL replica, the watches), in order."""
    put(api, "brief", ttl=5, deregister_after=2, service="brief")
    index = api.get("/v1/instances", params={"service": "brief"}).headers["x-semreg-index"]
    watch = api.submit("GET", "/v1/instances", params={"service": "brief", "index": index, "wait": "60s"})
    srv.settle()
    srv.advance(5)
    assert api.get("/v1/instances/brief").status_code == 404
    assert watch.result(10).json() == []
    ask = api.get("/sparql", params={"query": "ASK { <urn:semreg:instance:brief> ?p ?o }"},
                  headers={"Accept": "application/sparql-results+json"})
    assert ask.json()["boolean"] is False


def test_heartbeats_keep_an_instance_up_and_a_late_one_brings_it_back(srv, api):
    put(api, "beating", ttl=2, deregister_after=60)
    for _ in range(10):
        srv.advance(1.5)
        assert api.put("/v1/instances/beating/heartbeat", json={"load": 1}).status_code == 200
    assert ids(api) == ["beating"]
    srv.advance(2)
    assert ids(api) == []
    r = api.put("/v1/instances/beating/heartbeat", json={})
    assert r.status_code == 200 and r.json()["status"] == "up" and ids(api) == ["beating"]


def test_expires_at_moves_with_each_heartbeat(srv, api):
    first = put(api, "dated", ttl=30)["expires_at"]
    srv.advance(10)
    renewed = api.put("/v1/instances/dated/heartbeat", json={}).json()["expires_at"]
    assert renewed > first and renewed.endswith("Z")


# -- checks ----------------------------------------------------------------------------------------------
def test_a_failing_check_makes_critical_and_a_passing_one_brings_it_back(srv, api, probe):
    url = "http://10.9.9.9/health"
    put(api, "checked", check={"http": url, "interval": 5, "timeout": 1})
    srv.advance(1)  # the first probe falls within the first second
    wait_for(lambda: probe.calls[url] >= 1, 5, "the first probe")
    assert ids(api) == ["checked"]
    probe.healthy[url] = False
    # the first probe fell anywhere in the first second, and each probe is due one interval after the last was
    # taken (plus the batching's 10 ms): an interval and one second reach the next probe wherever the first fell
    srv.advance(6)
    wait_for(lambda: status(api, "checked") == "critical", 5, "the instance critical")
    assert ids(api) == []
    probe.healthy[url] = True
    srv.advance(6)
    wait_for(lambda: ids(api) == ["checked"], 5, "the instance up again")


def fail_check(srv, api, probe, iid, url, **kw):
    """Register `iid` with a check on `url` that fails, and return once it is critical."""
    probe.healthy[url] = False
    put(api, iid, check={"http": url, "interval": 5, "timeout": 1}, **kw)
    srv.advance(1)  # the first probe falls within the first second
    wait_for(lambda: status(api, iid) == "critical", 5, "the instance critical")
    return api.get(f"/v1/instances/{iid}").json()


def test_a_critical_view_says_which_check_failed_how_and_when(srv, api, probe):
    view = fail_check(srv, api, probe, "told", "http://10.9.9.5/health", deregister_after=30)
    assert view["last_check"]["passing"] is False and view["last_check"]["output"] == "down"
    assert view["last_check"]["at"].endswith("Z")
    assert view["critical"]["check_failing"] is True and view["critical"]["lease_lapsed"] is False
    assert view["critical"]["since"] == view["last_check"]["at"]
    assert view["critical"]["delete_at"] > view["critical"]["since"]
    probe.healthy["http://10.9.9.5/health"] = True
    srv.advance(6)
    wait_for(lambda: status(api, "told") == "up", 5, "the instance up again")
    view = api.get("/v1/instances/told").json()
    assert "critical" not in view and view["last_check"]["passing"] is True


def test_a_critical_view_says_when_the_lease_lapsed(srv, api):
    put(api, "lapsed", ttl=5, deregister_after=15)
    up = api.get("/v1/instances/lapsed").json()
    assert "critical" not in up and "last_check" not in up  # no check: nothing to say
    srv.advance(5)
    view = api.get("/v1/instances/lapsed").json()
    assert view["critical"]["lease_lapsed"] is True and view["critical"]["check_failing"] is False
    assert view["critical"]["since"] == view["expires_at"]
    since, delete_at = (datetime.fromisoformat(view["critical"][k]) for k in ("since", "delete_at"))
    assert (delete_at - since).total_seconds() == pytest.approx(10, abs=0.01)  # 15 s after its last heartbeat


def test_without_a_ttl_a_failing_check_never_deletes_unless_deregister_after_was_asked(srv, api, probe):
    """ttl 0 is "registered until deregistered": a check that fails marks the instance critical, and it stays
    so (out of discovery, listed) until it passes again or is deregistered. Only a deregister_after the
    registration gave deletes it; with a ttl, deregister_after still defaults to 90 s."""
    assert put(api, "leased", ttl=30)["deregister_after"] == 90
    assert put(api, "unleased")["deregister_after"] == 0
    kept = fail_check(srv, api, probe, "kept", "http://10.9.9.6/health")
    assert kept["deregister_after"] == 0 and kept["critical"]["delete_at"] is None
    asked = fail_check(srv, api, probe, "asked", "http://10.9.9.7/health", deregister_after=30)
    assert asked["deregister_after"] == 30 and asked["critical"]["delete_at"] is not None
    srv.advance(30)
    assert api.get("/v1/instances/asked").status_code == 404
    srv.advance(24 * 3600)
    assert status(api, "kept") == "critical"
    assert api.put("/v1/instances/leased/heartbeat", json={}).status_code == 404  # 90 s past its lapse


def test_a_replaced_check_reports_for_the_new_target_only(srv, api, probe):
    old, new = "http://10.9.9.1/h", "http://10.9.9.2/h"
    probe.healthy[old] = False
    put(api, "swapped", check={"http": old, "interval": 5})
    srv.advance(1)
    wait_for(lambda: status(api, "swapped") == "critical", 5, "critical on the old target")
    put(api, "swapped", check={"http": new, "interval": 5})
    srv.advance(1)
    wait_for(lambda: probe.calls[new] >= 1, 5, "the new target probed")
    srv.advance(5)
    wait_for(lambda: status(api, "swapped") == "up", 5, "up on the new target")
    calls = probe.calls[old]
    srv.advance(20)
    assert probe.calls[old] == calls  # the old check is gone


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
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def test_real_http_and_tcp_probes():
    """The real probes, against a local HTTP server and a closed port."""
    target = Target()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    try:
        with InProcess() as srv:
            c = srv.client()
            assert c.put("/v1/prefixes/ex", json={"iri": "http://example.org/obras#"}).status_code == 201
            # probe timeouts are real time: a loaded machine must not turn one slow answer into a failure
            put(c, "web", check={"http": f"http://127.0.0.1:{target.port}/health", "interval": 5, "timeout": 4})
            put(c, "tcp", check={"tcp": f"127.0.0.1:{closed}", "interval": 5, "timeout": 1})
            srv.advance(1)
            wait_for(lambda: status(c, "tcp") == "critical", 5, "the closed port failing")
            assert status(c, "web") == "up"
            target.healthy = False
            srv.advance(5)
            wait_for(lambda: status(c, "web") == "critical", 5, "HTTP 503 failing")
            target.healthy = True
            srv.advance(5)
            wait_for(lambda: status(c, "web") == "up", 5, "HTTP 200 passing")
    finally:
        target.close()


# -- watches ---------------------------------------------------------------------------------------------
def test_a_watch_wakes_for_its_result_only(srv, api):
    r = api.get("/v1/discover", params=Q)
    index = int(r.headers["x-semreg-index"])
    watch = api.submit("GET", "/v1/discover", params={**Q, "index": index, "wait": "60s"})
    srv.settle()
    put(api, "unrelated", tag="ex:Pintura")                  # a tag outside the query
    put(api, "unrelated-2", tag="ex:Livro ex:temUmGenero ex:Comedia")
    api.put("/v1/instances/unrelated/heartbeat", json={"load": 3})
    srv.settle()
    assert not watch.done(), "an irrelevant write woke the watch"
    put(api, "relevant")
    answer = watch.result(10)
    assert [i["id"] for i in answer.json()["instances"]] == ["relevant"]
    assert int(answer.headers["x-semreg-index"]) > index


def test_a_watch_ends_at_its_wait_with_the_same_index(srv, api):
    index = api.get("/v1/tags").headers["x-semreg-index"]
    watch = api.submit("GET", "/v1/tags", params={"index": index, "wait": "30s"})
    srv.advance(29)
    assert not watch.done()
    srv.advance(1)
    answer = watch.result(10)
    assert answer.status_code == 200 and answer.headers["x-semreg-index"] == index


def test_an_expiry_wakes_the_watch_of_its_query(srv, api):
    put(api, "fading", ttl=10)
    index = api.get("/v1/discover", params=Q).headers["x-semreg-index"]
    watch = api.submit("GET", "/v1/discover", params={**Q, "index": index, "wait": "60s"})
    srv.advance(9)
    assert not watch.done()
    srv.advance(1)
    assert watch.result(10).json()["instances"] == []


def test_instances_watch_by_service(srv, api):
    index = api.get("/v1/instances", params={"service": "films"}).headers["x-semreg-index"]
    watch = api.submit("GET", "/v1/instances", params={"service": "films", "index": index, "wait": "60s"})
    srv.settle()
    put(api, "a-book")
    srv.settle()
    assert not watch.done()
    put(api, "a-film", service="films")
    assert [i["id"] for i in watch.result(10).json()] == ["a-film"]


# -- routing ---------------------------------------------------------------------------------------------
def route(c, **params):
    return c.get("/v1/route", params={**Q, **params}, follow_redirects=False)


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
