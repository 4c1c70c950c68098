"""Environments and metadata filters (`semreg.registry.selector`; API.md, Instances, Discovery and Access): the same
tags registered in `staging` and `prod` (and `default`), read over HTTP through the app in this process on
a fake clock. A read sees one environment (`default` unless it names another, `*` for all) and only
instances whose meta holds every `meta.KEY=VALUE` it gives; a token bound to environments reads and
writes only there; a watch of one environment is not woken by a change in another."""
from __future__ import annotations

import json
from collections import Counter

import pytest
from support.inprocess import InProcess
from support.paths import ONTOLOGIES

from semreg.access.tokens import TokensFileError, parse_tokens
from semreg.errors import BadRequest
from semreg.registry.instances import Registration
from semreg.registry.selector import ALL, EVERYTHING, Selector, parse_selector

Q = {"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}
ENVIRONMENTS = ("default", "staging", "prod")
TOKENS = {"tokens": [
    {"name": "ops", "token": "t-admin-0123456789ab", "scopes": ["admin"], "environments": ["staging"]},  # admin sees all
    {"name": "stage", "token": "t-stage-0123456789ab", "scopes": ["read", "write"], "environments": ["staging"]},
    {"name": "two", "token": "t-two-0123456789ab", "scopes": ["read"], "environments": ["staging", "prod"]},
    {"name": "free", "token": "t-free-0123456789ab", "scopes": ["read", "write"]},
]}


def body(environment: str, kind: str = "Livro", port: int = 9000, **kw) -> dict:
    return {"service": f"{kind.lower()}s", "address": "10.0.0.1", "port": port, "ttl": 0,
            "tags": [f"ex:{kind} ex:temUmGenero ex:Terror"], "environment": environment, **kw}


def upload(c) -> None:
    r = c.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
              headers={"Content-Type": "text/turtle"})
    assert r.status_code in (200, 201), r.text


def load(c) -> None:
    """livros and filmes in each environment, with the same tags everywhere."""
    for n, env in enumerate(ENVIRONMENTS):
        for kind in ("Livro", "Filme"):
            r = c.put(f"/v1/instances/{kind.lower()}-{env}", json=body(env, kind, port=9000 + n))
            assert r.status_code == 201, r.text


@pytest.fixture
def srv():
    with InProcess() as server:
        c = server.client()
        upload(c)
        load(c)
        yield server


def ids(answer) -> list[str]:
    return [i["id"] for i in answer.json()["instances"]]


def environments(views) -> set[str]:
    return {v["environment"] for v in views}


# -- the selector itself ----------------------------------------------------------------------------
@pytest.mark.parametrize("environment, meta, admitted", [
    (None, [], ["a"]),
    ("staging", [], ["b", "c"]),
    (ALL, [], ["a", "b", "c"]),
    (ALL, [("zone", "eu")], ["a", "c"]),
    ("staging", [("zone", "eu")], ["c"]),
    ("staging", [("zone", "eu"), ("tier", "gold")], ["c"]),
    ("staging", [("zone", "eu"), ("zone", "us")], []),  # all must hold
    ("staging", [("tier", "")], []),  # an empty value is a value: the key must be there
    ("prod", [], []),
])
def test_a_selector_admits_its_environment_and_every_pair(environment, meta, admitted):
    regs = [Registration("a", "s", "h", 1, meta={"zone": "eu"}),
            Registration("b", "s", "h", 1, meta={"zone": "us"}, environment="staging"),
            Registration("c", "s", "h", 1, meta={"zone": "eu", "tier": "gold"}, environment="staging")]
    selector = parse_selector(environment, meta)
    assert [r.id for r in regs if selector.admits(r)] == admitted
    assert Selector.from_json(json.loads(json.dumps(selector.as_json()))) == selector


def test_selectors_are_one_question_whatever_the_order_of_their_pairs():
    assert parse_selector("e", [("b", "2"), ("a", "1"), ("b", "2")]) == parse_selector("e", [("a", "1"), ("b", "2")])
    assert parse_selector("", []) == Selector() and parse_selector(ALL) == EVERYTHING and EVERYTHING.everything
    assert Selector().covers({"default", "prod"}) and not Selector("staging").covers({"prod"})


