"""The example queries in queries/ run against a live registry and say what their comments promise."""
from __future__ import annotations

from pathlib import Path

import pytest
from support.paths import ONTOLOGIES, ROOT

EX = "http://example.org/obras#"
QUERIES = ROOT / "queries"
JSON = {"Accept": "application/sparql-results+json"}


@pytest.fixture(scope="module")
def api(app_server):
    with app_server.client() as c:
        assert c.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                     headers={"Content-Type": "text/turtle"}).status_code == 201
        regs = {"gw": ["ex:Obra a owl:Thing"], "livros": ["ex:Obra a ex:Livro", "ex:Livro ex:temUmGenero ex:Terror"],
                "filmes": ["ex:Filme ex:temUmGenero ex:Terror"], "pinturas": ["ex:Obra a ex:Pintura"],
                "romances": ["ex:Romance ex:temGeneroPrincipal ex:Terror"]}
        for iid, tags in regs.items():
            service = "livros" if iid in ("livros", "romances") else iid  # the service queries/instances-by-service.rq names
            assert c.put(f"/v1/instances/{iid}", json={"service": service, "address": "10.0.0.1", "port": 80,
                                                       "tags": tags, "ttl": 0, "meta": {"k": "v"}}).status_code == 201
        assert c.put("/v1/instances/payments-staging", json={"service": "payments", "address": "10.0.0.9", "port": 80,
                                                             "ttl": 0, "environment": "staging"}).status_code == 201
        yield c


def select(api, name: str) -> list[dict[str, str]]:
    r = api.post("/sparql", content=(QUERIES / name).read_text(), headers={"Content-Type": "application/sparql-query",
                                                                          **JSON})
    assert r.status_code == 200, r.text
    return [{k: v["value"] for k, v in b.items()} for b in r.json()["results"]["bindings"]]


def test_instances_by_service(api):
    assert [row["id"] for row in select(api, "instances-by-service.rq")] == ["livros", "romances"]


def test_tags_of_instances(api):
    rows = select(api, "tags-of-instances.rq")
    assert {"id": "filmes", "s": EX + "Filme", "p": EX + "temUmGenero", "o": EX + "Terror"} in rows
    assert len(rows) == 6


def test_discover_by_meaning_agrees_with_the_api(api):
    sparql = sorted({row["id"] for row in select(api, "discover-by-meaning.rq")})
    body = api.get("/v1/discover", params={"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}).json()
    assert sparql == sorted(i["id"] for i in body["instances"]) == ["filmes", "livros", "romances"]


def test_instances_by_environment(api):
    assert select(api, "instances-by-environment.rq") == [
        {"environment": "default", "status": "up", "instances": "5"},
        {"environment": "staging", "status": "up", "instances": "1"}]


def test_subclasses_closure_includes_entailed_ones(api):
    assert [row["class"] for row in select(api, "subclasses-closure.rq")] == [
        EX + "Filme", EX + "Livro", EX + "Pintura", EX + "Romance"]


def test_ontologies(api):
    rows = select(api, "ontologies.rq")
    assert [r["graph"] for r in rows] == ["urn:semreg:ontology:obras"] and int(rows[0]["triples"]) > 10


def test_replacing_an_instance_leaves_only_its_new_rdf(api):
    assert api.put("/v1/instances/livros", json={"service": "livros", "address": "10.0.0.2", "port": 81,
                                                 "tags": ["ex:Livro"], "ttl": 0}).status_code == 200
    q = ("PREFIX sr: <https://w3id.org/semreg#> SELECT (COUNT(*) AS ?n) WHERE { GRAPH <urn:semreg:registry> { "
         "<urn:semreg:instance:livros> ?p ?o } }")
    n = api.get("/sparql", params={"query": q}, headers=JSON).json()["results"]["bindings"][0]["n"]["value"]
    q2 = ("PREFIX sr: <https://w3id.org/semreg#> SELECT ?a WHERE { <urn:semreg:instance:livros> sr:address ?a }")
    assert [b["a"]["value"] for b in api.get("/sparql", params={"query": q2}, headers=JSON).json()["results"]["bindings"]] \
        == ["10.0.0.2"]
    assert int(n) == 13  # 12 fields and one tag link; the old tags, meta and address are gone
    assert api.delete("/v1/instances/livros").status_code == 204
    q3 = ("ASK { GRAPH <urn:semreg:registry> { <urn:semreg:instance:livros> ?p ?o } }")
    assert api.get("/sparql", params={"query": q3}, headers=JSON).json()["boolean"] is False


def test_every_query_file_is_tested():
    names = {p.name for p in Path(QUERIES).iterdir()}
    tested = {"instances-by-service.rq", "tags-of-instances.rq", "discover-by-meaning.rq", "subclasses-closure.rq",
              "ontologies.rq", "delete-instance.ru", "instances-by-environment.rq"}
    assert names == tested


def test_records_are_not_part_of_the_sparql_dataset(api):
    graphs = api.get("/sparql", params={"query": "SELECT DISTINCT ?g WHERE { GRAPH ?g { ?s ?p ?o } }"},
                     headers=JSON).json()["results"]["bindings"]
    names = {b["g"]["value"] for b in graphs}
    assert {"urn:semreg:registry", "urn:semreg:inferred", "urn:semreg:ontology:obras"} <= names
    assert "urn:semreg:records" not in names
    q = "ASK { ?s <https://w3id.org/semreg#json> ?o }"
    assert api.get("/sparql", params={"query": q}, headers=JSON).json()["boolean"] is False


def test_a_repeated_query_sees_every_write(api):
    q = "PREFIX sr: <https://w3id.org/semreg#> SELECT ?id WHERE { ?i sr:service \"cache\" ; sr:id ?id } ORDER BY ?id"

    def ids():
        return [b["id"]["value"] for b in api.get("/sparql", params={"query": q}, headers=JSON).json()["results"]["bindings"]]

    assert ids() == []
    for n in range(3):
        assert api.put(f"/v1/instances/c{n}", json={"service": "cache", "address": "h", "port": 1, "ttl": 0}).status_code == 201
        assert ids() == [f"c{k}" for k in range(n + 1)]
    assert api.delete("/v1/instances/c0").status_code == 204
    assert ids() == ["c1", "c2"]
