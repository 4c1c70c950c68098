"""Saved queries over HTTP (API.md, Saved queries): saving, reading, removing with tokens (the owner, an admin,
a read-only token, a token bound to environments), the answers of a saved query as the same discovery's and
routing's, its watch, Prometheus's targets, and a backup's round trip. In this process, on a fake clock."""
from __future__ import annotations

import gzip
import json

import pytest
from support.inprocess import InProcess
from support.paths import ONTOLOGIES

ADMIN, TEAM, OTHER, READER, STAGE = ("t-admin-0123456789ab", "t-team-0123456789abc", "t-other-0123456789ab",
                                     "t-reader-0123456789a", "t-stage-0123456789ab")
TOKENS = {"tokens": [{"name": "ops", "token": ADMIN, "scopes": ["admin"]},
                     {"name": "team", "token": TEAM, "scopes": ["read", "write"]},
                     {"name": "other", "token": OTHER, "scopes": ["read", "write"]},
                     {"name": "reader", "token": READER, "scopes": ["read"]},
                     {"name": "stage", "token": STAGE, "scopes": ["read", "write"], "environments": ["staging"]}]}
HORROR = {"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}
GZ = {"Content-Type": "application/gzip"}


def register(c, iid: str, kind: str, n: int, **extra) -> None:
    body = {"service": kind.lower(), "address": f"10.0.0.{n}", "port": 8000 + n, "ttl": 0,
            "tags": [f"ex:{kind} ex:temUmGenero ex:Terror"], **extra}
    r = c.put(f"/v1/instances/{iid}", json=body)
    assert r.status_code in (200, 201), r.text


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("queries") / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    with InProcess(tokens_file=path) as srv:
        admin = srv.client(ADMIN)
        r = admin.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                      headers={"Content-Type": "text/turtle"})
        assert r.status_code == 201, r.text
        register(admin, "livro", "Livro", 1, meta={"zone": "eu-west", "rack.id": "r7"})
        register(admin, "filme", "Filme", 2, weight=3)
        register(admin, "pintura-st", "Pintura", 3, environment="staging")
        yield srv


# -- saving, reading, removing ---------------------------------------------------------------------
def test_a_saved_query_is_stored_with_full_iris_and_its_owner(server):
    team = server.client(TEAM)
    r = team.put("/v1/queries/horror", json={**HORROR, "match": "all", "meta": {"zone": "eu-west"}, "limit": 5})
    assert r.status_code == 201, r.text
    saved = r.json()
    assert saved == {"name": "horror", "s": "http://example.org/obras#Obra", "p": "http://example.org/obras#temUmGenero",
                     "o": "http://example.org/obras#Terror", "match": "exact,narrower,broader,overlap",
                     "environment": "default", "meta": {"zone": "eu-west"}, "limit": 5, "owner": "team"}
    assert team.get("/v1/queries/horror").json() == saved
    assert team.put("/v1/queries/horror", json={**HORROR, "match": "all", "meta": {"zone": "eu-west"},
                                                "limit": 5}).status_code == 200
    assert "horror" in [q["name"] for q in server.client(READER).get("/v1/queries").json()]
    assert team.delete("/v1/queries/horror").status_code == 204
    assert team.get("/v1/queries/horror").status_code == 404


@pytest.mark.parametrize("name", ["Upper", "under_score", "-dash", "dash-", "a" * 64, "dot.ted"])
def test_a_name_that_is_no_dns_label_is_refused(server, name):
    r = server.client(TEAM).put(f"/v1/queries/{name}", json=HORROR)
    assert r.status_code == 400 and "DNS label" in r.json()["error"]