@pytest.mark.parametrize("environment, meta, field", [
    ("x" * 257, [], "environment"), ("a\nb", [], "environment"), (None, [("", "v")], "meta."),
    (None, [("k" * 129, "v")], "meta." + "k" * 60), (None, [("k", "v" * 4097)], "meta.k")])
def test_a_bad_selector_is_a_400_naming_the_parameter(environment, meta, field):
    with pytest.raises(BadRequest) as caught:
        parse_selector(environment, meta)
    assert caught.value.extra["field"] == field


def test_an_instance_keeps_its_environment_in_its_record():
    reg = Registration("a", "s", "h", 1, environment="prod", meta={"k": "v"})
    assert Registration.from_record(reg.record()) == reg
    old = {k: v for k, v in reg.record().items() if k != "environment"}  # written before environments
    assert Registration.from_record(old).environment == "default"


def test_every_read_of_instances_declares_the_environment_and_the_meta_prefix():
    from semreg.http.openapi import document
    from semreg.http.routes import API

    reads = [("GET", "/v1/discover"), ("POST", "/v1/discover/tags"), ("GET", "/v1/tags"), ("GET", "/v1/instances"),
             ("GET", "/v1/route")]
    paths = document(API.endpoints)["paths"]
    for method, path in reads:
        endpoint = API.find(method, path)
        assert "environment" in endpoint.query_params and endpoint.query_prefixes == ("meta.",), path
        names = {p["name"]: p for p in paths[path][method.lower()]["parameters"]}
        assert "environment" in names and names["meta.{KEY}"]["x-semreg-prefix"] == "meta.", path
    assert not API.find("GET", "/v1/expand").query_prefixes


# -- registration -----------------------------------------------------------------------------------
def test_an_instance_shows_its_environment_and_defaults_to_default(srv):
    c = srv.client()
    assert c.get("/v1/instances/livro-staging").json()["environment"] == "staging"
    r = c.put("/v1/instances/plain", json={"service": "s", "address": "h", "port": 1, "ttl": 0})
    assert r.status_code == 201 and r.json()["environment"] == "default"


@pytest.mark.parametrize("environment", ["*", "", "x" * 257, "a\tb", 7, None])
def test_a_bad_environment_is_a_400_and_registers_nothing(srv, environment):
    c = srv.client()
    r = c.put("/v1/instances/bad", json=body(environment))
    assert r.status_code == 400 and r.json()["field"] == "environment", r.text
    assert c.get("/v1/instances/bad").status_code == 404


# -- every read sees one environment ----------------------------------------------------------------
def test_discovery_and_route_in_staging_never_name_a_prod_instance(srv):
    c = srv.client()
    staging = c.get("/v1/discover", params={**Q, "environment": "staging"})
    assert staging.status_code == 200
    assert ids(staging) == ["filme-staging", "livro-staging"]
    assert environments(staging.json()["instances"]) == {"staging"}
    assert {i["id"] for m in staging.json()["matches"] for i in m["instances"]} == {"filme-staging", "livro-staging"}
    assert ids(c.get("/v1/discover", params={**Q, "environment": "prod"})) == ["filme-prod", "livro-prod"]
    assert ids(c.get("/v1/discover", params=Q)) == ["filme-default", "livro-default"]  # without: default
    assert ids(c.get("/v1/discover", params={**Q, "environment": ""})) == ["filme-default", "livro-default"]
    assert len(ids(c.get("/v1/discover", params={**Q, "environment": "*"}))) == 6
    assert ids(c.get("/v1/discover", params={**Q, "environment": "nowhere"})) == []
    routed = Counter()
    for _ in range(20):
        r = c.get("/v1/route", params={**Q, "environment": "staging", "policy": "round-robin"}, follow_redirects=False)
        assert r.status_code == 307
        routed[r.headers["X-Semreg-Instance"]] += 1
    assert routed == {"filme-staging": 10, "livro-staging": 10}
    r = c.get("/v1/route", params={**Q, "environment": "nowhere"}, follow_redirects=False)
    assert r.status_code == 503 and "Retry-After" in r.headers


