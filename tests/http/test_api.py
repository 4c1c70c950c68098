"""Instances, discovery and ontologies over HTTP, with the app in this process."""
from __future__ import annotations

import logging

from support.paths import ONTOLOGIES

EX = "http://example.org/obras#"


def put(c, iid, tags, **kw):
    body = {"service": kw.pop("service", iid), "address": "127.0.0.1", "port": 8000, "tags": tags, "ttl": 0, **kw}
    return c.put(f"/v1/instances/{iid}", json=body)


def test_case_study(api):
    regs = {"gw": ["ex:Obra a owl:Thing"], "livros": ["ex:Obra a ex:Livro", "ex:Livro ex:temUmGenero ex:Terror"],
            "filmes": ["ex:Filme ex:temUmGenero ex:Terror"], "pinturas": ["ex:Obra a ex:Pintura"]}
    for iid, tags in regs.items():
        assert put(api, iid, tags).status_code in (200, 201)
    body = api.get("/v1/discover", params={"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}).json()
    assert sorted(i["id"] for i in body["instances"]) == ["filmes", "livros"]
    assert [(m["tag"]["s"], m["degree"], m["distance"]) for m in body["matches"]] == [
        (EX + "Filme", "narrower", 1), (EX + "Livro", "narrower", 1)]
    for iid in regs:
        assert api.delete(f"/v1/instances/{iid}").status_code == 204


def test_instance_life_cycle(api):
    r = put(api, "svc-1", ["ex:Livro"], weight=5, capacity=10, meta={"zone": "a"}, ttl=30)
    assert r.status_code == 201
    view = r.json()
    assert view["status"] == "up" and view["weight"] == 5 and view["meta"] == {"zone": "a"}
    assert view["tags"] == [{"s": EX + "Livro", "p": "https://w3id.org/semreg#Any", "o": "https://w3id.org/semreg#Any"}]
    assert view["expires_at"].endswith("Z")
    assert put(api, "svc-1", ["ex:Livro"]).status_code == 200
    hb = api.put("/v1/instances/svc-1/heartbeat", json={"load": 3, "status": "draining"})
    assert hb.status_code == 200 and "expires_at" in hb.json()
    assert api.get("/v1/instances/svc-1").json()["status"] == "draining"
    assert api.put("/v1/instances/svc-1/heartbeat").status_code == 200  # body optional
    assert [i["id"] for i in api.get("/v1/instances", params={"service": "svc-1"}).json()] == ["svc-1"]
    assert api.get("/v1/instances", params={"service": "none-such"}).json() == []
    assert api.delete("/v1/instances/svc-1").status_code == 204
    assert api.delete("/v1/instances/svc-1").status_code == 404
    assert api.get("/v1/instances/svc-1").status_code == 404
    assert api.put("/v1/instances/svc-1/heartbeat", json={}).status_code == 404


def test_post_assigns_an_id(api):
    r = api.post("/v1/instances", json={"service": "anon", "address": "h", "port": 1, "tags": [], "ttl": 0})
    assert r.status_code == 201
    iid = r.json()["id"]
    assert r.headers["location"] == f"/v1/instances/{iid}"
    assert api.get(f"/v1/instances/{iid}").status_code == 200
    api.delete(f"/v1/instances/{iid}")


def test_batch_is_all_or_nothing(api):
    ok = [{"id": f"b{n}", "service": "batch", "address": "h", "port": 1000 + n, "tags": ["ex:Filme"], "ttl": 0}
          for n in range(50)]
    bad = [*ok[:10], {"id": "b-bad", "service": "batch", "address": "h", "port": 70000, "tags": []}]
    r = api.post("/v1/instances/batch", json={"instances": bad})
    assert r.status_code == 400 and "instances[10].port" in r.json()["error"]
    assert api.get("/v1/instances", params={"service": "batch"}).json() == []
    r = api.post("/v1/instances/batch", json={"instances": ok})
    assert r.status_code == 200 and r.json() == {"registered": 50}
    assert len(api.get("/v1/instances", params={"service": "batch"}).json()) == 50
    dup = api.post("/v1/instances/batch", json={"instances": [ok[0], ok[0]]})
    assert dup.status_code == 400 and "more than once" in dup.json()["error"]
    for n in range(50):
        api.delete(f"/v1/instances/b{n}")


def test_discover_filters_and_views(api):
    put(api, "f-up", ["ex:Filme ex:temUmGenero ex:Terror"], service="films")
    put(api, "f-drain", ["ex:Filme ex:temUmGenero ex:Terror"], service="films")
    put(api, "l-other", ["ex:Romance ex:temGeneroPrincipal ex:Terror"], service="books")
    api.put("/v1/instances/f-drain/heartbeat", json={"status": "draining"})
    q = {"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}
    assert [i["id"] for i in api.get("/v1/discover", params=q).json()["instances"]] == ["f-up", "l-other"]
    body = api.get("/v1/discover", params={**q, "status": "any"}).json()
    assert {i["id"]: i["status"] for i in body["instances"]} == {"f-up": "up", "f-drain": "draining", "l-other": "up"}
    assert [i["id"] for i in api.get("/v1/discover", params={**q, "service": "books"}).json()["instances"]] == ["l-other"]
    assert len(api.get("/v1/discover", params={**q, "limit": 1}).json()["instances"]) == 1
    body = api.get("/v1/discover", params={**q, "match": "exact"}).json()
    assert body["instances"] == [] and body["matches"] == []
    # distance ranks: Filme (1+0+0) before Romance (2+1+0)
    dist = {m["tag"]["s"]: m["distance"] for m in api.get("/v1/discover", params=q).json()["matches"]}
    assert dist == {EX + "Filme": 1, EX + "Romance": 3}
    for iid in ("f-up", "f-drain", "l-other"):
        api.delete(f"/v1/instances/{iid}")


def test_tags_and_exact_multi_tag_lookup(api):
    put(api, "t1", ["ex:Livro ex:temUmGenero ex:Terror", "ex:Filme"])
    put(api, "t2", ["ex:Livro ex:temUmGenero ex:Terror"])
    tags = {(t["s"], t["p"], t["o"]): t["instances"] for t in api.get("/v1/tags").json()["tags"]}
    assert tags[(EX + "Livro", EX + "temUmGenero", EX + "Terror")] == 2
    peers = api.post("/v1/discover/tags", json={"tags": ["ex:Livro ex:temUmGenero ex:Terror", {"s": "ex:Obra"}]})
    assert peers.status_code == 200
    key = f"{EX}Livro {EX}temUmGenero {EX}Terror"
    assert [i["id"] for i in peers.json()["peers"][key]] == ["t1", "t2"]
    assert peers.json()["peers"][f"{EX}Obra https://w3id.org/semreg#Any https://w3id.org/semreg#Any"] == []
    api.delete("/v1/instances/t1")
    api.delete("/v1/instances/t2")


def test_expand_and_concepts(api):
    body = api.get("/v1/expand", params={"s": "ex:Obra", "p": "ex:temUmGenero", "match": "all"}).json()
    s = {(row["iri"], row["degree"], row["distance"]) for row in body["components"]["s"]}
    assert {(EX + "Obra", "exact", 0), (EX + "Livro", "narrower", 1), (EX + "Romance", "narrower", 2)} <= s
    assert body["components"]["o"][0]["wildcard"] is True
    c = api.get("/v1/concepts/ex:Livro").json()
    assert c["iri"] == EX + "Livro" and c["kind"] == "class" and c["label"] == "Book"
    assert c["parents"] == [EX + "Obra"] and c["children"] == [EX + "Romance"]
    assert EX + "Obra" in c["ancestors"] and c["descendants"] == [EX + "Romance"]
    full = api.get("/v1/concepts/" + (EX + "Livro").replace("#", "%23"))
    assert full.status_code == 200 and full.json()["iri"] == EX + "Livro"
    assert api.get("/v1/concepts/ex:Nothing").status_code == 404
    assert api.get("/v1/concepts/nope:X").status_code == 400


def test_ontology_routes(api):
    listing = api.get("/v1/ontologies").json()
    assert [o["name"] for o in listing] == ["obras"] and listing[0]["triples"] > 0 and listing[0]["inferred"] > 0
    ttl = api.get("/v1/ontologies/obras")
    assert ttl.status_code == 200 and ttl.headers["content-type"].startswith("text/turtle")
    nt = api.get("/v1/ontologies/obras", headers={"Accept": "application/n-triples"})
    assert nt.headers["content-type"].startswith("application/n-triples") and f"<{EX}Livro>" in nt.text
    xml = api.get("/v1/ontologies/obras", headers={"Accept": "application/rdf+xml;q=0.9, text/turtle;q=0.1"})
    assert xml.headers["content-type"].startswith("application/rdf+xml")
    specific = api.get("/v1/ontologies/obras", headers={"Accept": "*/*, text/turtle;q=0"})  # the specific range decides
    assert specific.headers["content-type"].startswith("application/n-triples")
    refused = api.get("/v1/ontologies/obras", headers={"Accept": "image/png"})
    assert refused.status_code == 406 and refused.json() == {"error": (
        "none of 'image/png' is offered; ask for one of text/turtle, application/n-triples, application/rdf+xml, "
        "application/ld+json, text/n3.")}
    assert api.get("/v1/ontologies/none").status_code == 404
    extra = b"@prefix x: <http://example.org/extra#> . x:A <http://www.w3.org/2000/01/rdf-schema#subClassOf> x:B ."
    assert api.put("/v1/ontologies/extra", content=extra, headers={"Content-Type": "text/n3"}).status_code == 201
    assert api.get("/v1/prefixes").json()["x"] == "http://example.org/extra#"
    assert api.get("/v1/concepts/x:A").json()["parents"] == ["http://example.org/extra#B"]
    assert api.delete("/v1/ontologies/extra").status_code == 204
    gone = api.get("/v1/concepts/x:A")  # the prefix went with the ontology that declared it
    assert gone.status_code == 400 and gone.json()["prefix"] == "x"
    assert api.get("/v1/concepts/" + "http://example.org/extra%23A").status_code == 404
    assert api.delete("/v1/ontologies/extra").status_code == 404


def test_rdf_xml_and_json_ld_uploads(api):
    xml = (b'<?xml version="1.0"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
           b'xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#" xmlns:k="http://example.org/k#">'
           b'<rdf:Description rdf:about="http://example.org/k#Kid"><rdfs:subClassOf '
           b'rdf:resource="http://example.org/k#Person"/></rdf:Description></rdf:RDF>')
    assert api.put("/v1/ontologies/k", content=xml, headers={"Content-Type": "application/rdf+xml"}).status_code == 201
    assert api.get("/v1/prefixes").json()["k"] == "http://example.org/k#"
    jsonld = (b'{"@context": {"j": "http://example.org/j#", "rdfs": "http://www.w3.org/2000/01/rdf-schema#"}, '
              b'"@id": "j:Cat", "rdfs:subClassOf": {"@id": "j:Animal"}}')
    assert api.put("/v1/ontologies/j", content=jsonld, headers={"Content-Type": "application/ld+json"}).status_code == 201
    assert api.get("/v1/concepts/j:Cat").json()["ancestors"] == ["http://example.org/j#Animal"]
    nt = b"<http://example.org/n#A> <http://www.w3.org/2000/01/rdf-schema#subClassOf> <http://example.org/n#B> .\n"
    assert api.put("/v1/ontologies/n", content=nt, headers={"Content-Type": "application/n-triples"}).status_code == 201
    for name in ("k", "j", "n"):
        assert api.delete(f"/v1/ontologies/{name}").status_code == 204


def test_prefix_routes(api):
    assert api.put("/v1/prefixes/zz", json={"iri": "http://example.org/zz#"}).status_code == 201
    assert api.put("/v1/prefixes/zz", json={"iri": "http://example.org/zz2#"}).status_code == 200
    assert api.get("/v1/prefixes/zz").json() == {"prefix": "zz", "iri": "http://example.org/zz2#"}
    assert put(api, "pz", ["zz:Thing"]).json()["tags"][0]["s"] == "http://example.org/zz2#Thing"
    assert api.put("/v1/prefixes/rdf", json={"iri": "http://evil/"}).status_code == 400
    assert api.put("/v1/prefixes/bad%20name", json={"iri": "http://x/"}).status_code == 400
    assert api.put("/v1/prefixes/ok", json={"iri": "relative"}).status_code == 400
    assert api.delete("/v1/prefixes/zz").status_code == 204
    assert api.delete("/v1/prefixes/zz").status_code == 404
    api.delete("/v1/instances/pz")


def test_a_prefix_an_ontology_declares_is_redefined_only_on_purpose(api, caplog):
    def obra() -> str:
        return api.get("/v1/discover", params={"s": "ex:Obra"}).json()["query"]["s"]

    r = api.put("/v1/prefixes/ex", json={"iri": "http://other/"})
    assert r.status_code == 409, r.text
    assert r.json()["ontologies"] == {"obras": EX} and r.json()["prefix"] == "ex"
    assert r.json()["error"].startswith(f"the prefix 'ex' is declared by the ontology 'obras' (as {EX});")
    assert "?force=true" in r.json()["error"]
    assert obra() == EX + "Obra" and api.get("/v1/prefixes/ex").json()["iri"] == EX, "a refused change changes nothing"
    assert api.put("/v1/prefixes/ex", json={"iri": EX}).status_code == 201, "the same namespace contradicts nothing"
    assert api.delete("/v1/prefixes/ex").status_code == 204

    with caplog.at_level(logging.INFO, "semreg.knowledge"):
        assert api.put("/v1/prefixes/ex", params={"force": "true"}, json={"iri": "http://other/"}).status_code == 201
        assert obra() == "http://other/Obra"
        assert api.delete("/v1/prefixes/ex").status_code == 204
    assert obra() == EX + "Obra", "without the client prefix, the ontology's declaration is back"
    logged = [(r.getMessage(), r.__dict__) for r in caplog.records if r.name == "semreg.knowledge"]
    (set_msg, set_), (del_msg, del_) = logged[-2:]
    assert set_msg == "prefix set" and (set_["prefix"], set_["iri"], set_["previous"], set_["forced"]) == (
        "ex", "http://other/", EX, True) and set_["declared_by"] == ["obras"] and set_["by"] == "anonymous"
    assert del_msg == "prefix deleted" and (del_["previous"], del_["now"]) == ("http://other/", EX)


def test_index_header_never_zero_and_lists_are_arrays(api):
    for path, params in (("/v1/instances", {}), ("/v1/tags", {}), ("/v1/discover", {"s": "ex:Obra"})):
        r = api.get(path, params=params)
        assert int(r.headers["x-semreg-index"]) > 0


def test_cluster_and_health(api):
    assert api.get("/healthz").json()["status"] == "alive"
    assert api.get("/readyz").status_code == 200
    c = api.get("/v1/cluster").json()
    assert c["members"][0]["status"] == "alive" and c["node"] == c["members"][0]["id"]


def test_metrics(api):
    put(api, "m1", ["ex:Livro"])
    assert api.get("/v1/route", params={"s": "ex:Obra"}, follow_redirects=False).status_code == 307
    api.get("/v1/discover", params={"s": "ex:Obra"})
    api.get("/v1/discover", params={"s": "nope:Obra"})
    text = api.get("/metrics").text
    assert 'semreg_http_requests_total{method="GET",route="/v1/discover",status="200"}' in text
    assert 'semreg_http_requests_total{method="GET",route="/v1/discover",status="400"}' in text
    assert "semreg_http_request_duration_seconds_bucket" in text
    assert 'semreg_instances{status="up"}' in text and "semreg_watches " in text
    assert "semreg_closure_rebuilds_total" in text and "semreg_closure_rebuild_seconds_count" in text
    assert "semreg_checks_total" in text and "semreg_check_failures_total" in text
    assert 'semreg_routes_total{policy="least-load"} 1.0' in text
    api.delete("/v1/instances/m1")


def test_transport_example(in_process):
    srv = in_process(ontologies=(ONTOLOGIES / "transport.ttl",))
    with srv.client() as c:
        for iid, tag in {"ev": "tr:ElectricCar tr:hasPrimaryFuel tr:Electricity", "bio": "tr:Automobile tr:hasFuel tr:Biodiesel",
                         "hvo": "tr:Truck tr:hasFuel tr:RenewableDiesel", "any": "tr:Vehicle"}.items():
            assert c.put(f"/v1/instances/{iid}", json={"service": iid, "address": "h", "port": 1, "ttl": 0,
                                                       "tags": [tag]}).status_code == 201
        body = c.get("/v1/discover", params={"s": "tr:Vehicle", "p": "tr:hasFuel", "o": "tr:Diesel"}).json()
        got = {i["id"]: (m["degree"], m["distance"]) for m in body["matches"] for i in m["instances"]}
        assert got == {"bio": ("narrower", 2), "hvo": ("narrower", 2)}  # sameAs: HVO's type carries over
        body = c.get("/v1/discover", params={"s": "tr:Car", "match": "all"}).json()
        got = {i["id"]: (m["degree"], m["distance"]) for m in body["matches"] for i in m["instances"]}
        assert got == {"bio": ("narrower", 0), "ev": ("narrower", 1), "any": ("broader", 1)}


def test_repeated_discovery_answers_identically_and_follows_prefix_changes(api):
    """The short path for repeated queries answers byte for byte as the handler, and a prefix
    redefinition (after which the same query text means other terms) is not served stale."""
    assert api.put("/v1/prefixes/fp", json={"iri": EX}).status_code in (200, 201)
    put(api, "fp-1", ["ex:Filme ex:temUmGenero ex:Terror"])
    q = {"s": "fp:Obra", "p": "fp:temUmGenero", "o": "fp:Terror"}
    first = api.get("/v1/discover", params=q)
    second = api.get("/v1/discover", params=q)
    assert first.content == second.content and first.headers["x-semreg-index"] == second.headers["x-semreg-index"]
    assert [i["id"] for i in second.json()["instances"]] == ["fp-1"]
    put(api, "fp-2", ["ex:Livro ex:temUmGenero ex:Terror"])
    assert [i["id"] for i in api.get("/v1/discover", params=q).json()["instances"]] == ["fp-1", "fp-2"]
    assert api.put("/v1/prefixes/fp", json={"iri": "http://example.org/elsewhere#"}).status_code == 200
    assert api.get("/v1/discover", params=q).json()["instances"] == []
    text = api.get("/metrics").text
    assert 'semreg_http_requests_total{method="GET",route="/v1/discover",status="200"}' in text
    api.delete("/v1/prefixes/fp")
    for iid in ("fp-1", "fp-2"):
        api.delete(f"/v1/instances/{iid}")


def test_meta_takes_numbers_and_booleans_as_their_text_and_spillover_reads_them(api):
    service = "spill-numbers"
    for iid, priority in (("spill-b", 2), ("spill-a", 1)):
        r = put(api, iid, ["ex:Pintura"], service=service, capacity=1, meta={"priority": priority, "canary": False})
        assert r.status_code == 201, r.text
        assert r.json()["meta"] == {"priority": str(priority), "canary": "false"}
    assert api.get("/v1/instances/spill-a").json()["meta"] == {"priority": "1", "canary": "false"}
    assert put(api, "spill-a", ["ex:Pintura"], service=service, meta={"weight": 1.5}).json()["meta"] == {"weight": "1.5"}
    put(api, "spill-a", ["ex:Pintura"], service=service, capacity=1, meta={"priority": 1})
    r = api.get("/v1/route", params={"s": "ex:Pintura", "service": service, "policy": "spillover"})
    assert r.status_code == 307 and r.headers["x-semreg-instance"] == "spill-a", "priority 1 is filled first"
    for iid in ("spill-a", "spill-b"):
        api.delete(f"/v1/instances/{iid}")


def test_https_is_the_other_scheme(api):
    r = put(api, "secure", ["ex:Pintura"], scheme="HTTPS", port=8443)
    assert r.status_code == 201 and r.json()["scheme"] == "https"
    r = api.get("/v1/route", params={"s": "ex:Pintura", "service": "secure"})
    assert r.headers["location"] == "https://127.0.0.1:8443"
    api.delete("/v1/instances/secure")


def test_an_ontologys_inferred_count_is_what_its_upload_added(api):
    def entailed() -> int:
        r = api.get("/sparql", params={"query": "SELECT (COUNT(*) AS ?n) { GRAPH <urn:semreg:inferred> { ?s ?p ?o } }"})
        return int(r.json()["results"]["bindings"][0]["n"]["value"])

    contos = (b"@prefix ex: <http://example.org/obras#> . @prefix x: <http://example.org/contos#> .\n"
              b"x:Conto <http://www.w3.org/2000/01/rdf-schema#subClassOf> ex:Livro .")
    before = entailed()
    r = api.put("/v1/ontologies/contos", content=contos, headers={"Content-Type": "text/turtle"})
    assert r.status_code == 201
    stored = r.json()
    assert 0 < stored["inferred"] == entailed() - before and stored["inferred_total"] == entailed()
    listed = {o["name"]: o for o in api.get("/v1/ontologies").json()}
    assert listed["contos"]["inferred"] == stored["inferred"] < listed["obras"]["inferred"] < stored["inferred_total"]
    again = api.put("/v1/ontologies/contos", content=contos, headers={"Content-Type": "text/turtle"})
    assert again.status_code == 200 and again.json()["inferred"] == stored["inferred"], "the same document again"
    assert api.delete("/v1/ontologies/contos").status_code == 204 and entailed() == before
