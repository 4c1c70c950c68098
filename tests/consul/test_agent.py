"""The Consul-compatible API's agent routes, over HTTP in this process on a fake clock: a Consul registration is a
semreg instance (its pattern tags matched by meaning on semreg's own API, its plain tags kept and read back), a TTL
check is the instance's lease, and a change a token may not make, or a body Consul would refuse, is a plain-text
4xx that changes nothing."""
from __future__ import annotations

import json

import pytest
from support.inprocess import InProcess
from support.paths import ONTOLOGIES
from support.tokens import ADMIN, BOUND, READ, TOKENS

EX = "http://example.org/obras#"


def started(in_process, **kw) -> InProcess:
    srv = in_process(consul_listen="127.0.0.1:8500", **kw)
    c = srv.client(ADMIN if kw.get("tokens_file") else None)
    r = c.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
              headers={"Content-Type": "text/turtle"})
    assert r.status_code == 201, r.text
    return srv


@pytest.fixture
def srv(in_process) -> InProcess:
    return started(in_process)


def book(sid: str = "livros-1", **over) -> dict:
    return {"ID": sid, "Name": "livros", "Tags": ["ex:Livro ex:temUmGenero ex:Terror", "blue"],
            "Address": "10.0.0.7", "Port": 8080, "Meta": {"team": "books"},
            "Check": {"TTL": "10s", "Status": "passing"}, **over}