def test_every_read_of_instances_takes_the_environment(srv):
    c = srv.client()
    listed = c.get("/v1/instances", params={"environment": "prod"})
    assert [i["id"] for i in listed.json()] == ["filme-prod", "livro-prod"]
    assert [i["id"] for i in c.get("/v1/instances").json()] == ["filme-default", "livro-default"]
    assert len(c.get("/v1/instances", params={"environment": "*", "tags": "false"}).json()) == 6
    assert [i["id"] for i in c.get("/v1/instances", params={"environment": "*", "service": "livros"}).json()] == [
        "livro-default", "livro-prod", "livro-staging"]
    c.put("/v1/instances/pintura-prod", json=body("prod", "Pintura"))
    counts = {t["s"].rsplit("#", 1)[1]: t["instances"] for t in c.get("/v1/tags", params={"environment": "prod"}).json()["tags"]}
    assert counts == {"Livro": 1, "Filme": 1, "Pintura": 1}
    assert {t["instances"] for t in c.get("/v1/tags", params={"environment": "*"}).json()["tags"]} == {3, 1}
    assert [t["s"].rsplit("#", 1)[1] for t in c.get("/v1/tags").json()["tags"]] == ["Filme", "Livro"]
    peers = c.post("/v1/discover/tags", params={"environment": "staging"},
                   json={"tags": ["ex:Livro ex:temUmGenero ex:Terror", "ex:Pintura ex:temUmGenero ex:Terror"]}).json()
    assert {k.split("#")[1].split()[0]: [v["id"] for v in views] for k, views in peers["peers"].items()} == {
        "Livro": ["livro-staging"], "Pintura": []}


# -- meta filters --------------------------------------------------------------------------------------
def test_meta_filters_compose_with_semantic_matching_and_with_limit():
    with InProcess() as server:
        c = server.client()
        upload(c)
        zones = {"romance-eu": ("Romance", "eu", "gold"), "livro-eu": ("Livro", "eu", "silver"),
                 "livro-us": ("Livro", "us", "gold"), "filme-eu": ("Filme", "eu", "gold"),
                 "pintura-eu": ("Pintura", "eu", "gold"), "filme-eu-staging": ("Filme", "eu", "gold")}
        for n, (iid, (kind, zone, tier)) in enumerate(zones.items()):
            env = "staging" if iid.endswith("staging") else "default"
            tags = ["ex:Obra a ex:Pintura"] if kind == "Pintura" else [f"ex:{kind} ex:temUmGenero ex:Terror"]
            r = c.put(f"/v1/instances/{iid}", json={**body(env, kind, port=9100 + n), "tags": tags,
                                                    "meta": {"zone": zone, "tier": tier}})
            assert r.status_code == 201, r.text
        everything = ids(c.get("/v1/discover", params=Q))
        # ranked by the matching (Filme and Livro one step below Obra, Romance two), the filter after it
        assert everything == ["filme-eu", "livro-eu", "livro-us", "romance-eu"]
        eu = ids(c.get("/v1/discover", params={**Q, "meta.zone": "eu"}))
        assert eu == ["filme-eu", "livro-eu", "romance-eu"]
        assert ids(c.get("/v1/discover", params={**Q, "meta.zone": "eu", "limit": "2"})) == ["filme-eu", "livro-eu"]
        gold_eu = c.get("/v1/discover", params=[*Q.items(), ("meta.zone", "eu"), ("meta.tier", "gold"), ("limit", "2")])
        assert ids(gold_eu) == ["filme-eu", "romance-eu"]
        listed = {i["id"] for m in gold_eu.json()["matches"] for i in m["instances"]}
        assert listed == {"filme-eu", "romance-eu"}  # the references are cut with the ranked list
        both = [*Q.items(), ("meta.zone", "eu"), ("meta.zone", "us")]
        assert ids(c.get("/v1/discover", params=both)) == []  # repeated: all must hold
        staging = c.get("/v1/discover", params={**Q, "meta.zone": "eu", "environment": "staging", "limit": "5"})
        assert ids(staging) == ["filme-eu-staging"]
        broader = c.get("/v1/discover", params={"s": "ex:Livro", "p": "ex:temUmGenero", "o": "ex:Terror",
                                                "match": "all", "meta.tier": "gold"})
        assert ids(broader) == ["livro-us", "romance-eu"]  # exact, then narrower; livro-eu is silver
        assert [i["id"] for i in c.get("/v1/instances", params={"meta.tier": "silver"}).json()] == ["livro-eu"]
        counts = {t["s"].rsplit("#", 1)[1]: t["instances"] for t in c.get("/v1/tags", params={"meta.zone": "us"}).json()["tags"]}
        assert counts == {"Livro": 1}
        for _ in range(3):
            r = c.get("/v1/route", params={**Q, "meta.zone": "us"}, follow_redirects=False)
            assert r.headers["X-Semreg-Instance"] == "livro-us"
        bad = c.get("/v1/discover", params={**Q, "meta.": "x"})
        assert bad.status_code == 400 and bad.json()["field"] == "meta."


