"""Consul's `?filter=` expressions through the listener, over HTTP in this process: Consul's documented examples
(the redis services of its filtering page), each operator on each kind of field, nesting and the precedence of
`and`, `or` and `not`, the quoting styles, and the refusals (a selector the endpoint's type lacks, an operator
its field does not take, a value that is not of its type, a syntax error, a regular expression that does not
compile) as 400s in plain text that say where and why. Then the grammar alone, as tables; and a blocking read
with a filter, which wakes on its topic's change and answers the filtered view."""
from __future__ import annotations

import pytest
from support.inprocess import InProcess
from support.paths import ONTOLOGIES

from semreg.consul import expressions, filters
from semreg.consul.expressions import And, Match, Not, Or

# Consul's filtering page's agent example, and a pattern-tagged service for the saved query's answers
REDIS = [("redis1", ["primary", "production"], {"env": "production", "foo": "bar"}, 1234, 1),
         ("redis2", ["secondary", "production"], {"env": "production", "foo": "bar"}, 1235, 1),
         ("redis3", ["primary", "qa"], {"env": "qa"}, 1234, 10)]


def register(srv: InProcess) -> None:
    c = srv.client()
    assert c.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                 headers={"Content-Type": "text/turtle"}).status_code == 201
    assert c.put("/v1/queries/obras-de-terror", json={"s": "ex:Obra", "p": "ex:temUmGenero",
                                                      "o": "ex:Terror"}).status_code in (200, 201)
    consul = srv.consul()
    for sid, tags, meta, port, weight in REDIS:
        assert consul.put("/v1/agent/service/register", json={
            "ID": sid, "Name": "redis", "Tags": tags, "Meta": meta, "Port": port, "Address": "10.0.0.1",
            "Weights": {"Passing": weight, "Warning": 1}}).status_code == 200
    for sid, genre in [("livro-1", "Terror"), ("livro-2", "Comedia")]:
        assert consul.put("/v1/agent/service/register", json={
            "ID": sid, "Name": "livros", "Tags": [f"ex:Livro ex:temUmGenero ex:{genre}", "blue"], "Port": 9000,
            "Address": "10.0.0.2", "Check": {"TTL": "30s", "Status": "passing"}}).status_code == 200
    assert consul.put("/v1/agent/check/fail/service:livro-2").status_code == 200


@pytest.fixture(scope="module")
def srv():
    srv = InProcess(consul_listen="127.0.0.1:8500", node_id="n1").start()
    try:
        register(srv)
        yield srv
    finally:
        srv.stop()


def agent_ids(srv: InProcess, expression: str) -> set[str]:
    r = srv.consul().get("/v1/agent/services", params={"filter": expression})
    assert r.status_code == 200, (expression, r.text)
    return {sid for sid in r.json() if sid.startswith("redis")}


@pytest.mark.parametrize("expression, ids", [
    # Consul's example, then each operator on a string, a number, a boolean, a list and a map
    ('Meta.env == "qa"', {"redis3"}),
    ('Meta.env != "qa"', {"redis1", "redis2"}),
    ('Service == "redis"', {"redis1", "redis2", "redis3"}),
    ('"edi" in Service', {"redis1", "redis2", "redis3"}),
    ('Service contains "xyz"', set()),
    ('ID not contains "3"', {"redis1", "redis2"}),
    ('"3" not in ID', {"redis1", "redis2"}),
    ('ID matches "[23]$"', {"redis2", "redis3"}),
    ('ID not matches "1"', {"redis2", "redis3"}),
    ('Port == 1234', {"redis1", "redis3"}),
    ('Port != 1234', {"redis2"}),
    ('Port == "0x4D2"', {"redis1", "redis3"}),  # Go's ParseInt: base prefixes, in a quoted value
    ('Port == "1235"', {"redis2"}),
    ('Weights.Passing == 10', {"redis3"}),
    ('EnableTagOverride == false', {"redis1", "redis2", "redis3"}),
    ('EnableTagOverride == T', set()),
    ('"primary" in Tags', {"redis1", "redis3"}),
    ('Tags contains "primary"', {"redis1", "redis3"}),
    ('"primary" not in Tags', {"redis2"}),
    ('Tags not contains primary', {"redis2"}),
    ('Tags is empty', set()),
    ('Tags is not empty', {"redis1", "redis2", "redis3"}),
    ('"foo" in Meta', {"redis1", "redis2"}),
    ('Meta not contains "foo"', {"redis3"}),
    ('Meta is not empty', {"redis1", "redis2", "redis3"}),
    ('TaggedAddresses is empty', {"redis1", "redis2", "redis3"}),
    # a missing map key is no value
    ('Meta.foo == bar', {"redis1", "redis2"}),
    ('Meta.foo != bar', {"redis3"}),
    ('Meta.foo matches "b"', {"redis1", "redis2"}),
    ('Meta.foo not matches "b"', {"redis3"}),
    ('Meta.nothing == ""', set()),
    # precedence: not, then and, then or; parentheses first
    ('ID == redis1 or ID == redis2 and ID == redis3', {"redis1"}),
    ('(ID == redis1 or ID == redis2) and ID == redis3', set()),
    ('not ID == redis1 or ID == redis1', {"redis1", "redis2", "redis3"}),
    ('not (ID == redis1 or ID == redis2)', {"redis3"}),
    ('not ID == redis1 and not ID == redis2', {"redis3"}),
    ('not not ID == redis1', {"redis1"}),
    ('Meta.env == qa or (Port == 1235 and ("secondary" in Tags or Tags is empty))', {"redis2", "redis3"}),
    ('( ( Port == 1234 ) )', {"redis1", "redis3"}),
    # quoting styles: double quotes with Go's escapes, backticks raw, bare words; indexes in either quoting
    ('Service == `redis`', {"redis1", "redis2", "redis3"}),
    ('Service == redis', {"redis1", "redis2", "redis3"}),
    ('ID == "redis\\x31"', {"redis1"}),
    ('ID matches `^redis\\d$`', {"redis1", "redis2", "redis3"}),
    ('Meta["env"] == "qa"', {"redis3"}),
    ('Meta[`env`] == qa', {"redis3"}),
    ('\tMeta.env==qa\n', {"redis3"}),
])
def test_agent_services_filter_as_consul_documents(srv, expression, ids):
    assert agent_ids(srv, expression) == ids


