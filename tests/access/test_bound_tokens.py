"""A token bound to environments sees exactly what a server holding only its environments would show
(API.md, Access): each read below is asked of a registry holding `staging` and `prod` with a `staging`
token, and of a registry holding only the `staging` half with an unbound token, and the answers must be
the same. In this process, over HTTP, on a fake clock."""
from __future__ import annotations

import json

import pytest
from support.inprocess import InProcess
from support.paths import ONTOLOGIES

ADMIN, STAGE, READER = "t-admin-0123456789ab", "t-stage-0123456789ab", "t-reader-0123456789ab"
TOKENS = {"tokens": [{"name": "ops", "token": ADMIN, "scopes": ["admin"]},
                     {"name": "stage", "token": STAGE, "scopes": ["read", "write"], "environments": ["staging"]},
                     {"name": "reader", "token": READER, "scopes": ["read"]}]}
SECRET = "http://prod.example/Secreto"  # a term no ontology knows, named only by a prod instance's tag
INSTANCES = {
    "livro-staging": ("staging", ["ex:Livro ex:temUmGenero ex:Terror"]),
    "filme-prod": ("prod", ["ex:Filme ex:temUmGenero ex:Terror", f"<{SECRET}>"]),
    "pintura-prod": ("prod", ["ex:Pintura"]),
}
READS = [("/v1/expand", {"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror", "match": "all"}),
         ("/v1/expand", {"s": "ex:Obra"}), ("/v1/expand", {"s": f"<{SECRET}>"}),
         ("/v1/concepts/" + SECRET, {}), ("/v1/concepts/ex:Filme", {}), ("/v1/concepts/ex:Livro", {}),
         ("/v1/instances/filme-prod", {}), ("/v1/instances/nothing-here", {}), ("/v1/instances/livro-staging", {})]


def fill(server: InProcess, token: str | None, environments: tuple[str, ...]) -> None:
    c = server.client(token)
    r = c.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
              headers={"Content-Type": "text/turtle"})
    assert r.status_code == 201, r.text
    for n, (iid, (environment, tags)) in enumerate(INSTANCES.items()):
        if environment in environments:
            body = {"service": iid, "address": "10.0.0.1", "port": 9000 + n, "ttl": 0, "tags": tags,
                    "environment": environment}
            assert c.put(f"/v1/instances/{iid}", json=body).status_code == 201


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """(both environments with tokens, only staging's and open)."""
    path = tmp_path_factory.mktemp("bound") / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    with InProcess(tokens_file=path) as both, InProcess() as alone:
        fill(both, ADMIN, ("staging", "prod"))
        fill(alone, None, ("staging",))
        yield both, alone


@pytest.mark.parametrize("path, params", READS)
def test_a_bound_token_reads_what_a_server_of_its_environments_alone_answers(servers, path, params):
    both, alone = servers
    bound = both.client(STAGE).get(path, params=params)
    expected = alone.client().get(path, params=params)
    assert (bound.status_code, without_owner(bound.json())) == (expected.status_code, expected.json())


def without_owner(view: dict) -> dict:
    """A view without `owner`, which only a server with tokens shows."""
    return {k: v for k, v in view.items() if k != "owner"}


def test_expand_lists_only_the_tags_of_its_environments(servers):
    both, _ = servers
    params = {"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror", "match": "all"}
    tags = [t["tag"]["s"] for t in both.client(STAGE).get("/v1/expand", params=params).json()["tags"]]
    assert [t.rsplit("#", 1)[-1] for t in tags] == ["Livro"]
    unbound = [t["tag"]["s"] for t in both.client(READER).get("/v1/expand", params=params).json()["tags"]]
    assert sorted(t.rsplit("#", 1)[-1] for t in unbound) == ["Filme", "Livro", "Pintura"]


def test_a_term_only_another_environment_uses_is_unknown_to_a_bound_token(servers):
    both, _ = servers
    assert both.client(READER).get("/v1/concepts/" + SECRET).status_code == 200
    hidden = both.client(STAGE).get("/v1/concepts/" + SECRET)
    assert hidden.status_code == 404 and set(hidden.json()) == {"error"}


def test_another_environments_instance_is_404_with_the_body_of_an_unknown_id(servers):
    both, _ = servers
    stage = both.client(STAGE)
    for verb, suffix in (("GET", ""), ("PUT", "/heartbeat"), ("DELETE", "")):
        other = stage.request(verb, f"/v1/instances/filme-prod{suffix}")
        unknown = stage.request(verb, f"/v1/instances/nothing{suffix}")
        assert other.status_code == unknown.status_code == 404
        assert other.json() == {"error": unknown.json()["error"].replace("nothing", "filme-prod")}
    assert both.client(ADMIN).get("/v1/instances/filme-prod").status_code == 200  # still there


def test_metrics_which_count_every_environment_are_not_for_a_bound_token(servers):
    both, _ = servers
    refused = both.client(STAGE).get("/metrics")
    assert refused.status_code == 403 and "bound to environments" in refused.json()["error"]
    assert both.client(READER).get("/metrics").status_code == 200
    assert both.client(ADMIN).get("/metrics").status_code == 200


