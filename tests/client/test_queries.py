"""Saved queries through the Python clients (`Client.saved(name)`, `put_query` and the rest): against the
app in this process, served on a loopback port."""
from __future__ import annotations

import asyncio
import warnings

import pytest

from semreg.client import AsyncClient, Client, NoInstanceAvailable, NotFound, UnknownTermWarning


@pytest.fixture(scope="module")
def url(app_server, api):
    c = api  # the case study's ontology uploaded
    for n, kind in enumerate(("Livro", "Filme")):
        assert c.put(f"/v1/instances/{kind.lower()}", json={
            "service": kind.lower(), "address": f"10.0.0.{n + 1}", "port": 80, "ttl": 0,
            "tags": [f"ex:{kind} ex:temUmGenero ex:Terror"]}).status_code == 201
    return app_server.listen()


def test_a_client_saves_lists_asks_and_deletes_a_query(url):
    with Client(url, cache_ttl_s=0) as client:
        saved = client.put_query("horror", s="ex:Obra", p="ex:temUmGenero", o="ex:Terror", match=["exact", "narrower"])
        assert saved["match"] == "exact,narrower"
        assert client.get_query("horror") == saved
        assert "horror" in [q["name"] for q in client.list_queries()]
        found = client.saved("horror").discover()
        assert sorted(i["id"] for i in found["instances"]) == ["filme", "livro"]
        assert "tags" in client.saved("horror").discover(tags=True)["instances"][0]
        route = client.saved("horror").route(path="/x")
        assert route.endswith("/x") and route.instance_id in ("filme", "livro")
        assert {g["targets"][0] for g in client.saved("horror").targets()} == {"10.0.0.1:80", "10.0.0.2:80"}
        with pytest.warns(UnknownTermWarning, match="no registered tag matches"):
            client.put_query("paintings", s="ex:Pintura")
        with pytest.raises(NoInstanceAvailable):
            client.saved("paintings").route()
        client.delete_query("horror")
        with pytest.raises(NotFound):
            client.get_query("horror")


def test_a_client_warns_of_unknown_terms_in_a_saved_query(url):
    with Client(url, cache_ttl_s=0) as client, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client.put_query("unknown", s="ex:Escultura")
    assert [w.category for w in caught] == [UnknownTermWarning, UnknownTermWarning]


def test_the_async_client_has_the_same_calls(url):
    async def main() -> list[str]:
        async with AsyncClient(url, cache_ttl_s=0) as client:
            await client.put_query("films", s="ex:Filme")
            found = await client.saved("films").discover()
            await client.delete_query("films")
            return [i["id"] for i in found["instances"]]

    assert asyncio.run(main()) == ["filme"]


def test_a_client_asks_several_patterns_at_once_and_saves_them(url):
    with Client(url, cache_ttl_s=0) as client:
        both = client.discover_all(["ex:Obra ex:temUmGenero ex:Terror", {"s": "ex:Livro"}], match=["exact", "narrower"])
        assert [i["id"] for i in both["instances"]] == ["livro"]
        assert len(both["instances"][0]["match"]["patterns"]) == 2
        provided = client.discover_all(["ex:Obra ex:temUmGenero ex:Terror"],
                                       provided=["ex:Filme ex:temUmGenero ex:Terror"])
        assert [i["id"] for i in provided["instances"]] == ["filme"]
        saved = client.put_query("both", all=["ex:Obra ex:temUmGenero ex:Terror", "ex:Livro"])
        assert len(saved["all"]) == 2 and "s" not in saved
        assert client.saved("both").discover() == both
        client.delete_query("both")
        scored = client.discover_all(["ex:Obra ex:temUmGenero ex:Terror"], match="all,similar", rank="score")
        scores = [i["match"]["score"] for i in scored["instances"]]
        assert scores and scores == sorted(scores, reverse=True)
        assert client.put_query("scored", all=["ex:Obra"], match="all,similar", rank="score")["rank"] == "score"
        client.delete_query("scored")

    async def asked() -> dict:
        async with AsyncClient(url, cache_ttl_s=0) as aclient:
            return await aclient.discover_all(["ex:Obra ex:temUmGenero ex:Terror", "ex:Livro"])

    assert asyncio.run(asked()) == both
