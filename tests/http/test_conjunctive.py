"""`POST /v1/discover` with `all` over HTTP (API.md, Discovery): the answer's shape and what it carries, the
filters and limits of `GET /v1/discover`, its watch on the fake clock, and bad bodies (a 400 naming the field,
and nothing changed). In this process."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.inprocess import InProcess
from support.paths import ONTOLOGIES

from semreg.http.conjunctive_schemas import ConjunctiveView

EX = "http://example.org/obras#"
HORROR = "ex:Obra ex:temUmGenero ex:Terror"
A_WORK = "ex:Obra a ex:Obra"
BOTH = {"all": [HORROR, A_WORK]}


def register(c, iid: str, tags: list[str], **extra) -> None:
    body = {"service": extra.pop("service", iid), "address": "10.0.0.1", "port": 8000, "ttl": 0, "tags": tags, **extra}
    r = c.put(f"/v1/instances/{iid}", json=body)
    assert r.status_code in (200, 201), r.text


@pytest.fixture(scope="module")
def srv():
    with InProcess() as server:
        c = server.client()
        r = c.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                  headers={"Content-Type": "text/turtle"})
        assert r.status_code == 201, r.text
        register(c, "livros", ["ex:Livro ex:temUmGenero ex:Terror", "ex:Obra a ex:Livro"], meta={"zone": "eu"})
        register(c, "romances", ["ex:Romance ex:temUmGenero ex:Terror", "ex:Obra a ex:Romance"], service="books")
        register(c, "filmes", ["ex:Filme ex:temUmGenero ex:Terror"])
        register(c, "staged", ["ex:Livro ex:temUmGenero ex:Terror", "ex:Obra a ex:Livro"], environment="staging")
        yield server


def ids(r) -> list[str]:
    assert r.status_code == 200, r.text
    return [i["id"] for i in r.json()["instances"]]


def test_the_instances_matching_every_pattern_ranked_at_their_worst(srv):
    c = srv.client()
    r = c.post("/v1/discover", json=BOTH)
    assert ids(r) == ["livros", "romances"]  # filmes says nothing of being a work; staged is in another environment
    body = r.json()
    ConjunctiveView.model_validate(body)
    assert int(r.headers["x-semreg-index"]) > 0
    assert body["query"] == {"all": [{"s": EX + "Obra", "p": EX + "temUmGenero", "o": EX + "Terror"},
                                     {"s": EX + "Obra", "p": "http://www.w3.org/1999/02/22-rdf-syntax-ns#type",
                                      "o": EX + "Obra"}]}
    livros, romances = (i["match"] for i in body["instances"])
    assert (livros["degree"], livros["distance"], romances["distance"]) == ("narrower", 2, 4)
    assert [p["distance"] for p in romances["patterns"]] == [2, 2]
    assert romances["tag"] == romances["patterns"][0]["tag"]  # equal ones: the first pattern's is the worst
    assert [m["instances"] for m in body["matches"]] == [[{"id": "livros"}], [{"id": "romances"}]]
    assert "tags" not in body["instances"][0]
    # one pattern answers as GET /v1/discover does, the patterns aside
    one = c.post("/v1/discover", json={"all": [HORROR], "match": ["exact", "narrower"]}).json()
    get = c.get("/v1/discover", params={"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}).json()
    assert [(i["id"], {k: v for k, v in i["match"].items() if k != "patterns"}) for i in one["instances"]] == \
        [(i["id"], i["match"]) for i in get["instances"]]


def test_filters_limits_and_the_view_options_of_get(srv):
    c = srv.client()
    assert ids(c.post("/v1/discover", json={**BOTH, "limit": 1})) == ["livros"]
    assert ids(c.post("/v1/discover", json={**BOTH, "service": "books"})) == ["romances"]
    assert ids(c.post("/v1/discover", json={**BOTH, "meta": {"zone": "eu"}})) == ["livros"]
    assert ids(c.post("/v1/discover", json={**BOTH, "environment": "staging"})) == ["staged"]
    assert ids(c.post("/v1/discover", json={**BOTH, "environment": "*"})) == ["livros", "staged", "romances"]
    assert "tags" in c.post("/v1/discover", json={**BOTH, "tags": True}).json()["instances"][0]
    assert c.put("/v1/instances/romances/heartbeat", json={"status": "draining"}).status_code == 200
    try:
        assert ids(c.post("/v1/discover", json=BOTH)) == ["livros"]
        assert ids(c.post("/v1/discover", json={**BOTH, "status": "any"})) == ["livros", "romances"]
    finally:
        assert c.put("/v1/instances/romances/heartbeat", json={"status": "up"}).status_code == 200


def test_provided_keeps_the_instances_whose_needs_the_caller_covers(srv):
    c = srv.client()
    # needs on rdf:type: livros needs a Livro, romances a Romance; a Romance is a Livro
    assert ids(c.post("/v1/discover", json={**BOTH, "provided": ["ex:Obra a ex:Romance"]})) == ["livros", "romances"]
    assert ids(c.post("/v1/discover", json={**BOTH, "provided": ["ex:Obra a ex:Livro"]})) == ["livros"]
    assert ids(c.post("/v1/discover", json={**BOTH, "provided": ["ex:Obra a ex:Filme"]})) == []
    body = c.post("/v1/discover", json={**BOTH, "provided": [{"s": "ex:Obra", "p": "a", "o": "ex:Romance"}]}).json()
    assert body["query"]["provided"] == [{"s": EX + "Obra", "p": "http://www.w3.org/1999/02/22-rdf-syntax-ns#type",
                                          "o": EX + "Romance"}]


def test_unknown_terms_are_warned_about_by_the_pattern_that_names_them(srv):
    body = srv.client().post("/v1/discover", json={"all": [HORROR, "ex:Livr"]}).json()
    assert body["instances"] == [] and [w["field"] for w in body["warnings"]] == ["all[1]"]


def test_a_watch_wakes_only_when_its_own_answer_changes(srv):
    c = srv.client()
    first = c.post("/v1/discover", json=BOTH)
    index = first.headers["x-semreg-index"]
    waiting = c.submit("POST", "/v1/discover", params={"index": index, "wait": "60s"}, json=BOTH)
    register(c, "genre-only", ["ex:Filme ex:temUmGenero ex:Terror"])  # one pattern only: the answer is the same
    register(c, "elsewhere", ["ex:Livro ex:temUmGenero ex:Terror", "ex:Obra a ex:Livro"], environment="prod")
    register(c, "paintings", ["ex:Obra a ex:Pintura"])
    srv.settle()
    assert not waiting.done()
    register(c, "contos", ["ex:Livro ex:temUmGenero ex:Terror", "ex:Obra a ex:Livro"])
    r = waiting.result(30)
    assert ids(r) == ["contos", "livros", "romances"] and int(r.headers["x-semreg-index"]) > int(index)
    # and the wait ends on the clock when nothing changes
    again = c.submit("POST", "/v1/discover", params={"index": r.headers["x-semreg-index"], "wait": "30s"}, json=BOTH)
    srv.settle()
    assert not again.done()
    srv.advance(31)
    assert again.result(30).headers["x-semreg-index"] == r.headers["x-semreg-index"]
    for iid in ("genre-only", "elsewhere", "paintings", "contos"):
        assert c.delete(f"/v1/instances/{iid}").status_code == 204


MANY = ["ex:Livro"] * 65


@pytest.mark.parametrize("content, field", [
    (b"not json", None), (b"[1, 2]", None), (b'"all"', None), (b"{}", "all"),
    (b'{"all": []}', "all"), (b'{"all": "ex:Livro"}', "all"), (b'{"all": null}', "all"),
    ({"all": MANY}, "all"), ({"all": ["ex:Livro"], "provided": MANY}, "provided"),
    ({"all": ["ex:Livro", "nope:X"]}, "all[1]"), ({"all": ["ex:Livro", "ex:Livro ex:temUmGenero"]}, "all[1]"),
    ({"all": [{"s": "ex:Livro", "x": "y"}]}, "all[0]"), ({"all": [3]}, "all[0]"), ({"all": ["relative"]}, "all[0]"),
    ({"all": ["ex:Livro"], "provided": []}, "provided"), ({"all": ["ex:Livro"], "provided": ["ex:Livro"]}, "provided[0]"),
    ({"all": ["ex:Livro"], "match": "sideways"}, "match"), ({"all": ["ex:Livro"], "limit": 0}, "limit"),
    ({"all": ["ex:Livro"], "limit": "many"}, "limit"), ({"all": ["ex:Livro"], "status": "down"}, "status"),
    ({"all": ["ex:Livro"], "environment": "bad\u0001env"}, "environment"), ({"all": ["ex:Livro"], "colour": 1}, "colour"),
    ({"all": ["ex:Livro"], "meta": {"": "x"}}, "meta."), ({"all": ["ex:Livro"], "meta": {"k": 1}}, "meta.k"),
])
def test_a_bad_body_is_a_400_naming_the_field(srv, content, field):
    c = srv.client()
    kw = {"content": content, "headers": {"Content-Type": "application/json"}} if isinstance(content, bytes) else \
        {"json": content}
    r = c.post("/v1/discover", **kw)
    assert r.status_code == 400, r.text
    assert r.json()["error"]
    if field is not None:
        assert r.json().get("field") == field, r.json()


def test_a_parameter_of_the_question_in_the_query_string_is_a_400(srv):
    r = srv.client().post("/v1/discover", params={"s": "ex:Livro"}, json=BOTH)
    assert r.status_code == 400 and "s" in r.json()["parameters"]


def state(c) -> tuple:
    instances = c.get("/v1/instances", params={"environment": "*"})
    return instances.text, instances.headers["x-semreg-index"], c.get("/v1/tags", params={"environment": "*"}).text


terms = st.sampled_from(["ex:Livro", "ex:Obra a ex:Livro", HORROR, "nope:X", "a", "", " ", "<rel>", "ex:Obra x:y z:w"])
numbers = st.one_of(st.integers(-2, 2**70), st.floats(allow_nan=False, allow_infinity=False))  # what JSON can say
values = st.recursive(st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=12), terms),
                      lambda inner: st.one_of(st.lists(inner, max_size=4),
                                              st.dictionaries(st.sampled_from(["s", "p", "o", "k", ""]), inner,
                                                              max_size=3)), max_leaves=8)
bodies = st.dictionaries(st.sampled_from(["all", "provided", "match", "limit", "environment", "meta", "service",
                                          "status", "tags", "s", "x"]),
                         st.one_of(values, st.lists(terms, max_size=70)), max_size=6)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.one_of(bodies, values))
def test_any_body_is_answered_or_refused_and_changes_nothing(srv, body):
    c = srv.client()
    before = state(c)
    r = c.post("/v1/discover", json=body)
    assert r.status_code in (200, 400), r.text
    assert r.json().get("error") if r.status_code == 400 else "instances" in r.json()
    assert state(c) == before