# -- watches -------------------------------------------------------------------------------------------
def test_a_watch_on_staging_sleeps_through_prod_and_wakes_for_staging(srv):
    c = srv.client()
    params = {**Q, "environment": "staging"}
    first = c.get("/v1/discover", params=params)
    index = int(first.headers["X-Semreg-Index"])
    watches = [c.submit("GET", "/v1/discover", params={**params, "index": index, "wait": "60s"})]
    for path in ("/v1/instances", "/v1/tags"):
        at = c.get(path, params={"environment": "staging"}).headers["X-Semreg-Index"]
        watches.append(c.submit("GET", path, params={"environment": "staging", "index": at, "wait": "60s"}))
    srv.settle()
    wakeups = srv.node.coordinator.hub.wakeups
    # the same tags again, in prod: a new instance, a replacement, a removal, a drain
    assert c.put("/v1/instances/romance-prod", json=body("prod", "Romance")).status_code == 201
    assert c.put("/v1/instances/livro-prod", json=body("prod", "Livro", port=9999)).status_code == 200
    assert c.delete("/v1/instances/filme-prod").status_code == 204
    assert c.put("/v1/instances/livro-default/heartbeat", json={"status": "draining"}).status_code == 200
    srv.settle()
    assert not any(w.done() for w in watches), "a change in another environment woke a staging watch"
    assert srv.node.coordinator.hub.wakeups == wakeups
    assert c.put("/v1/instances/romance-staging", json=body("staging", "Romance")).status_code == 201
    woke = [w.result(10) for w in watches]
    assert int(woke[0].headers["X-Semreg-Index"]) > index
    assert ids(woke[0]) == ["filme-staging", "livro-staging", "romance-staging"]
    assert [i["id"] for i in woke[1].json()] == ["filme-staging", "livro-staging", "romance-staging"]
    assert len(woke[2].json()["tags"]) == 3


def test_an_instance_moving_between_environments_wakes_the_watch_of_both(srv):
    c = srv.client()
    at = {env: c.get("/v1/discover", params={**Q, "environment": env}).headers["X-Semreg-Index"]
          for env in ("staging", "prod")}
    watches = {env: c.submit("GET", "/v1/discover", params={**Q, "environment": env, "index": at[env], "wait": "60s"})
               for env in at}
    srv.settle()
    assert c.put("/v1/instances/livro-staging", json=body("prod", "Livro")).status_code == 200
    assert ids(watches["staging"].result(10)) == ["filme-staging"]
    assert ids(watches["prod"].result(10)) == ["filme-prod", "livro-prod", "livro-staging"]


# -- tokens bound to environments ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    path = tmp_path_factory.mktemp("bound") / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    with InProcess(tokens_file=path) as server:
        admin = server.client("t-admin-0123456789ab")
        upload(admin)
        load(admin)
        yield server


READS = [("GET", "/v1/discover", Q), ("GET", "/v1/route", Q), ("GET", "/v1/instances", {}), ("GET", "/v1/tags", {})]


@pytest.mark.parametrize("method, path, params", READS)
def test_a_staging_token_reads_staging_and_gets_403_naming_any_other_environment(secured, method, path, params):
    stage = secured.client("t-stage-0123456789ab")
    ok = stage.request(method, path, params={**params, "environment": "staging"}, follow_redirects=False)
    assert ok.status_code in (200, 307), ok.text
    for environment, named in (("prod", "prod"), (None, "default"), ("*", "*")):
        query = {**params, **({"environment": environment} if environment else {})}
        r = stage.request(method, path, params=query, follow_redirects=False)
        assert r.status_code == 403, (environment, r.text)
        assert r.json()["environment"] == named
        assert f"'{named}'" in r.json()["error"] if named != "*" else "environment=*" in r.json()["error"]