@pytest.mark.parametrize("body, field", [({"p": "ex:temUmGenero"}, "s"), ({"s": "nope:Obra"}, None),
                                         ({**HORROR, "match": "sideways"}, "match"), ({**HORROR, "limit": 0}, "limit"),
                                         ({**HORROR, "environment": "bad\u0001env"}, "environment"),
                                         ({**HORROR, "colour": "red"}, None),
                                         ({"all": []}, "all"), ({"all": [HORROR, "nope:X"]}, "all[1]"),
                                         ({**HORROR, "all": [HORROR]}, "s"), ({**HORROR, "provided": [HORROR]}, "provided"),
                                         ({"all": [HORROR], "provided": ["ex:Livro"]}, "provided[0]")])
def test_a_query_is_checked_as_discovery_checks_it(server, body, field):
    r = server.client(TEAM).put("/v1/queries/bad", json=body)
    assert r.status_code == 400, r.text
    if field is not None:
        assert r.json().get("field") == field, r.json()
    assert server.client(TEAM).get("/v1/queries/bad").status_code == 404


NEEDS_LIVRO = {"all": [HORROR, "ex:Obra"], "match": "all"}


def test_a_conjunctive_query_is_saved_and_answers_as_the_post(server):
    team = server.client(TEAM)
    r = team.put("/v1/queries/both", json={**NEEDS_LIVRO, "provided": ["ex:Livro ex:temUmGenero ex:Terror"]})
    assert r.status_code == 201, r.text
    saved = r.json()
    assert saved["all"][0] == {"s": "http://example.org/obras#Obra", "p": "http://example.org/obras#temUmGenero",
                               "o": "http://example.org/obras#Terror"}
    assert len(saved["provided"]) == 1 and "s" not in saved and saved["match"] == "exact,narrower,broader,overlap"
    assert team.get("/v1/queries/both").json() == saved
    assert "both" in [q["name"] for q in team.get("/v1/queries").json()]
    direct = team.post("/v1/discover", json={**NEEDS_LIVRO, "provided": ["ex:Livro ex:temUmGenero ex:Terror"]})
    answer = team.get("/v1/queries/both/discover")
    assert answer.status_code == 200 and answer.json() == direct.json()
    assert [i["id"] for i in answer.json()["instances"]] == ["livro"]  # filme's genre tag is not provided
    r = team.get("/v1/queries/both/route", params={"path": "/x"})
    assert r.status_code == 307 and r.headers["x-semreg-instance"] == "livro"
    groups = team.get("/v1/prometheus/targets", params={"query": "both"}).json()
    assert [g["labels"]["__meta_semreg_instance_id"] for g in groups] == ["livro"]
    assert groups[0]["labels"]["__meta_semreg_degree"] == answer.json()["instances"][0]["match"]["degree"]
    assert team.delete("/v1/queries/both").status_code == 204


def test_a_conjunctive_query_warns_of_a_pattern_nothing_matches(server):
    r = server.client(TEAM).put("/v1/queries/none", json={"all": [HORROR, "ex:Escultura"]})
    assert r.status_code == 201, r.text
    assert [w["field"] for w in r.json()["warnings"]] == ["all[1]", "all[1]"]  # an unknown term; nothing matches


def test_unknown_terms_and_an_empty_answer_are_saved_with_warnings(server):
    team = server.client(TEAM)
    r = team.put("/v1/queries/unknown", json={"s": "ex:Escultura"})
    assert r.status_code == 201, r.text
    fields = [w["field"] for w in r.json()["warnings"]]
    assert fields == ["s", "query"]
    assert team.get("/v1/queries/unknown/discover").json()["instances"] == []
    assert "warnings" in team.get("/v1/queries/unknown/discover").json()
    assert "warnings" not in team.put("/v1/queries/fine", json=HORROR).json()


