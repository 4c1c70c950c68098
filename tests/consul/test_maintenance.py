"""Consul's maintenance mode (`PUT /v1/agent/service/maintenance/{id}?enable=...`) is semreg's drain, over HTTP in
this process on a fake clock: the instance stays listed, leaves `?passing` and semreg's own discovery of `up`
instances, and shows Consul's critical maintenance check. It changes the status alone: a lapsed lease is not
renewed by it, and a service that reported itself critical is not brought back by switching maintenance."""
from __future__ import annotations

import json

import pytest
from support.inprocess import InProcess
from support.paths import ONTOLOGIES
from support.tokens import ADMIN, TOKENS

WRITER = "write-token-0123456789abcdef"


def started(in_process, **kw) -> InProcess:
    srv = in_process(consul_listen="127.0.0.1:8500", **kw)
    r = srv.client(ADMIN if kw.get("tokens_file") else None).put(
        "/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(), headers={"Content-Type": "text/turtle"})
    assert r.status_code == 201, r.text
    return srv


def book(sid: str = "livros-1") -> dict:
    return {"ID": sid, "Name": "livros", "Tags": ["ex:Livro ex:temUmGenero ex:Terror"], "Address": "10.0.0.7",
            "Port": 8080, "Check": {"TTL": "10s", "Status": "passing"}}


@pytest.fixture
def srv(in_process):
    return started(in_process)


def status_of(srv, sid: str = "livros-1") -> str:
    return srv.client().get(f"/v1/instances/{sid}").json()["status"]


def checks_of(srv, sid: str = "livros-1") -> dict[str, str]:
    [entry] = [e for e in srv.consul().get("/v1/health/service/livros").json() if e["Service"]["ID"] == sid]
    return {c["CheckID"]: c["Status"] for c in entry["Checks"]}


@pytest.mark.parametrize("on, off", [("True", "False"), ("true", "false"), ("1", "0")])
def test_maintenance_drains_the_instance_and_ending_it_brings_it_back(srv, on, off):
    c = srv.consul()
    assert c.put("/v1/agent/service/register", json=book()).status_code == 200
    r = c.put("/v1/agent/service/maintenance/livros-1", params={"enable": on, "reason": "deploying"})
    assert r.status_code == 200, r.text
    assert status_of(srv) == "draining"
    assert checks_of(srv) == {"serfHealth": "passing", "service:livros-1": "passing",
                              "_service_maintenance:livros-1": "critical"}
    assert c.get("/v1/health/service/livros", params={"passing": "1"}).json() == []
    found = srv.client().get("/v1/discover", params={"s": "ex:Livro", "p": "ex:temUmGenero", "o": "ex:Terror"})
    assert found.json()["instances"] == []
    # a passing TTL check does not end it: only maintenance off does
    assert c.put("/v1/agent/check/pass/service:livros-1").status_code == 200
    assert status_of(srv) == "draining"
    assert c.put("/v1/agent/service/maintenance/livros-1", params={"enable": off}).status_code == 200
    assert status_of(srv) == "up"
    assert checks_of(srv) == {"serfHealth": "passing", "service:livros-1": "passing"}
    assert [e["Service"]["ID"] for e in c.get("/v1/health/service/livros", params={"passing": "1"}).json()] == \
        ["livros-1"]


def test_maintenance_does_not_renew_a_lease_nor_bring_a_lapsed_instance_back(srv):
    c = srv.consul()
    assert c.put("/v1/agent/service/register", json=book()).status_code == 200
    srv.advance(8)
    assert c.put("/v1/agent/service/maintenance/livros-1", params={"enable": "True"}).status_code == 200
    srv.advance(3)  # 11 s after the last pass, with a 10 s TTL: lapsed, maintenance or not
    assert status_of(srv) == "critical"
    assert c.put("/v1/agent/service/maintenance/livros-1", params={"enable": "False"}).status_code == 200
    assert status_of(srv) == "critical"
    assert c.put("/v1/agent/service/maintenance/livros-1", params={"enable": "True"}).status_code == 200
    assert status_of(srv) == "critical"
    # the service passing its check again comes back drained, as it was left
    assert c.put("/v1/agent/check/pass/service:livros-1").status_code == 200
    assert status_of(srv) == "draining"


def test_a_service_reported_critical_stays_critical_whichever_way_maintenance_is_switched(srv):
    c = srv.consul()
    assert c.put("/v1/agent/service/register", json=book()).status_code == 200
    assert c.put("/v1/agent/check/fail/service:livros-1").status_code == 200
    for enable in ("True", "False"):
        assert c.put("/v1/agent/service/maintenance/livros-1", params={"enable": enable}).status_code == 200
        assert status_of(srv) == "critical"
    # ending maintenance never ends a `blocked` status it did not make
    assert c.put("/v1/agent/check/warn/service:livros-1").status_code == 200
    assert c.put("/v1/agent/service/maintenance/livros-1", params={"enable": "False"}).status_code == 200
    assert status_of(srv) == "blocked"


@pytest.mark.parametrize("params, code, says", [
    ({}, 400, "Missing value for enable"),
    ({"enable": ""}, 400, "Missing value for enable"),
    ({"enable": "yes"}, 400, "Invalid value for enable"),
    ({"enable": "x" * 5000}, 400, "Invalid value for enable"),
])
def test_a_maintenance_request_consul_would_refuse_is_a_plain_400_that_changes_nothing(srv, params, code, says):
    c = srv.consul()
    assert c.put("/v1/agent/service/register", json=book()).status_code == 200
    r = c.put("/v1/agent/service/maintenance/livros-1", params=params)
    assert (r.status_code, r.headers["content-type"].split(";")[0]) == (code, "text/plain")
    assert says in r.text
    assert status_of(srv) == "up"


@pytest.mark.parametrize("sid", ["nobody", "a/b", "%00", "x" * 400])
def test_maintenance_of_an_unknown_service_is_a_404(srv, sid):
    r = srv.consul().put(f"/v1/agent/service/maintenance/{sid}", params={"enable": "true"})
    assert r.status_code == 404 and "Unknown service ID" in r.text


def test_maintenance_needs_a_write_token_that_may_change_the_instance(in_process, tmp_path):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [*TOKENS["tokens"],
                                             {"name": "writer", "token": WRITER, "scopes": ["read", "write"]}]}))
    srv = started(in_process, tokens_file=tokens)
    assert srv.consul(ADMIN).put("/v1/agent/service/register", json=book()).status_code == 200
    assert srv.consul().put("/v1/agent/service/maintenance/livros-1", params={"enable": "true"}).status_code == 403
    assert srv.consul(WRITER).put("/v1/agent/service/maintenance/livros-1",
                                 params={"enable": "true"}).status_code == 403  # another token registered it
    assert srv.client(ADMIN).get("/v1/instances/livros-1").json()["status"] == "up"
    assert srv.consul(ADMIN).put("/v1/agent/service/maintenance/livros-1", params={"enable": "true"}).status_code == 200
    assert srv.client(ADMIN).get("/v1/instances/livros-1").json()["status"] == "draining"