def health_ids(srv: InProcess, name: str, expression: str, **params: str) -> set[str]:
    r = srv.consul().get(f"/v1/health/service/{name}", params={"filter": expression, **params})
    assert r.status_code == 200, (expression, r.text)
    return {e["Service"]["ID"] for e in r.json()}


@pytest.mark.parametrize("expression, ids", [
    ('Checks.Status == critical', {"livro-2"}),  # any check of the entry
    ('Checks.Status != passing', {"livro-2"}),
    ('not Checks.Status == critical', {"livro-1"}),
    ('Checks.CheckID == "serfHealth"', {"livro-1", "livro-2"}),
    ('Checks.ServiceTags contains blue', {"livro-1", "livro-2"}),
    ('Checks is not empty', {"livro-1", "livro-2"}),
    ('Service.Tags contains "ex:Livro ex:temUmGenero ex:Terror"', {"livro-1"}),
    ('Node.Node == n1 and Service.Port == 9000', {"livro-1", "livro-2"}),
    ('Node.TaggedAddresses.lan == "10.0.0.9"', set()),
    ('Node.Meta is not empty and "semreg" in Node.Meta', {"livro-1", "livro-2"}),
    ('Service.Address matches "^10\\\\.0\\\\.0\\\\.2$"', {"livro-1", "livro-2"}),
])
def test_health_filters_over_node_service_and_checks(srv, expression, ids):
    assert health_ids(srv, "livros", expression) == ids


def test_a_filter_applies_after_passing_and_tag_and_to_a_saved_query_s_answer(srv):
    assert health_ids(srv, "livros", 'Service.ID != "x"', passing="1") == {"livro-1"}
    assert health_ids(srv, "livros", "Service.Port == 9000", tag="blue") == {"livro-1", "livro-2"}
    found = health_ids(srv, "obras-de-terror", 'Service.Meta["semreg-degree"] == narrower')
    assert found == {"livro-1"}
    assert health_ids(srv, "obras-de-terror", 'Service.Meta["semreg-degree"] == exact') == set()


def test_catalog_filters_over_the_flat_service_node(srv):
    c = srv.consul()

    def ids(expression: str) -> set[str]:
        r = c.get("/v1/catalog/service/redis", params={"filter": expression})
        assert r.status_code == 200, r.text
        return {e["ServiceID"] for e in r.json()}

    assert ids('ServiceMeta.env == "qa"') == {"redis3"}
    assert ids('NodeMeta.os == "linux"') == set()  # Consul's example: no such node here
    assert ids("ServiceTags contains primary and ServicePort == 1234") == {"redis1", "redis3"}
    assert ids("Node == n1 and ServiceName == redis and ServiceWeights.Passing == 1") == {"redis1", "redis2"}
    assert ids('TaggedAddresses.lan == "10.0.0.1"') == set()