def test_only_the_owner_or_an_admin_changes_a_query(server):
    team, other, reader, admin = (server.client(t) for t in (TEAM, OTHER, READER, ADMIN))
    assert team.put("/v1/queries/mine", json=HORROR).status_code == 201
    assert other.put("/v1/queries/mine", json={"s": "ex:Livro"}).status_code == 403
    assert other.delete("/v1/queries/mine").status_code == 403
    assert reader.put("/v1/queries/mine", json=HORROR).status_code == 403
    assert reader.delete("/v1/queries/mine").status_code == 403
    assert reader.get("/v1/queries/mine").status_code == 200
    assert server.client().get("/v1/queries/mine").status_code == 401
    r = admin.put("/v1/queries/mine", json={"s": "ex:Livro"})
    assert r.status_code == 200 and r.json()["owner"] == "team"  # an admin's change keeps its owner
    assert admin.delete("/v1/queries/mine").status_code == 204


def test_a_bound_token_sees_only_the_queries_of_its_environments(server):
    team, stage = server.client(TEAM), server.client(STAGE)
    assert team.put("/v1/queries/everywhere", json=HORROR).status_code == 201
    assert stage.put("/v1/queries/prod-only", json={**HORROR, "environment": "prod"}).status_code == 403
    assert stage.put("/v1/queries/all-envs", json={**HORROR, "environment": "*"}).status_code == 403
    assert stage.put("/v1/queries/staged", json={**HORROR, "environment": "staging"}).status_code == 201
    assert stage.get("/v1/queries/everywhere").status_code == 404
    assert stage.get("/v1/queries/everywhere/discover").status_code == 404
    assert stage.delete("/v1/queries/everywhere").status_code == 404
    names = [q["name"] for q in stage.get("/v1/queries").json()]
    assert "staged" in names and "everywhere" not in names
    assert [i["id"] for i in stage.get("/v1/queries/staged/discover").json()["instances"]] == ["pintura-st"]


# -- its answers -----------------------------------------------------------------------------------
def test_a_saved_query_answers_as_the_same_discovery(server):
    team = server.client(TEAM)
    assert team.put("/v1/queries/works", json={**HORROR, "match": "all"}).status_code in (200, 201)
    direct = team.get("/v1/discover", params={**HORROR, "match": "all"})
    saved = team.get("/v1/queries/works/discover")
    assert saved.status_code == 200
    assert saved.json() == direct.json()
    assert [i["id"] for i in saved.json()["instances"]] == ["filme", "livro"] or \
        [i["id"] for i in saved.json()["instances"]] == ["livro", "filme"]
    assert "tags" in team.get("/v1/queries/works/discover", params={"tags": "true"}).json()["instances"][0]
    r = team.get("/v1/queries/works/discover", params={"s": "ex:Livro"})
    assert r.status_code == 400 and r.json()["field"] == "s"


def test_a_saved_query_routes_as_the_same_route(server):
    team = server.client(TEAM)
    assert team.put("/v1/queries/routed", json=HORROR).status_code in (200, 201)
    r = team.get("/v1/queries/routed/route", params={"path": "/books", "policy": "round-robin"},
                 follow_redirects=False)
    assert r.status_code == 307
    assert r.headers["x-semreg-instance"] in ("livro", "filme")
    assert r.headers["location"].endswith("/books")
    assert team.put("/v1/queries/none", json={"s": "ex:Pintura"}).status_code in (200, 201)
    none = team.get("/v1/queries/none/route", follow_redirects=False)
    assert none.status_code == 503 and "retry-after" in none.headers
    assert team.get("/v1/queries/absent/route").status_code == 404


def test_a_watch_of_a_saved_query_wakes_on_a_change_to_its_answer(server):
    team, admin = server.client(TEAM), server.client(ADMIN)
    assert team.put("/v1/queries/films", json={"s": "ex:Filme"}).status_code in (200, 201)
    first = team.get("/v1/queries/films/discover")
    index = first.headers["x-semreg-index"]
    waiting = team.submit("GET", "/v1/queries/films/discover", params={"index": index, "wait": "60s"})
    register(admin, "filme-2", "Filme", 9)
    r = waiting.result(30)
    assert r.status_code == 200 and "filme-2" in [i["id"] for i in r.json()["instances"]]
    assert int(r.headers["x-semreg-index"]) > int(index)
    assert admin.delete("/v1/instances/filme-2").status_code == 204


