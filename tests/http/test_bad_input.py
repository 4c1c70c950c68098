"""Bad input gets a clear 4xx and changes nothing; nothing a client sends produces a 500."""
from __future__ import annotations

import logging

import pytest
from support.inprocess import InProcess

GOOD = {"service": "s", "address": "127.0.0.1", "port": 80, "tags": ["v:A"], "ttl": 0}


class Errors(logging.Handler):
    """Every record at ERROR or above the server logs while the module runs."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture(scope="module")
def api():
    errors = Errors()
    logging.getLogger().addHandler(errors)
    server = InProcess(json_body_limit_bytes=65536, ontology_body_limit_bytes=4096)
    try:
        server.start()
        c = server.client()
        assert c.put("/v1/prefixes/v", json={"iri": "http://example.org/v#"}).status_code == 201
        yield c
    finally:
        server.stop()
        logging.getLogger().removeHandler(errors)
    assert not errors.records, [r.getMessage() for r in errors.records]


@pytest.mark.parametrize("body, field", [
    (b"{", "JSON"), (b"", "empty"), (b"[]", "object"), (b'"x"', "object"), (b"null", "object"),
    (b'{"service": 1}', "service"), (b'{"service": "s"}', "address"),
    (dict(GOOD, port=0), "port"), (dict(GOOD, port=65536), "port"), (dict(GOOD, port="80"), "port"),
    (dict(GOOD, port=80.5), "port"), (dict(GOOD, port=True), "port"),
    (dict(GOOD, weight=0), "weight"), (dict(GOOD, weight=10001), "weight"), (dict(GOOD, capacity=0), "capacity"),
    (dict(GOOD, ttl=-1), "ttl"), (dict(GOOD, ttl="soon"), "ttl"), (dict(GOOD, deregister_after=-5), "deregister_after"),
    (dict(GOOD, tags="v:A"), "tags"), (dict(GOOD, tags=[1]), "tags[0]"), (dict(GOOD, tags=["x y"]), "tags[0]"),
    (dict(GOOD, tags=["nope:A"]), "nope"), (dict(GOOD, tags=["relative"]), "tags[0]"),
    (dict(GOOD, tags=["<relative>"]), "relative"), (dict(GOOD, tags=["<http://x/a b>"]), "tags[0]"),
    (dict(GOOD, tags=[{"p": "v:p"}]), "s"), (dict(GOOD, tags=[{"s": "v:A", "q": "v:B"}]), "q"),
    (dict(GOOD, tags=[{"s": 5}]), "tags[0]"), (dict(GOOD, tags=["v:A a"]), "tags[0]"),
    (dict(GOOD, meta={"k": [1]}), "meta"), (dict(GOOD, meta={"k": None}), "meta"), (dict(GOOD, meta=[]), "meta"),
    (dict(GOOD, unknown=1), "unknown"),
    (dict(GOOD, check={"http": "ftp://x"}), "check"), (dict(GOOD, check={}), "check"),
    (dict(GOOD, check={"tcp": "h:1", "http": "http://h/"}), "check"), (dict(GOOD, scheme="ht tp"), "scheme"),
    (dict(GOOD, scheme="ftp"), "http or https"), (dict(GOOD, address="http://h/x"), "host name or an IP address"),
    (dict(GOOD, address=""), "address"), (dict(GOOD, address="a b"), "address"), (dict(GOOD, id="other"), "id"),
    (dict(GOOD, service=""), "service"),
])
def test_bad_registration_is_400_naming_the_problem(api, body, field):
    kw = {"json": body} if isinstance(body, dict) else {"content": body, "headers": {"Content-Type": "application/json"}}
    r = api.put("/v1/instances/bad", **kw)
    assert r.status_code == 400, r.text
    assert field.lower() in r.json()["error"].lower()
    assert api.get("/v1/instances/bad").status_code == 404


@pytest.mark.parametrize("iid, status", [("a b", 400), ("x" * 129, 400), ("é", 400), ("a/b", 404)])
def test_bad_ids(api, iid, status):
    r = api.put(f"/v1/instances/{iid}", json=GOOD)
    assert r.status_code == status and r.json()["error"]
    if status == 400:
        assert "not a valid instance id" in r.json()["error"]


def test_wrong_media_type_and_oversized_bodies(api):
    assert api.put("/v1/instances/m", content=b"{}", headers={"Content-Type": "text/plain"}).status_code == 415
    big = dict(GOOD, meta={"k": "x" * 4000}, tags=["v:A"] * 20)
    huge = {"instances": [dict(big, id=f"h{n}") for n in range(30)]}
    r = api.post("/v1/instances/batch", json=huge)
    assert r.status_code == 413 and "limit" in r.json()["error"]
    assert api.get("/v1/instances").json() == []
    r = api.put("/v1/ontologies/big", content=b"#" * 5000, headers={"Content-Type": "text/turtle"})
    assert r.status_code == 413


def test_too_many_tags(api):
    many = dict(GOOD, tags=[f"v:T{n}" for n in range(10_001)])
    r = api.put("/v1/instances/many", json=many)  # past this module's 64 KiB body limit before the tag limit
    assert r.status_code == 413 and "65536" in r.json()["error"]


@pytest.mark.parametrize("params", [
    {}, {"s": ""}, {"s": "nope:A"}, {"s": "v:A", "match": "sideways"}, {"s": "v:A", "status": "down"},
    {"s": "v:A", "limit": "0"}, {"s": "v:A", "limit": "x"}, {"s": "v:A", "index": "-1"}, {"s": "v:A", "index": "x"},
    {"s": "v:A", "index": "5", "wait": "forever"}, {"s": "v:A", "wait": "5s"}, {"s": "<v:A"}, {"s": "http://x/ y"},
])
def test_bad_discovery_parameters(api, params):
    r = api.get("/v1/discover", params=params)
    assert r.status_code == 400 and r.json()["error"]


def test_bad_ontology_uploads_change_nothing(api):
    good = b"@prefix v: <http://example.org/v#> . v:B <http://www.w3.org/2000/01/rdf-schema#subClassOf> v:A ."
    assert api.put("/v1/ontologies/o", content=good, headers={"Content-Type": "text/turtle"}).status_code == 201
    before = api.get("/v1/ontologies").json()
    bad = b"@prefix v: <http://example.org/v#> .\nv:C <http://www.w3.org/2000/01/rdf-schema#subClassOf> v:B ;\n v:oops"
    r = api.put("/v1/ontologies/o", content=bad, headers={"Content-Type": "text/turtle"})
    assert r.status_code == 400 and r.json()["line"] == 3 and r.json()["column"] > 0 and "parse" in r.json()["error"]
    assert api.get("/v1/ontologies").json() == before
    assert api.get("/v1/concepts/v:C").status_code == 404
    for content, ctype, status in [(b"", "text/turtle", 400), (b"<a> <b> <c> .", "application/x-nope", 415),
                                   (b"<a> <b> <c> .", None, 415), (b"not xml", "application/rdf+xml", 400),
                                   (b"{", "application/ld+json", 400), (b"<a> <b> .", "application/n-triples", 400)]:
        headers = {"Content-Type": ctype} if ctype else {}
        r = api.put("/v1/ontologies/o", content=content, headers=headers)
        assert r.status_code == status, (content, ctype, r.text)
        assert r.json()["error"]
    assert api.get("/v1/ontologies").json() == before
    assert api.put("/v1/ontologies/bad%20name", content=good, headers={"Content-Type": "text/turtle"}).status_code == 400


def test_unknown_routes_and_methods_are_json(api):
    r = api.get("/v2/nothing")
    assert r.status_code == 404 and r.json()["error"]
    r = api.post("/v1/tags")
    assert r.status_code == 405 and r.json()["error"]
    r = api.put("/v1/instances/x/heartbeat", content=b"{", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]  # read before the instance is looked up


def test_heartbeat_body_is_validated(api):
    assert api.put("/v1/instances/hb", json=GOOD).status_code == 201
    for body in ({"load": -1}, {"load": "x"}, {"status": "critical"}, {"status": "down"}, {"other": 1}):
        r = api.put("/v1/instances/hb/heartbeat", json=body)
        assert r.status_code == 400, body
    assert api.get("/v1/instances/hb").json()["status"] == "up"
    api.delete("/v1/instances/hb")


def test_bad_multi_tag_and_prefix_bodies(api):
    assert api.post("/v1/discover/tags", json={"tags": "v:A"}).status_code == 400
    assert api.post("/v1/discover/tags", json={"tags": ["nope:A"]}).status_code == 400
    assert api.post("/v1/discover/tags", json=[]).status_code == 400
    assert api.put("/v1/prefixes/q", json={"iri": 5}).status_code == 400
    assert api.put("/v1/prefixes/q", content=b"", headers={"Content-Type": "application/json"}).status_code == 400


@pytest.mark.parametrize("method, path, unknown", [
    ("GET", "/v1/discover?s=v:A&subject=v:B", ["subject"]),
    ("GET", "/v1/discover?s=v:A&subject=v:B", ["subject"]),  # asked again: the short path's known queries
    ("GET", "/v1/discover?s=v:A&subject=v:B&index=1&wait=1s", ["subject"]),  # a blocking read: the long way
    ("GET", "/v1/route?s=v:A&polcy=spillover", ["polcy"]),
    ("GET", "/v1/instances?servce=s", ["servce"]),
    ("GET", "/v1/tags?x=1&y=2", ["x", "y"]),
    ("GET", "/v1/expand?s=v:A&mtch=all", ["mtch"]),
    ("GET", "/v1/instances/some-id?verbose=1", ["verbose"]),
    ("PUT", "/v1/instances/qp?ttl=0", ["ttl"]),
])
def test_unknown_query_parameters_are_400_naming_them(api, method, path, unknown):
    r = api.request(method, path, json=GOOD)
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["parameters"] == unknown and body["field"] == unknown[0]
    assert all(f"'{name}'" in body["error"] for name in unknown) and f" of {method} /v1/" in body["error"]
    assert api.get("/v1/instances/qp").status_code == 404, "a refused request changes nothing"


def test_the_message_lists_what_the_route_takes(api):
    r = api.get("/v1/discover", params={"s": "v:A", "subject": "v:B"})
    assert r.json()["error"] == ("'subject' is not a query parameter of GET /v1/discover; it takes s, p, o, match, "
                                 "min_similarity, "
                                 "service, status, limit, tags, environment, meta.KEY, index, wait.")
    assert api.get("/v1/discover", params={"s": "v:A", "match": "all", "tags": "true"}).status_code == 200


def test_sparql_takes_the_parameters_its_clients_add(api):
    """SPARQL endpoints ignore what they do not know; clients such as SPARQLWrapper send format=json."""
    r = api.get("/sparql", params={"query": "ASK {}", "format": "json", "output": "json"})
    assert r.status_code == 200 and r.json()["boolean"] is True


def test_a_post_to_sparql_without_a_query_is_400(api):
    for kw in ({}, {"content": "", "headers": {"Content-Type": "application/x-www-form-urlencoded"}}):
        r = api.post("/sparql", **kw)
        assert r.status_code == 400 and "carries a query" in r.json()["error"]
    assert api.get("/sparql").status_code == 200, "GET without a query still describes the service"


@pytest.mark.parametrize("body, sentence", [
    (dict(GOOD, address="http://books.internal/x"), "address: must be a host name or an IP address (such as 10.1.0.7, "
                                                    "books.internal or ::1), without a scheme, path, user or spaces."),
    (dict(GOOD, address="a b"), "address: must be a host name or an IP address"),
    (dict(GOOD, scheme="ftp"), "scheme: must be http or https: routes redirect to scheme://address:port, and checks "
                               "speak HTTP."),
    (dict(GOOD, meta={"tier": {"a": 1}}), "meta.tier: must be a string, a number or a boolean"),
])
def test_bad_fields_are_explained_in_words(api, body, sentence):
    r = api.put("/v1/instances/words", json=body)
    assert r.status_code == 400 and r.json()["error"].startswith(sentence), r.text
    assert "pattern" not in r.json()["error"] and "'^" not in r.json()["error"]
    assert api.get("/v1/instances/words").status_code == 404


def test_route_without_s_says_s_is_required(api):
    r = api.get("/v1/route", params={"p": "v:p"})
    assert r.status_code == 400 and r.json()["field"] == "s"
    assert r.json()["error"].startswith("s is required: the subject term of the pattern to route by")


@pytest.mark.parametrize("item, words", [(1, "instances[1] must be a JSON object"),
                                         ("x", "instances[1] must be a JSON object"),
                                         ([GOOD], "instances[1] must be a JSON object"),
                                         (dict(GOOD, port=0), "instances[1].port")])
def test_a_batch_names_the_item_that_is_not_an_instance_and_registers_none(api, item, words):
    before = api.get("/v1/instances").json()
    r = api.post("/v1/instances/batch", json={"instances": [dict(GOOD, id="b0"), item]})
    assert r.status_code == 400 and words in r.json()["error"], r.text
    assert api.get("/v1/instances").json() == before
