"""Conjunctive discovery against a SPARQL formulation of the contract, on random data: a random class and
property hierarchy uploaded as an ontology, random instances registered, and random questions asked both of
`POST /v1/discover` and, through `/sparql`, of the store's registrations and closure (the ontology's graph and
`urn:semreg:inferred`, the union being the default graph). The two agree on which instances answer and at
which degree. In this process."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from support.inprocess import InProcess
from support.server import wait_for

R = "http://example.org/r#"
CLASSES = [f"{R}K{n}" for n in range(5)]
PROPERTIES = [f"{R}q{n}" for n in range(2)]
RANKS = {"exact": 0, "narrower": 1, "broader": 2, "overlap": 3}
DEGREE_OF = {v: k for k, v in RANKS.items()}

# Per component: 0 the same term, 1 the registered term below the queried one, 2 above, 9 unrelated (the
# random hierarchies have no cycles, so no two terms are equivalent). A tag's degree from its components'.
COMPONENT = ("IF({r} = {q}, 0, IF(EXISTS {{ {r} {rel} {q} }}, 1, IF(EXISTS {{ {q} {rel} {r} }}, 2, 9)))")
SUB_CLASS, SUB_PROPERTY = "rdfs:subClassOf", "rdfs:subPropertyOf"
QUERY = """PREFIX sr: <https://w3id.org/semreg#> PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
SELECT ?id (MAX(?best) AS ?degree) WHERE {{
  {{ SELECT ?id ?k (MIN(?rank) AS ?best) WHERE {{
      VALUES (?k ?qs ?qp ?qo) {{ {patterns} }}
      ?i a sr:Instance ; sr:id ?id ; sr:environment "default" ; sr:tag ?t .
      ?t rdf:subject ?s ; rdf:predicate ?p ; rdf:object ?o .
      BIND({ds} AS ?ds) BIND({dp} AS ?dp) BIND({do} AS ?do)
      FILTER(?ds < 9 && ?dp < 9 && ?do < 9)
      BIND(IF(?ds + ?dp + ?do = 0, 0, IF(?ds != 2 && ?dp != 2 && ?do != 2, 1,
           IF(?ds != 1 && ?dp != 1 && ?do != 1, 2, 3))) AS ?rank)
      FILTER(?rank IN ({accepted}))
      {provided}
  }} GROUP BY ?id ?k }}
}} GROUP BY ?id HAVING (COUNT(?k) = {n})"""
# provided: no tag of the instance whose predicate is at or below a provided tag's is left uncovered, covered
# meaning some provided tag is the same or below in each component
PROVIDED = """FILTER NOT EXISTS {{
        ?i sr:tag ?u . ?u rdf:subject ?us ; rdf:predicate ?up ; rdf:object ?uo .
        FILTER EXISTS {{ VALUES ?gp {{ {predicates} }} FILTER(?up = ?gp || EXISTS {{ ?up rdfs:subPropertyOf ?gp }}) }}
        FILTER NOT EXISTS {{ VALUES (?cs ?cp ?co) {{ {given} }}
          FILTER((?cs = ?us || EXISTS {{ ?cs rdfs:subClassOf ?us }}) && (?cp = ?up || EXISTS {{ ?cp rdfs:subPropertyOf ?up }})
                 && (?co = ?uo || EXISTS {{ ?co rdfs:subClassOf ?uo }})) }} }}"""


def sparql_answer(c, patterns, provided, match) -> dict[str, str]:
    rows = " ".join(f"({k} <{s}> <{p}> <{o}>)" for k, (s, p, o) in enumerate(patterns))
    rule = "" if provided is None else PROVIDED.format(
        predicates=" ".join(f"<{p}>" for _, p, _ in provided),
        given=" ".join(f"(<{s}> <{p}> <{o}>)" for s, p, o in provided))
    text = QUERY.format(patterns=rows, ds=COMPONENT.format(r="?s", q="?qs", rel=SUB_CLASS),
                        dp=COMPONENT.format(r="?p", q="?qp", rel=SUB_PROPERTY),
                        do=COMPONENT.format(r="?o", q="?qo", rel=SUB_CLASS),
                        accepted=", ".join(str(RANKS[d]) for d in sorted(match)), provided=rule, n=len(patterns))
    r = c.post("/sparql", content=text, headers={"Content-Type": "application/sparql-query",
                                                  "Accept": "application/sparql-results+json"})
    assert r.status_code == 200, r.text
    return {b["id"]["value"]: DEGREE_OF[int(b["degree"]["value"])] for b in r.json()["results"]["bindings"]}


def ontology(parents: list[list[int]], super_properties: list[int | None]) -> bytes:
    lines = ["@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> . @prefix owl: <http://www.w3.org/2002/07/owl#> ."]
    lines += [f"<{c}> a owl:Class ." for c in CLASSES] + [f"<{p}> a owl:ObjectProperty ." for p in PROPERTIES]
    for child, ups in enumerate(parents, 1):  # parents of K1..K4 among the classes before them: no cycles
        lines += [f"<{CLASSES[child]}> rdfs:subClassOf <{CLASSES[up % child]}> ." for up in ups]
    for child, up in enumerate(super_properties, 1):
        if up is not None:
            lines.append(f"<{PROPERTIES[child]}> rdfs:subPropertyOf <{PROPERTIES[up % child]}> .")
    return "\n".join(lines).encode()


@pytest.fixture(scope="module")
def srv():
    with InProcess() as server:
        yield server


def registered(c) -> set[str]:
    r = c.post("/sparql", content="SELECT ?id { ?i <https://w3id.org/semreg#id> ?id }",
               headers={"Content-Type": "application/sparql-query", "Accept": "application/sparql-results+json"})
    return {b["id"]["value"] for b in r.json()["results"]["bindings"]}


tag = st.tuples(st.sampled_from(CLASSES), st.sampled_from(PROPERTIES), st.sampled_from(CLASSES))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(parents=st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=2), min_size=4, max_size=4),
       super_properties=st.lists(st.one_of(st.none(), st.just(0)), min_size=1, max_size=1),
       instances=st.lists(st.lists(tag, min_size=1, max_size=5), min_size=1, max_size=10),
       patterns=st.lists(tag, min_size=1, max_size=3),
       provided=st.one_of(st.none(), st.lists(tag, min_size=1, max_size=2)),
       match=st.sets(st.sampled_from(sorted(RANKS)), min_size=1))
def test_conjunctive_discovery_answers_as_its_sparql_formulation(srv, parents, super_properties, instances, patterns,
                                                                 provided, match):
    c = srv.client()
    r = c.put("/v1/ontologies/random", content=ontology(parents, super_properties),
              headers={"Content-Type": "text/turtle"})
    assert r.status_code in (200, 201), r.text
    for old in c.get("/v1/instances").json():
        assert c.delete(f"/v1/instances/{old['id']}").status_code == 204
    for n, tags in enumerate(instances):
        body = {"service": "s", "address": "10.0.0.1", "port": 80, "ttl": 0, "tags": [" ".join(t) for t in tags]}
        assert c.put(f"/v1/instances/i{n}", json=body).status_code == 201
    wanted = {f"i{n}" for n in range(len(instances))}
    wait_for(lambda: registered(c) == wanted, 10, "the registrations in /sparql")
    body = {"all": [" ".join(t) for t in patterns], "match": sorted(match)}
    if provided is not None:
        body["provided"] = [" ".join(t) for t in provided]
    answer = c.post("/v1/discover", json=body)
    assert answer.status_code == 200, answer.text
    got = {i["id"]: i["match"]["degree"] for i in answer.json()["instances"]}
    assert got == sparql_answer(c, patterns, provided, match)
    event("degrees answered: " + ", ".join(sorted(set(got.values()))) if got else "no instance answers")