# -- Prometheus ------------------------------------------------------------------------------------
def test_prometheus_targets_carry_the_semreg_labels(server):
    reader = server.client(READER)
    assert server.client(TEAM).put("/v1/queries/books", json={"s": "ex:Livro"}).status_code in (200, 201)
    groups = reader.get("/v1/prometheus/targets", params={"query": "books"}).json()
    assert groups == [{"targets": ["10.0.0.1:8001"], "labels": {
        "__meta_semreg_instance_id": "livro", "__meta_semreg_service": "livro", "__meta_semreg_environment": "default",
        "__meta_semreg_degree": "narrower", "__meta_semreg_scheme": "http", "__meta_semreg_weight": "1",
        "__meta_semreg_meta_rack_id": "r7", "__meta_semreg_meta_zone": "eu-west"}}]
    inline = reader.get("/v1/prometheus/targets", params={"s": "ex:Livro"}).json()
    assert inline == groups


def test_prometheus_targets_leave_out_what_routing_leaves_out(server):
    admin, reader = server.client(ADMIN), server.client(READER)
    register(admin, "filme-drained", "Filme", 20)
    params = {"s": "ex:Filme", "p": "ex:temUmGenero", "o": "ex:Terror"}
    ids = lambda: {g["labels"]["__meta_semreg_instance_id"] for g in reader.get("/v1/prometheus/targets",  # noqa: E731
                                                                                params=params).json()}
    assert "filme-drained" in ids()
    for status in ("draining", "blocked"):
        assert admin.put("/v1/instances/filme-drained/heartbeat", json={"status": status}).status_code == 200
        assert "filme-drained" not in ids()
    assert admin.delete("/v1/instances/filme-drained").status_code == 204


def test_prometheus_targets_refuse_a_conflicting_or_unknown_question(server):
    reader = server.client(READER)
    assert reader.get("/v1/prometheus/targets", params={"query": "books", "s": "ex:Filme"}).status_code == 400
    assert reader.get("/v1/prometheus/targets", params={"query": "never-saved"}).status_code == 404
    assert reader.get("/v1/prometheus/targets").status_code == 400
    assert reader.get("/v1/prometheus/targets", params={"s": "ex:Livro", "status": "any"}).status_code == 400
    assert server.client(STAGE).get("/v1/prometheus/targets", params={"s": "ex:Livro"}).status_code == 403
    assert server.client().get("/v1/prometheus/targets", params={"s": "ex:Livro"}).status_code == 401


# -- backups ---------------------------------------------------------------------------------------
def test_a_backup_keeps_saved_queries_with_their_owners(server, in_process, tmp_path):
    assert server.client(TEAM).put("/v1/queries/kept", json={**HORROR, "meta": {"zone": "eu-west"}}).status_code \
        in (200, 201)
    backup = server.client(ADMIN).get("/v1/backup")
    assert backup.status_code == 200
    assert "urn:semreg:query:kept" in gzip.decompress(backup.content).decode()
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    target = in_process(tokens_file=path)
    restored = target.client(ADMIN).post("/v1/restore", content=backup.content, headers=GZ)
    assert restored.status_code == 200, restored.text
    assert restored.json()["queries"] == len(server.client(ADMIN).get("/v1/queries").json())
    assert target.client(TEAM).get("/v1/queries/kept").json() == server.client(TEAM).get("/v1/queries/kept").json()
    assert target.client(OTHER).delete("/v1/queries/kept").status_code == 403  # still the team's
    assert target.client(TEAM).get("/v1/queries/kept/discover").json()["instances"] == \
        server.client(TEAM).get("/v1/queries/kept/discover").json()["instances"]
    again = target.client(ADMIN).post("/v1/restore", content=backup.content, headers=GZ)
    assert again.status_code == 409 and again.json()["queries"] >= 1
