"""An instance as RDF (the registry vocabulary), written as N-Quads text: the graph the contract
describes, literals escaped, and each instance's blank nodes its own."""
from __future__ import annotations

import pyoxigraph as ox

from semreg.storage.store import REGISTRY
from semreg.storage.vocabulary import instance_nquads

VIEW = {"id": "svc-1.a:b", "service": 'say "hi" \\ then\nnewline', "environment": "staging",
        "address": "10.0.0.1", "port": 8080,
        "scheme": "http", "status": "draining", "weight": 5, "capacity": 10, "ttl": 30.0, "deregister_after": 90.0,
        "registered_at": "2026-12-01T00:00:00Z", "check": {"http": "http://10.0.0.1:8080/health"},
        "meta": {"zone": "é\r"}, "tags": [{"s": "http://ex.org/Livro", "p": "http://ex.org/temUmGenero",
                                          "o": "http://ex.org/Terror"},
                                         {"s": "http://ex.org/Obra", "p": "https://w3id.org/semreg#Any",
                                          "o": "https://w3id.org/semreg#Any"}]}
EXPECTED = """
@prefix sr: <https://w3id.org/semreg#> . @prefix rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> . @prefix ex: <http://ex.org/> .
<urn:semreg:instance:svc-1.a:b> a sr:Instance ; sr:id "svc-1.a:b" ; sr:service "say \\"hi\\" \\\\ then\\nnewline" ;
  sr:environment "staging" ; sr:address "10.0.0.1" ; sr:port "8080"^^xsd:integer ; sr:scheme "http" ; sr:status "draining" ;
  sr:weight "5"^^xsd:integer ; sr:capacity "10"^^xsd:integer ; sr:ttl "30"^^xsd:decimal ;
  sr:deregisterAfter "90"^^xsd:decimal ; sr:registeredAt "2026-12-01T00:00:00Z"^^xsd:dateTime ;
  sr:checkHttp "http://10.0.0.1:8080/health" ; sr:meta [ sr:key "zone" ; sr:value "é\\r" ] ;
  sr:tag [ a rdf:Statement ; rdf:subject ex:Livro ; rdf:predicate ex:temUmGenero ; rdf:object ex:Terror ] ,
         [ a rdf:Statement ; rdf:subject ex:Obra ; rdf:predicate sr:Any ; rdf:object sr:Any ] .
"""


def dataset(quads) -> ox.Dataset:
    d = ox.Dataset(quads)
    d.canonicalize(ox.CanonicalizationAlgorithm.UNSTABLE)
    return d


def test_an_instance_is_the_graph_the_contract_describes():
    got = list(ox.parse(instance_nquads(VIEW).encode(), format=ox.RdfFormat.N_QUADS))
    assert {q.graph_name for q in got} == {REGISTRY}
    expected = [ox.Quad(t.subject, t.predicate, t.object, REGISTRY)
                for t in ox.parse(EXPECTED.encode(), format=ox.RdfFormat.TURTLE)]
    assert dataset(got) == dataset(expected)


def test_two_instances_never_share_a_tag_node():
    other = {**VIEW, "id": "svc-2", "meta": {}}
    store = ox.Store()
    store.load((instance_nquads(VIEW) + instance_nquads(other)).encode(), format=ox.RdfFormat.N_QUADS)
    rows = store.query("SELECT ?i (COUNT(DISTINCT ?t) AS ?n) WHERE { GRAPH ?g { ?i <https://w3id.org/semreg#tag> ?t } "
                       "} GROUP BY ?i ORDER BY ?i")
    assert [(r["i"].value, int(r["n"].value)) for r in rows] == [("urn:semreg:instance:svc-1.a:b", 2),
                                                                 ("urn:semreg:instance:svc-2", 2)]
