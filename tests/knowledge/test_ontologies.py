"""Ontologies through the HTTP API, in-process: what discovery and SPARQL see after uploads, replacements,
deletions and restarts, and that a change the store refuses leaves the reasoner as it was."""
from __future__ import annotations

from contextlib import contextmanager

import pyoxigraph as ox
import pytest
from support.inprocess import Client, InProcess
from support.paths import DATA

from semreg.storage.store import Store

X = "http://example.org/x#"
FAMILY = b"""@prefix x: <http://example.org/x#> . @prefix owl: <http://www.w3.org/2002/07/owl#> .
x:FamilyDestination a owl:Class ; owl:equivalentClass [ a owl:Class ; owl:intersectionOf
    ( x:Destination [ a owl:Restriction ; owl:onProperty x:hasAudience ; owl:someValuesFrom x:Family ] ) ] .
x:Beach a owl:Class ; owl:intersectionOf ( x:Destination x:Family ) .
"""
TURTLE = {"Content-Type": "text/turtle"}
NTRIPLES = {"Content-Type": "application/n-triples"}
INFERRED = "SELECT ?s ?p ?o WHERE { GRAPH <urn:semreg:inferred> { ?s ?p ?o } }"


@contextmanager
def client(store: Store | None = None):
    with InProcess(store=store) as server:
        yield server.client()


def test_a_class_equivalent_to_an_anonymous_intersection_has_its_ancestors():
    with client() as c:
        assert c.put("/v1/ontologies/travel", content=FAMILY, headers=TURTLE).status_code == 201
        concept = c.get("/v1/concepts/x:FamilyDestination").json()
        assert X + "Destination" in concept["ancestors"]
        assert X + "Destination" in c.get("/v1/concepts/x:Beach").json()["ancestors"]
        r = c.put("/v1/instances/kids-trips", json={"service": "trips", "address": "127.0.0.1", "port": 8000, "ttl": 0,
                                                     "tags": ["x:FamilyDestination"]})
        assert r.status_code == 201, r.text
        found = c.get("/v1/discover", params={"s": "x:Destination"}).json()
        assert [i["id"] for i in found["instances"]] == ["kids-trips"]
        assert [(m["tag"]["s"], m["degree"]) for m in found["matches"]] == [(X + "FamilyDestination", "narrower")]


def inferred_graph(c: Client) -> set[tuple[str, str, str]]:
    r = c.get("/sparql", params={"query": INFERRED}, headers={"Accept": "application/sparql-results+json"})
    assert r.status_code == 200, r.text
    return {tuple(b[v]["value"] if b[v]["type"] != "bnode" else "_:" + b[v]["value"] for v in "spo")
            for b in r.json()["results"]["bindings"]}


def concepts(c: Client, terms: list[str]) -> list[dict]:
    return [c.get("/v1/concepts/" + t.replace("#", "%23")).json() for t in terms]


ONTOLOGIES = DATA / "ontologies"
WATCHED = ["http://www.w3.org/ns/sosa/Sensor", "http://xmlns.com/foaf/0.1/Person", "http://www.w3.org/ns/ssn/System",
           "https://schema.org/Book", "http://purl.org/goodrelations/v1#Offering"]


FILES = {"schema": "schemaorg-30.0-current-https.ttl", "sosa": "sosa-2017-04-17.n3", "foaf": "foaf-0.99.n3",
         "ssn": "ssn-2017-04-17.n3", "gr": "goodrelations-2011-10-01.n3"}


def changes() -> tuple[list[tuple[str, bytes | None, dict]], list[tuple[str, bytes, dict]]]:
    """Uploads, a replacement and deletions; and the ontologies they leave, to upload at once."""
    body = {name: (ONTOLOGIES / f).read_bytes() for name, f in FILES.items()}
    person = ox.NamedNode("http://xmlns.com/foaf/0.1/Person")  # FOAF without what it says of foaf:Person
    smaller_foaf = ox.serialize([q for q in ox.parse(body["foaf"], format=ox.RdfFormat.TURTLE) if q.subject != person],
                                format=ox.RdfFormat.N_TRIPLES)
    steps = [(name, content, TURTLE) for name, content in body.items()]
    steps += [("foaf", smaller_foaf, NTRIPLES), ("sosa", None, {}), ("gr", None, {})]
    return steps, [("schema", body["schema"], TURTLE), ("foaf", smaller_foaf, NTRIPLES), ("ssn", body["ssn"], TURTLE)]