def test_a_bound_token_is_checked_on_every_request_of_a_query_the_short_path_knows(secured):
    admin, stage = secured.client("t-admin-0123456789ab"), secured.client("t-stage-0123456789ab")
    params = {**Q, "environment": "prod"}
    for _ in range(2):  # the second answer comes from the short path for repeated reads
        assert ids(admin.get("/v1/discover", params=params)) == ["filme-prod", "livro-prod"]
    assert stage.get("/v1/discover", params=params).status_code == 403
    assert ids(stage.get("/v1/discover", params={**Q, "environment": "staging"})) == ["filme-staging", "livro-staging"]
    two = secured.client("t-two-0123456789ab")
    assert ids(two.get("/v1/discover", params=params)) == ["filme-prod", "livro-prod"]
    assert two.get("/v1/discover", params={**Q, "environment": "*"}).status_code == 403
    free = secured.client("t-free-0123456789ab")
    assert len(ids(free.get("/v1/discover", params={**Q, "environment": "*"}))) == 6


def test_a_staging_token_writes_only_in_staging(secured):
    stage, admin = secured.client("t-stage-0123456789ab"), secured.client("t-admin-0123456789ab")
    r = stage.put("/v1/instances/mine-prod", json=body("prod"))
    assert r.status_code == 403 and r.json()["environment"] == "prod"
    assert stage.put("/v1/instances/mine", json=body("default")).status_code == 403
    assert stage.put("/v1/instances/mine", json={k: v for k, v in body("x").items() if k != "environment"}
                     ).status_code == 403  # the default environment, unnamed
    assert stage.post("/v1/instances", json=body("prod")).status_code == 403
    batch = stage.post("/v1/instances/batch", json={"instances": [{**body("staging"), "id": "b1"},
                                                                  {**body("prod"), "id": "b2"}]})
    assert batch.status_code == 403 and batch.json()["environment"] == "prod"
    assert admin.get("/v1/instances/b1").status_code == 404  # all or nothing
    assert stage.put("/v1/instances/mine", json=body("staging")).status_code == 201
    assert stage.put("/v1/instances/mine/heartbeat", json={"load": 1}).status_code == 200
    # moving its own instance out of staging is a write in prod
    assert stage.put("/v1/instances/mine", json=body("prod")).status_code == 403
    # the admin moves it to prod: its owner may no longer touch it there
    moved = {**body("prod")}
    assert admin.put("/v1/instances/mine", json=moved).status_code == 200
    for r in (stage.get("/v1/instances/mine"), stage.put("/v1/instances/mine/heartbeat"),
              stage.delete("/v1/instances/mine")):  # not there, for this token (tests/access/test_bound_tokens.py)
        assert r.status_code == 404 and "environment" not in r.json(), r.text
    taken = stage.put("/v1/instances/mine", json=body("staging"))
    assert taken.status_code == 403 and "environment" not in taken.json() and "prod" not in taken.text
    assert stage.get("/v1/instances/livro-prod").status_code == 404
    assert stage.get("/v1/instances/livro-staging").json()["environment"] == "staging"
    assert stage.get("/v1/instances/nothing-here").status_code == 404
    assert admin.delete("/v1/instances/mine").status_code == 204


def test_a_bound_token_may_not_query_sparql_which_holds_every_environment(secured):
    stage, free = secured.client("t-stage-0123456789ab"), secured.client("t-free-0123456789ab")
    query = "SELECT ?e WHERE { ?i <https://w3id.org/semreg#environment> ?e }"
    for r in (stage.get("/sparql", params={"query": query}), stage.post("/sparql", data={"query": query})):
        assert r.status_code == 403 and "environment" in r.json()["error"]
    assert free.get("/sparql", params={"query": query}).status_code == 200
    assert secured.client("t-admin-0123456789ab").get("/sparql", params={"query": query}).status_code == 200


@pytest.mark.parametrize("environments, problem", [
    ([], "non-empty list"), ("staging", "non-empty list"), ([3], "non-empty list"), (["*"], "'*' is not an environment"),
    ([""], "1-256 characters")])
def test_a_tokens_file_with_bad_environments_is_refused(environments, problem):
    with pytest.raises(TokensFileError, match=problem):
        parse_tokens({"tokens": [{"name": "a", "token": "t" * 16, "scopes": ["read"], "environments": environments}]})
