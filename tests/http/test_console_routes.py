"""What the console needs of the server, over HTTP with the app in this process: its files under `/ui/`
(with `/` redirecting there), who a token is (`/v1/token/self`), the owner on instance views, every
concept with its parents (`/v1/concepts`), why a tag matched (`why` on `/v1/expand`), and watches of the
ontology list."""
from __future__ import annotations

import json

import pytest
from support.inprocess import InProcess
from support.paths import ONTOLOGIES

EX = "http://example.org/obras#"
SUB_CLASS = "http://www.w3.org/2000/01/rdf-schema#subClassOf"
SUB_PROPERTY = "http://www.w3.org/2000/01/rdf-schema#subPropertyOf"
OBRAS = (ONTOLOGIES / "obras.ttl").read_bytes()
TURTLE = {"Content-Type": "text/turtle"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    path = tmp_path_factory.mktemp("console-tokens") / "tokens.json"
    path.write_text(json.dumps({"tokens": [{"name": "ops", "token": "t-admin-0123456789ab", "scopes": ["admin"]},
                                           {"name": "team-a", "token": "t-a-0123456789ab", "scopes": ["read", "write"]}]}))
    server = InProcess(tokens_file=path)
    try:
        yield server.start()
    finally:
        server.stop()


def test_root_redirects_to_the_console_whose_files_come_from_the_package(api):
    r = api.get("/")
    assert r.status_code == 307 and r.headers["location"] == "/ui/"
    page = api.get("/ui/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert api.get("/ui/no-such-file.js").status_code == 404


def test_console_files_are_open_but_the_api_is_not(secured):
    anonymous = secured.client()
    assert anonymous.get("/").status_code == 307
    assert anonymous.get("/ui/").status_code == 200
    assert anonymous.get("/v1/instances").status_code == 401


def test_token_self_says_who_the_token_is(api, secured):
    assert api.get("/v1/token/self").json() == {"name": "anonymous", "scopes": ["read", "write", "admin"],
                                                "tokens": False}
    assert secured.client().get("/v1/token/self").json() == {"name": "anonymous", "scopes": [], "tokens": True}
    assert secured.client("nope").get("/v1/token/self").status_code == 401
    assert secured.client("t-a-0123456789ab").get("/v1/token/self").json() == {"name": "team-a", "scopes": ["read", "write"],
                                                                  "tokens": True}
    assert secured.client("t-admin-0123456789ab").get("/v1/token/self").json()["scopes"] == ["read", "write", "admin"]


def test_views_name_their_owner_when_tokens_are_in_force(api, secured):
    body = {"service": "s", "address": "127.0.0.1", "port": 1, "ttl": 0}
    assert secured.client("t-a-0123456789ab").put("/v1/instances/owned", json=body).json()["owner"] == "team-a"
    assert secured.client("t-admin-0123456789ab").get("/v1/instances/owned").json()["owner"] == "team-a"
    assert "owner" not in api.put("/v1/instances/unowned", json=body).json()
    assert api.delete("/v1/instances/unowned").status_code == 204


def test_concepts_list_every_concept_with_its_asserted_parents(api):
    concepts = {c["iri"]: c for c in api.get("/v1/concepts").json()["concepts"]}
    assert concepts[EX + "Romance"] == {"iri": EX + "Romance", "kind": "class", "label": "Novel",
                                        "parents": [EX + "Livro"]}
    assert concepts[EX + "temGeneroPrincipal"]["kind"] == "property"
    assert concepts[EX + "temGeneroPrincipal"]["parents"] == [EX + "temUmGenero"]


def test_expand_says_why_each_tag_matched(api):
    body = {"service": "romances", "address": "127.0.0.1", "port": 1, "ttl": 0,
            "tags": ["ex:Romance ex:temGeneroPrincipal ex:Terror"]}
    assert api.put("/v1/instances/romances", json=body).status_code in (200, 201)
    answer = api.get("/v1/expand", params={"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}).json()
    (tag,) = [t for t in answer["tags"] if t["tag"]["s"] == EX + "Romance"]
    assert tag["degree"] == "narrower" and tag["distance"] == 3
    why = tag["why"]
    assert why["s"] == {"degree": "narrower", "steps": [
        {"s": EX + "Romance", "p": SUB_CLASS, "o": EX + "Livro", "asserted": True},
        {"s": EX + "Livro", "p": SUB_CLASS, "o": EX + "Obra", "asserted": True}]}
    assert why["p"]["steps"] == [{"s": EX + "temGeneroPrincipal", "p": SUB_PROPERTY, "o": EX + "temUmGenero",
                                  "asserted": True}]
    assert why["o"] == {"degree": "exact", "steps": []}
    broad = api.get("/v1/expand", params={"s": "ex:Romance", "match": "all"}).json()
    assert any(t["why"]["p"] == {"degree": "narrower", "steps": [], "wildcard": True} for t in broad["tags"])
    assert api.delete("/v1/instances/romances").status_code == 204


def test_the_ontology_list_is_watchable(api, app_server):
    first = api.get("/v1/ontologies")
    index = first.headers["X-Semreg-Index"]
    watch = api.submit("GET", "/v1/ontologies", params={"index": index, "wait": "60s"})
    app_server.settle()
    assert not watch.done()
    assert api.put("/v1/ontologies/second", content=b"<http://x.org/A> a <http://www.w3.org/2002/07/owl#Class> .",
                   headers=TURTLE).status_code == 201
    answer = watch.result(10)
    assert int(answer.headers["X-Semreg-Index"]) > int(index)
    assert [o["name"] for o in answer.json()] == ["obras", "second"]
    assert api.delete("/v1/ontologies/second").status_code == 204


def test_route_preview_names_the_pick_without_handing_out_the_route(api):
    for iid, weight in (("heavy", 3), ("light", 1)):
        body = {"service": "works", "address": "127.0.0.1", "port": 1, "ttl": 0, "weight": weight,
                "tags": ["ex:Livro ex:temUmGenero ex:Terror"]}
        assert api.put(f"/v1/instances/{iid}", json=body).status_code in (200, 201)
    q = {"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}
    first = api.get("/v1/route/preview", params=q).json()
    assert first["policy"] == "least-load" and first["instance"]["id"] == "heavy"
    assert {c["id"]: c["effective_load"] for c in first["candidates"]} == {"heavy": 0, "light": 0}
    assert api.get("/v1/route/preview", params=q).json() == first  # a preview counts no route
    routed = api.get("/v1/route", params=q, follow_redirects=False)
    assert routed.headers["X-Semreg-Instance"] == "heavy"
    after = api.get("/v1/route/preview", params=q).json()
    assert {c["id"]: c["effective_load"] for c in after["candidates"]} == {"heavy": 1, "light": 0}
    assert api.get("/v1/route/preview", params={"s": "nope:X"}).status_code == 400
    assert api.get("/v1/route/preview", params={"s": "ex:Drama"}).json()["instance"] is None
    for iid in ("heavy", "light"):
        assert api.delete(f"/v1/instances/{iid}").status_code == 204


def test_the_example_queries_are_one_request_away(api):
    examples = {q["name"]: q["query"] for q in api.get("/ui/queries.json").json()}
    assert "discover-by-meaning.rq" in examples and "delete-instance.ru" not in examples
    assert "SELECT" in examples["tags-of-instances.rq"]


def test_ontology_files_are_sent_as_the_media_table_says(api):
    assert api.get("/ui/file-types.json").json()[".ttl"] == "text/turtle"