def apply(c, steps) -> None:
    for name, content, headers in steps:
        if content is None:
            assert c.delete(f"/v1/ontologies/{name}").status_code == 204
        else:
            assert c.put(f"/v1/ontologies/{name}", content=content, headers=headers).status_code in (200, 201)


@pytest.mark.slow
def test_changes_over_http_end_where_a_fresh_server_starts():
    """The closure graph SPARQL reads and the concepts discovery reads, after uploads, a replacement
    and deletions patched in, are those of a server given the remaining ontologies at once."""
    steps, remaining = changes()
    with client() as c:
        apply(c, steps)
        changed, changed_concepts = inferred_graph(c), concepts(c, WATCHED)
    with client() as c:
        apply(c, remaining)
        assert inferred_graph(c) == changed
        assert concepts(c, WATCHED) == changed_concepts


@pytest.mark.process
def test_a_restart_computes_the_patched_closure_graph_again(start_server, tmp_path):
    """A restart computes the closure graph from the recorded ontologies: it is the graph the changes
    patched, blank nodes included (each document's are labelled by its digest, the same on every parse)."""
    steps, remaining = changes()
    server = start_server(data_dir=tmp_path / "data")
    with server.client() as c:
        apply(c, steps)
        changed, changed_concepts = inferred_graph(c), concepts(c, WATCHED)
    server.stop()
    server = start_server(data_dir=tmp_path / "data")
    with server.client() as c:
        assert inferred_graph(c) == changed and concepts(c, WATCHED) == changed_concepts
        assert len(c.get("/v1/ontologies").json()) == 3


class RefusingStore(Store):
    """A store whose next ontology write fails, as a full disk would make it."""

    refuse = False

    def save_ontology(self, meta, source):
        if self.refuse:
            self.refuse = False
            raise OSError("no space left on device")
        super().save_ontology(meta, source)


def test_an_upload_the_store_refuses_leaves_the_reasoning_as_it_was():
    store = RefusingStore(None)
    with client(store=store) as c:
        assert c.put("/v1/ontologies/travel", content=FAMILY, headers=TURTLE).status_code == 201
        before = inferred_graph(c), concepts(c, [X + "FamilyDestination", X + "Beach"])
        store.refuse = True
        with pytest.raises(OSError):
            c.put("/v1/ontologies/travel", content=b"@prefix x: <http://example.org/x#> . x:Beach a x:Other .",
                  headers=TURTLE)
        assert (inferred_graph(c), concepts(c, [X + "FamilyDestination", X + "Beach"])) == before
        assert c.put("/v1/ontologies/other", content=b"<http://example.org/x#Lake> a <http://example.org/x#Destination> .",
                     headers=TURTLE).status_code == 201
        assert X + "Lake" in c.get("/v1/concepts/x:Destination").json()["descendants"]


DBO = "http://dbpedia.org/ontology/"


def test_the_conventional_prefix_of_a_vocabulary_an_upload_uses_undeclared():
    """DBpedia's files declare no prefix for their own terms: dbo: is known all the same."""
    undeclared = f"<{DBO}Writer> <http://www.w3.org/2000/01/rdf-schema#subClassOf> <{DBO}Person> .".encode()
    with client() as c:
        assert "dbo" not in c.get("/v1/prefixes").json()
        assert c.put("/v1/ontologies/writers", content=undeclared, headers=NTRIPLES).status_code == 201
        assert c.get("/v1/prefixes/dbo").json() == {"prefix": "dbo", "iri": DBO}
        assert c.get("/v1/concepts/dbo:Writer").json()["ancestors"] == [DBO + "Person"]
        r = c.put("/v1/prefixes/dbo", json={"iri": "http://other/"})
        assert r.status_code == 409 and r.json()["ontologies"] == {"writers": DBO}

        own = f"@prefix dbo: <http://example.org/not-dbpedia#> . <{DBO}Poet> a <{DBO}Writer> .".encode()
        assert c.put("/v1/ontologies/own", content=own, headers=TURTLE).status_code == 201
        assert c.get("/v1/prefixes/dbo").json()["iri"] == "http://example.org/not-dbpedia#", "a declaration wins"
        assert c.delete("/v1/ontologies/own").status_code == 204
        assert c.get("/v1/prefixes/dbo").json()["iri"] == DBO
        assert c.delete("/v1/ontologies/writers").status_code == 204
        assert c.get("/v1/prefixes/dbo").status_code == 404