def test_catalog_services_lists_the_names_and_tags_of_the_entries_kept(srv):
    c = srv.consul()
    assert c.get("/v1/catalog/services", params={"filter": 'ServiceMeta.env == "qa"'}).json() == {
        "redis": ["primary", "qa"]}
    assert set(c.get("/v1/catalog/services", params={"filter": "ServicePort == 9000"}).json()) == {"livros"}
    assert c.get("/v1/catalog/services", params={"filter": "ServiceName == nobody"}).json() == {}


def test_catalog_nodes_filters_the_node(srv):
    c = srv.consul()
    assert [n["Node"] for n in c.get("/v1/catalog/nodes", params={"filter": "Node == n1"}).json()] == ["n1"]
    assert c.get("/v1/catalog/nodes", params={"filter": 'Meta.semreg == "0"'}).json() == []
    assert c.get("/v1/catalog/nodes", params={"filter": "Meta is not empty"}).json() != []


@pytest.mark.parametrize("path, expression, says", [
    ("/v1/agent/services", "Foo == 1", 'Selector "Foo" is not valid'),
    ("/v1/agent/services", "service == redis", 'Selector "service" is not valid'),  # names are exact
    ("/v1/agent/services", "CreateIndex == 1", 'Selector "CreateIndex" is not valid'),  # as Consul hides it
    ("/v1/agent/services", "Meta.env.x == 1", 'Selector "Meta.env.x" is not valid'),
    ("/v1/agent/services", "Tags.x == 1", 'Selector "Tags.x" is not valid'),
    ("/v1/health/service/redis", "Service.Foo == 1", 'Selector "Service.Foo" is not valid'),
    ("/v1/health/service/redis", "ServiceName == redis", 'Selector "ServiceName" is not valid'),
    ("/v1/catalog/service/redis", "Service.Service == redis", 'Selector "Service" is not valid'),
    ("/v1/catalog/services", "Checks.Status == passing", 'Selector "Checks" is not valid'),
    ("/v1/catalog/nodes", "Node.Node == n1", 'Selector "Node.Node" is not valid'),
    ("/v1/agent/services", "Port is empty", 'Invalid match operator "Is Empty" for selector "Port"'),
    ("/v1/agent/services", "Tags == primary", 'Invalid match operator "Equal" for selector "Tags"'),
    ("/v1/agent/services", "Meta.env is empty", 'Invalid match operator "Is Empty" for selector "Meta.env"'),
    ("/v1/agent/services", "Weights == 1", 'Invalid match operator "Equal" for selector "Weights"'),
    ("/v1/health/service/redis", "Checks.Status is empty", 'Invalid match operator "Is Empty"'),
    ("/v1/agent/services", "Port matches 1", 'Invalid match operator "Matches" for selector "Port"'),
    ("/v1/agent/services", "Port == abc", 'Failed to coerce value "abc" for selector "Port"'),
    ("/v1/agent/services", "Port == 1.5", 'Failed to coerce value "1.5"'),
    ("/v1/agent/services", "Port == 99999999999999999999", "out of range"),
    ("/v1/agent/services", "EnableTagOverride == yes", 'Failed to coerce value "yes"'),
    ("/v1/agent/services", 'ID matches "("', 'Failed to compile regular expression "("'),
    ("/v1/agent/services", 'ID matches "(?P<x>a)\\\\1"', "Failed to compile regular expression"),
    ("/v1/agent/services", "ID ==", "1:6 (5): no match found at the end"),
    ("/v1/agent/services", "ID = redis1", "1:4 (3): no match found"),
    ("/v1/agent/services", "(ID == redis1", "1:14 (13): Unmatched parentheses"),
    ("/v1/agent/services", 'ID == "redis1', "1:7 (6): Unterminated string literal"),
    ("/v1/agent/services", "Port == 12ab", "1:11 (10): Invalid number literal"),
    ("/v1/agent/services", '"x" in "y"', "Invalid selector"),
    ("/v1/agent/services", 'Meta[env] == qa', "Invalid index"),
    ("/v1/agent/services", 'ID matches "^redis\\d$"', "unknown escape \\d"),  # Go's escapes in double quotes
    ("/v1/agent/services", "ID == redis1 and", "no match found"),
    ("/v1/agent/services", "ID == redis1 && Port == 1", "no match found"),
    ("/v1/agent/services", "not" + " not" * 40 + " ID == redis1", "nested more than 32 deep"),
    ("/v1/agent/services", "(" * 40 + "ID == redis1" + ")" * 40, "nested more than 32 deep"),
    ("/v1/agent/services", "ID == x " + "or ID == x " * 500, "at most 4096 are read"),
])
def test_refusals_say_where_and_why_in_plain_text(srv, path, expression, says):
    r = srv.consul().get(path, params={"filter": expression})
    assert r.status_code == 400 and r.headers["content-type"].startswith("text/plain"), r.text
    assert r.text.startswith("Failed to create boolean expression evaluator: ") and says in r.text, r.text