def test_a_registration_is_an_instance_of_this_registry_with_its_pattern_tags(srv):
    assert srv.consul().put("/v1/agent/service/register", json=book()).status_code == 200
    view = srv.client().get("/v1/instances/livros-1").json()
    assert (view["service"], view["address"], view["port"], view["ttl"], view["status"]) == \
        ("livros", "10.0.0.7", 8080, 10.0, "up")
    assert view["tags"] == [{"s": EX + "Livro", "p": EX + "temUmGenero", "o": EX + "Terror"}]
    found = srv.client().get("/v1/discover", params={"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}).json()
    assert [i["id"] for i in found["instances"]] == ["livros-1"]


def test_the_agent_reads_back_the_tags_as_written_and_the_meta_without_the_mapping_s_own(srv):
    c = srv.consul()
    assert c.put("/v1/agent/service/register", json=book()).status_code == 200
    service = c.get("/v1/agent/service/livros-1").json()
    assert service["Tags"] == ["ex:Livro ex:temUmGenero ex:Terror", "blue"]
    assert service["Meta"] == {"team": "books"}
    assert (service["Service"], service["Port"], service["Weights"]) == ("livros", 8080, {"Passing": 1, "Warning": 1})
    assert set(c.get("/v1/agent/services").json()) == {"livros-1"}


def test_lower_case_keys_and_no_content_type_are_read_as_consul_reads_them(srv):
    body = {"name": "filmes", "id": "f1", "address": "10.0.0.8", "port": 81, "tags": ["x"],
            "checks": [{"ttl": "15s", "status": "passing"}]}
    r = srv.consul().put("/v1/agent/service/register", content=json.dumps(body).encode())
    assert r.status_code == 200, r.text
    assert srv.client().get("/v1/instances/f1").json()["ttl"] == 15.0


def test_a_ttl_check_starts_critical_unless_told_as_consul_starts_it(srv):
    c = srv.consul()
    assert c.put("/v1/agent/service/register", json=book(Check={"TTL": "10s"})).status_code == 200
    assert srv.client().get("/v1/instances/livros-1").json()["status"] == "critical"
    assert c.put("/v1/agent/check/pass/service:livros-1").status_code == 200
    assert srv.client().get("/v1/instances/livros-1").json()["status"] == "up"


def test_pass_warn_fail_and_update_move_the_instance_s_status(srv):
    c = srv.consul()
    assert c.put("/v1/agent/service/register", json=book()).status_code == 200

    def status() -> str:
        return srv.client().get("/v1/instances/livros-1").json()["status"]
    assert c.put("/v1/agent/check/fail/service:livros-1", params={"note": "down"}).status_code == 200
    view = srv.client().get("/v1/instances/livros-1").json()
    assert view["status"] == "critical" and view["critical"]["reported"] is True
    assert c.put("/v1/agent/check/warn/service:livros-1").status_code == 200
    assert status() == "blocked"
    assert c.put("/v1/agent/check/update/service:livros-1", json={"Status": "passing", "Output": "ok"}).status_code == 200
    assert status() == "up"


def test_a_ttl_check_not_renewed_lets_the_lease_lapse(srv):
    c = srv.consul()
    assert c.put("/v1/agent/service/register", json=book()).status_code == 200
    srv.advance(9)
    assert c.put("/v1/agent/check/pass/service:livros-1").status_code == 200
    srv.advance(9)
    assert srv.client().get("/v1/instances/livros-1").json()["status"] == "up"
    srv.advance(2)
    assert srv.client().get("/v1/instances/livros-1").json()["status"] == "critical"


def test_deregister_critical_service_after_deletes_a_failed_service_and_without_it_it_stays(srv):
    c = srv.consul()
    assert c.put("/v1/agent/service/register", json=book(
        Check={"TTL": "10s", "Status": "passing", "DeregisterCriticalServiceAfter": "1m"})).status_code == 200
    assert c.put("/v1/agent/service/register", json=book("livros-2")).status_code == 200
    for sid in ("livros-1", "livros-2"):
        assert c.put(f"/v1/agent/check/fail/service:{sid}").status_code == 200
    srv.advance(59)
    assert srv.client().get("/v1/instances/livros-1").status_code == 200
    srv.advance(2)
    assert srv.client().get("/v1/instances/livros-1").status_code == 404
    srv.advance(3600)
    assert srv.client().get("/v1/instances/livros-2").json()["status"] == "critical"


def test_an_http_check_is_semreg_s_active_check(srv):
    body = book(Check={"HTTP": "http://10.0.0.7:8080/health", "Interval": "5s", "Timeout": "1s"})
    assert srv.consul().put("/v1/agent/service/register", json=body).status_code == 200
    view = srv.client().get("/v1/instances/livros-1").json()
    assert view["check"] == {"http": "http://10.0.0.7:8080/health", "interval": 5.0, "timeout": 1.0}
    assert view["ttl"] == 0.0


def test_deregister_removes_the_instance_and_an_unknown_one_is_a_404(srv):
    c = srv.consul()
    assert c.put("/v1/agent/service/register", json=book()).status_code == 200
    assert c.put("/v1/agent/service/deregister/livros-1").status_code == 200
    assert srv.client().get("/v1/instances/livros-1").status_code == 404
    r = c.put("/v1/agent/service/deregister/livros-1")
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/plain")
    assert "Unknown service ID" in r.text


@pytest.mark.parametrize("body, says", [
    ({"Name": "x", "Port": 80, "Check": {"Args": ["/bin/true"], "Interval": "10s"}}, "Args"),
    ({"Name": "x", "Port": 80, "Check": {"TTL": "soon"}}, "TTL"),
    ({"Name": "x", "Port": 80, "Checks": [{"TTL": "5s"}, {"TTL": "6s"}]}, "second"),
    ({"Name": "x", "Port": 0}, "Port"),
    ({"Port": 80}, "Name"),
    ({"Name": "x", "Port": 80, "Meta": {"consul-tags": "[]"}}, "consul-"),
    ({"Name": "x", "Port": 80, "Connect": {"Native": True}}, "Connect"),
    ({"Name": "x", "Port": 80, "Frobnicate": 1}, "frobnicate"),
    ({"Name": "x", "ID": "bad id", "Port": 80}, "id"),
    ([1, 2], "object"),
])
def test_a_body_consul_would_refuse_is_a_plain_400_that_changes_nothing(srv, body, says):
    r = srv.consul().put("/v1/agent/service/register", json=body)
    assert r.status_code == 400, r.text
    assert r.headers["content-type"].startswith("text/plain") and says in r.text
    assert srv.client().get("/v1/instances").json() == []


def test_a_check_update_of_a_service_without_ttl_or_unknown_is_refused(srv):
    c = srv.consul()
    assert c.put("/v1/agent/service/register", json=book(Check=None)).status_code == 200
    assert c.put("/v1/agent/check/pass/service:livros-1").status_code == 400
    assert c.put("/v1/agent/check/pass/service:nobody").status_code == 404
    assert c.put("/v1/agent/check/pass/livros-1").status_code == 404
    assert c.put("/v1/agent/check/update/service:livros-1", json={"Status": "fine"}).status_code == 400


def test_agent_self_answers_as_prometheus_reads_it(srv):
    info = srv.consul().get("/v1/agent/self").json()
    assert all(isinstance(v, dict) for v in info.values())
    assert isinstance(info["Config"]["Datacenter"], str) and info["Config"]["Datacenter"]


def test_tokens_map_onto_scopes_and_bound_environments(in_process, tmp_path):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    srv = started(in_process, tokens_file=tokens)
    r = srv.consul().put("/v1/agent/service/register", json=book())
    assert r.status_code == 403 and "ACL not found" in r.text
    assert srv.consul(READ).put("/v1/agent/service/register", json=book()).status_code == 403
    assert srv.consul(ADMIN).put("/v1/agent/service/register", json=book()).status_code == 200
    bearer = srv.consul()
    bearer.headers = {"Authorization": f"Bearer {READ}"}
    assert bearer.get("/v1/agent/service/livros-1").status_code == 200
    # a token bound to staging sees nothing of the default environment, and may not read it
    assert srv.consul(BOUND).get("/v1/agent/service/livros-1").status_code == 404
    assert srv.consul(BOUND).get("/v1/catalog/services").status_code == 403
    assert srv.consul(BOUND).get("/v1/catalog/services", params={"ns": "staging"}).json() == {}
    assert srv.consul(READ).put("/v1/agent/service/deregister/livros-1").status_code == 403
    assert srv.client(ADMIN).get("/v1/instances/livros-1").status_code == 200



def test_a_service_that_keeps_failing_its_ttl_check_is_deleted_after_deregister_critical_service_after(srv):
    c = srv.consul()
    assert c.put("/v1/agent/service/register", json=book(
        Check={"TTL": "10s", "Status": "passing", "DeregisterCriticalServiceAfter": "1m"})).status_code == 200
    assert c.put("/v1/agent/check/fail/service:livros-1").status_code == 200
    for _ in range(5):
        srv.advance(10)
        assert c.put("/v1/agent/check/fail/service:livros-1").status_code == 200
    srv.advance(21)  # 71 s after the first failure: its last report's ttl (10 s) and the minute have passed
    assert srv.client().get("/v1/instances/livros-1").status_code == 404
