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