def test_an_empty_filter_is_no_filter(srv):
    assert agent_ids(srv, "") == {"redis1", "redis2", "redis3"}


def test_a_blocking_read_with_a_filter_wakes_on_its_topic_and_answers_the_filtered_view(in_process):
    srv = in_process(consul_listen="127.0.0.1:8500", node_id="n1")
    register(srv)
    c = srv.consul()
    first = c.get("/v1/health/service/redis", params={"filter": "Service.Meta.env == production"})
    assert {e["Service"]["ID"] for e in first.json()} == {"redis1", "redis2"}
    index = first.headers["X-Consul-Index"]
    assert c.get("/v1/health/service/redis").headers["X-Consul-Index"] == index  # the topic's index, filtered or not
    waiting = c.submit("GET", "/v1/health/service/redis",
                       params={"filter": "Service.Meta.env == production", "index": index, "wait": "60s"})
    srv.settle()
    assert not waiting.done()
    assert c.put("/v1/agent/service/deregister/redis1").status_code == 200
    srv.settle()
    r = waiting.result(10)
    assert int(r.headers["X-Consul-Index"]) > int(index)
    assert [e["Service"]["ID"] for e in r.json()] == ["redis2"]
    # a filter that does not parse is refused at once, never held for the wait
    bad = c.submit("GET", "/v1/health/service/redis", params={"filter": "Port ==", "index": r.headers["X-Consul-Index"],
                                                              "wait": "60s"})
    assert bad.result(10).status_code == 400


def test_each_endpoint_s_type_is_the_fields_its_entries_carry(srv):
    """The types the filters check against name exactly the fields the entries are built with (less the indexes,
    which Consul's filters do not offer), at every depth a filter can reach."""
    c = srv.consul()
    hidden = {"CreateIndex", "ModifyIndex"}

    def same(built, schema, at: str) -> None:
        if isinstance(schema, list):
            for n, item in enumerate(built):
                same(item, schema[0], f"{at}[{n}]")
        elif isinstance(schema, dict) and "*" not in schema:
            assert set(built) - hidden == set(schema), at
            for key, kind in schema.items():
                same(built[key], kind, f"{at}.{key}")

    for entry in c.get("/v1/health/service/livros").json():
        same(entry, filters.HEALTH_ENTRY, "health")
    for entry in c.get("/v1/catalog/service/livros").json():
        same(entry, filters.CATALOG_SERVICE, "catalog")
    for entry in c.get("/v1/agent/services").json().values():
        same(entry, filters.AGENT_SERVICE, "agent")
    same(c.get("/v1/catalog/nodes").json()[0], filters.NODE, "node")


@pytest.mark.parametrize("text, tree", [
    ('a == 1', Match(("a",), "Equal", "1")),
    ('a.b["c d"] != `x`', Match(("a", "b", "c d"), "Not Equal", "x")),
    ('"v" in a', Match(("a",), "In", "v")),
    ('a contains v', Match(("a",), "In", "v")),
    ('a not contains b.c', Match(("a",), "Not In", "b.c")),  # a bare value is its selector's text
    ('a is not empty', Match(("a",), "Is Not Empty", None)),
    ('a matches "x"', Match(("a",), "Matches", "x")),
    ('a == -1.25', Match(("a",), "Equal", "-1.25")),
    ('not in a', Match(("a",), "In", "not")),  # as go-bexpr reads it: the value `not`
    ('notes == 1', Match(("notes",), "Equal", "1")),
    ('a == 1 and b == 2 or c == 3', Or((And((Match(("a",), "Equal", "1"), Match(("b",), "Equal", "2"))),
                                        Match(("c",), "Equal", "3")))),
    ('not a == 1 and b == 2', And((Not(Match(("a",), "Equal", "1")), Match(("b",), "Equal", "2")))),
    ('not not a == 1', Match(("a",), "Equal", "1")),
    ('a == "\\u00e9\\t"', Match(("a",), "Equal", "é\t")),
])
def test_the_grammar(text, tree):
    assert expressions.parse(text) == tree


@pytest.mark.parametrize("text", ["a == 1 or(b == 2)", "(a == 1)and b == 2", "a == 1 and", "a==1 b==2",
                                  "a == 01", 'a == "\\\'"', "1 == a", "a is", "a.1 == 2", ""])
def test_what_the_grammar_refuses(text):
    with pytest.raises(expressions.ExpressionError):
        expressions.parse(text)