@pytest.mark.parametrize("body", [
    {"s": "ex:Filme", "p": "ex:temUmGenero", "environment": "staging"},
    {"all": [{"s": "ex:Filme", "p": "ex:temUmGenero"}, {"s": "ex:Livro"}], "environment": "staging"},
])
def test_a_saved_query_warns_a_bound_token_as_a_server_of_its_environments_alone_would(servers, body):
    """Only prod has a tag of ex:Filme: a staging token must not learn that from a missing warning."""
    both, alone = servers
    bound = both.client(STAGE).put("/v1/queries/leak-check", json=body)
    expected = alone.client().put("/v1/queries/leak-check", json=body)
    try:
        assert bound.status_code == expected.status_code == 201, bound.text
        assert bound.json().get("warnings") == expected.json().get("warnings")
        assert any("no registered tag matches" in w["message"] for w in bound.json()["warnings"])
        unbound = both.client(ADMIN).put("/v1/queries/leak-check", json=body)  # it sees prod's tag
        assert not any("no registered tag" in w["message"] for w in unbound.json().get("warnings", []))
    finally:
        both.client(ADMIN).delete("/v1/queries/leak-check")
        alone.client().delete("/v1/queries/leak-check")


@pytest.fixture
def fresh(tmp_path):
    """(both environments with tokens, only staging's and open), for tests that write."""
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    with InProcess(tokens_file=path) as both, InProcess() as alone:
        fill(both, ADMIN, ("staging", "prod"))
        fill(alone, None, ("staging",))
        yield both, alone


WATCHED = [("/v1/instances", {"environment": "staging"}), ("/v1/instances", {"environment": "staging", "limit": "5"}),
           ("/v1/discover", {"s": "ex:Obra", "p": "ex:temUmGenero", "environment": "staging"}),
           ("/v1/tags", {"environment": "staging"}), ("/v1/changes", {}), ("/v1/changes", {"environment": "staging"})]


def indexes(server: InProcess, token: str | None, reads=WATCHED) -> list[int]:
    c = server.client(token)
    return [int(c.get(path, params=params).headers["X-Semreg-Index"]) for path, params in reads]


def put(server: InProcess, token: str | None, iid: str, environment: str, tag: str):
    body = {"service": iid, "address": "10.0.0.2", "port": 9100, "ttl": 0, "tags": [tag], "environment": environment}
    r = server.client(token).put(f"/v1/instances/{iid}", json=body)
    assert r.status_code in (200, 201), r.text
    return r


def test_the_index_a_bound_token_sees_moves_only_with_its_environments(fresh):
    both, alone = fresh
    before, alone_before = indexes(both, STAGE), indexes(alone, None)
    for n in range(5):
        put(both, ADMIN, f"prod-{n}", "prod", "ex:Filme ex:temUmGenero ex:Terror")
    assert both.client(ADMIN).delete("/v1/instances/prod-0").status_code == 204
    assert indexes(both, STAGE) == before  # nothing of its environments changed: nothing moved
    for server, token in ((both, STAGE), (alone, None)):
        put(server, token, "livro-2", "staging", "ex:Livro ex:temUmGenero ex:Terror")
    after, alone_after = indexes(both, STAGE), indexes(alone, None)
    assert all(a > b for a, b in zip(after, before))
    assert [a - b for a, b in zip(after, before)] == [a - b for a, b in zip(alone_after, alone_before)]
    new_question = [("/v1/discover", {"s": "ex:Livro", "environment": "staging"})]  # a topic made only now
    assert indexes(both, STAGE, new_question)[0] - before[0] == indexes(alone, None, new_question)[0] - alone_before[0]


def test_watches_wake_for_the_changes_their_reader_may_see(fresh):
    both, _ = fresh
    stage, reader = both.client(STAGE), both.client(READER)
    instances = {"environment": "staging"}
    at = stage.get("/v1/instances", params=instances).headers["X-Semreg-Index"]
    since = stage.get("/v1/changes").headers["X-Semreg-Index"]
    listed = stage.submit("GET", "/v1/instances", params={**instances, "index": at, "wait": "60s"})
    changed = stage.submit("GET", "/v1/changes", params={"index": since, "wait": "60s"})
    everywhere = reader.get("/v1/changes").headers["X-Semreg-Index"]
    every = reader.submit("GET", "/v1/changes", params={"index": everywhere, "wait": "60s"})
    put(both, ADMIN, "prod-9", "prod", "ex:Pintura")
    both.settle()
    assert [c["id"] for c in every.result(10).json()["changes"]] == ["prod-9"]  # an unbound reader sees it
    assert not listed.done() and not changed.done()
    put(both, STAGE, "livro-9", "staging", "ex:Livro")
    woken = listed.result(10)
    assert int(woken.headers["X-Semreg-Index"]) > int(at) and "livro-9" in woken.text
    answered = changed.result(10)
    assert [c["id"] for c in answered.json()["changes"]] == ["livro-9"] and not answered.json()["reset"]
    assert int(answered.headers["X-Semreg-Index"]) == int(since) + 1
    again = stage.get("/v1/changes", params={"index": answered.headers["X-Semreg-Index"], "wait": "0s"}).json()
    assert again == {"changes": [], "reset": False}
