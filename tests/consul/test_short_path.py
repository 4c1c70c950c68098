"""The short path of the repeated Consul reads: a read asked before is answered from the kept answer while it
stands, and what decides that answer (the caller and the environments it may see, the namespace, the saved
queries' names) decides which kept answer it is. Each case repeats its reads, so the second of each is the short
path's."""
from __future__ import annotations

import json

from support.case_study import SAVED_QUERY, horror_by_meaning
from support.tokens import ADMIN, BOUND, READ, TOKENS

from semreg.consul import catalog

HORROR_BOOK = ["ex:Livro ex:temUmGenero ex:Terror"]


def register(consul, sid: str, name: str, tags: list[str], ns: str | None = None) -> None:
    body = {"ID": sid, "Name": name, "Tags": tags, "Address": "10.0.0.9", "Port": 9000}
    if ns is not None:
        body["Namespace"] = ns
    assert consul.put("/v1/agent/service/register", json=body).status_code == 200


def ids(entries: list[dict]) -> set[str]:
    return {e["Service"]["ID"] for e in entries}


def test_a_saved_query_s_name_answers_each_caller_as_its_environments_allow(in_process, tmp_path):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    srv = in_process(consul_listen="127.0.0.1:8500", tokens_file=tokens)
    horror_by_meaning(srv.client(ADMIN))
    register(srv.consul(ADMIN), "staged-book", "livros", HORROR_BOOK, ns="staging")
    path, params = f"/v1/health/service/{SAVED_QUERY}", {"ns": "staging"}
    for _ in range(3):  # the reader sees the saved query (of the default environment); the bound token does not
        assert ids(srv.consul(READ).get(path, params=params).json()) == {"staged-book"}
        assert srv.consul(BOUND).get(path, params=params).json() == []
    for token in ("no-such-token", None):  # a caller the kept answer's readers were not is admitted first
        r = srv.consul(token).get(path, params=params)
        assert r.status_code == 403 and "ACL not found" in r.text


def test_the_namespace_header_decides_like_the_parameter(srv):
    register(srv.consul(), "staged-book", "livros", HORROR_BOOK, ns="staging")
    c = srv.consul()
    for _ in range(3):
        assert ids(c.get("/v1/health/service/livros").json()) == {"livro-1", "livro-2"}
        assert ids(c.get("/v1/health/service/livros", headers={"X-Consul-Namespace": "staging"}).json()) == \
            {"staged-book"}


def test_a_name_saved_as_a_query_after_it_was_read_answers_by_meaning_at_once(srv):
    c = srv.consul()
    register(c, "novela-1", "novelas", ["ex:Pintura ex:temUmGenero ex:Drama"])
    for _ in range(2):
        assert ids(c.get("/v1/health/service/novelas").json()) == {"novela-1"}
    r = srv.client().put("/v1/queries/novelas", json={"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"})
    assert r.status_code in (200, 201)
    for _ in range(2):
        entries = c.get("/v1/health/service/novelas").json()
        assert ids(entries) == {"livro-1", "filme-1"}
        assert {e["Service"]["Meta"]["semreg-degree"] for e in entries} == {"narrower"}
    assert srv.client().delete("/v1/queries/novelas").status_code in (200, 204)
    assert ids(c.get("/v1/health/service/novelas").json()) == {"novela-1"}


def test_a_kept_answer_is_the_handler_s_answer_byte_for_byte(srv, monkeypatch):
    handled = []
    source = catalog.source
    monkeypatch.setattr(catalog, "source", lambda *a: handled.append(a[2]) or source(*a))
    c = srv.consul()
    for path, meta in (("/v1/health/service/livros", "Service.Meta"), (f"/v1/catalog/service/{SAVED_QUERY}",
                                                                         "ServiceMeta")):
        for params in ({}, {"passing": "1"}, {"tag": "blue"}, {"filter": f'{meta}.x != "y"'}):
            first = c.get(path, params=params)
            handled.clear()
            second = c.get(path, params=params)
            assert handled == []  # not handled: sent as kept
            assert first.status_code == second.status_code == 200
            assert first.content == second.content
            assert dict(first.headers) == dict(second.headers)


def test_another_datacenter_is_refused_on_every_read_however_its_parameter_is_spelled(srv):
    c = srv.consul()
    for _ in range(2):
        assert c.get("/v1/health/service/livros").status_code == 200
        for query in ("dc=elsewhere", "d%63=elsewhere", "%64%63=elsewhere", "passing=1&dc=elsewhere"):
            r = c.get(f"/v1/health/service/livros?{query}")
            assert r.status_code == 400 and "No path to datacenter" in r.text, query
