"""Consul's `?filter=` expressions through the listener, over HTTP in this process: Consul's documented examples
(the redis services of its filtering page), each operator on each kind of field, nesting and the precedence of
`and`, `or` and `not`, the quoting styles, and the refusals (a selector the endpoint's type lacks, an operator
its field does not take, a value that is not of its type, a syntax error, a regular expression that does not
compile) as 400s in plain text that say where and why; a blocking read with a filter, which wakes on its topic's
change and answers the filtered view; the grammar alone, as tables. Then two properties: no filter text or bytes
gets a 500, and a well-formed random expression keeps exactly the services a plain reading of it keeps."""
from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote_from_bytes

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.case_study import horror_by_meaning
from support.inprocess import InProcess

from semreg.consul import expressions, filters
from semreg.consul.expressions import And, Match, Not, Or

# Consul's filtering page's agent example, and a pattern-tagged service for the saved query's answers
REDIS = [("redis1", ["primary", "production"], {"env": "production", "foo": "bar"}, 1234, 1),
         ("redis2", ["secondary", "production"], {"env": "production", "foo": "bar"}, 1235, 1),
         ("redis3", ["primary", "qa"], {"env": "qa"}, 1234, 10)]


def register(srv: InProcess) -> None:
    horror_by_meaning(srv.client())
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


def jobs(srv: InProcess) -> float:
    line = next(x for x in srv.client().get("/metrics").text.splitlines() if x.startswith("semreg_work_jobs_total "))
    return float(line.split()[1])


def test_a_filter_is_applied_as_request_work_in_slices(srv):
    """Its cost grows with its length times the entries, so it runs in the lane, never holding the loop: one job
    more than the same read without it."""
    def jobs_of(params: dict) -> float:
        before = jobs(srv)
        assert srv.consul().get("/v1/agent/services", params=params).status_code == 200
        return jobs(srv) - before

    jobs_of({})  # the listing, once: later reads answer from what it found
    plain = jobs_of({})
    assert jobs_of({"filter": "Port == 1234 " + "or Port == 1234 " * 200}) == plain + 1
    assert jobs_of({}) == plain


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


# Properties: no filter, however made, gets a 500; a well-formed one agrees with a plain reading of its meaning.

PATHS = st.sampled_from(["/v1/agent/services", "/v1/health/service/redis", "/v1/catalog/service/livros",
                         "/v1/catalog/services", "/v1/catalog/nodes", "/v1/health/service/obras-de-terror"])
WORDS = st.sampled_from(["Service", "Service.Meta", "Meta", "Meta.env", "Tags", "Checks.Status", "Port", "ServiceTags",
                         "Node.Meta", "ServicePort", "Weights.Passing", "not", "and", "or", "in", "is", "empty",
                         "contains", "matches", "==", "!=", "(", ")", "[", "]", '"', "`", '"qa"', "`raw`", "1", "-2.5",
                         "0x1", '"\\', '"\\u12"', '"(a|a)*b"', ".", "redis", '"^r"', "true", '["env"]'])
SOUP = st.lists(WORDS, max_size=14).flatmap(
    lambda words: st.lists(st.sampled_from(["", " ", "  ", "\t", "\n"]), min_size=len(words), max_size=len(words))
    .map(lambda gaps: "".join(g + w for g, w in zip(gaps, words))))


@settings(max_examples=300, deadline=None)
@given(path=PATHS, text=st.text(max_size=60) | SOUP)
def test_no_filter_text_gets_a_500(srv, path, text):
    r = srv.consul().get(path, params={"filter": text})
    assert r.status_code in (200, 400), (path, text, r.text)
    if r.status_code == 400:
        assert r.headers["content-type"].startswith("text/plain") and r.text.startswith("Failed to create"), r.text


@settings(max_examples=150, deadline=None)
@given(path=PATHS, raw=st.binary(max_size=60))
def test_no_filter_bytes_get_a_500(srv, path, raw):
    r = srv.consul().get(f"{path}?filter={quote_from_bytes(raw, safe='')}")
    assert r.status_code in (200, 400), (path, raw, r.text)


STRING_FIELDS = ["ID", "Service", "Address", "Datacenter", "Namespace", "Meta.env", "Meta.foo", "Meta.none"]
TEXTS = ["redis", "redis1", "redis3", "livros", "livro-1", "qa", "production", "bar", "10.0.0.1", "default", "", "e",
         "1", "dc1", "semreg"]
PATTERNS = ["^redis", "1$", "[23]", "e", "^$", "o-", "x", "^(qa|bar)$"]
TAGS = ["primary", "secondary", "production", "qa", "blue", "nothing"]
INTS = {"Port": [1234, 1235, 9000, 0], "Weights.Passing": [1, 10, 2]}


@st.composite
def leaves(draw) -> tuple[str, Any]:
    """One match expression, as text (quoting and spacing drawn) and as what it means (a function of a service)."""
    kind = draw(st.sampled_from(["string", "regex", "int", "bool", "tags", "meta-key", "empty"]))
    op_neg = draw(st.booleans())
    if kind == "string":
        field, value = draw(st.sampled_from(STRING_FIELDS)), draw(st.sampled_from(TEXTS))
        op = draw(st.sampled_from(["==", "contains", "in"]))
        selector = field if "." not in field or draw(st.booleans()) else field.replace(".", '["', 1) + '"]'
        quoted = quote(draw, value)
        if op == "==":
            text, test = f"{selector} {'!=' if op_neg else '=='} {quoted}", lambda s: text_of(s, field) == value
        elif op == "contains":
            text = f"{selector} {'not contains' if op_neg else 'contains'} {quoted}"
            test = lambda s: value in text_of(s, field)  # noqa: E731
        else:
            text, test = f"{quoted} {'not in' if op_neg else 'in'} {selector}", lambda s: value in text_of(s, field)
        present = lambda s: has(s, field)  # noqa: E731
        return text, (lambda s: present(s) and test(s)) if not op_neg else (lambda s: not (present(s) and test(s)))
    if kind == "regex":
        field, pattern = draw(st.sampled_from(STRING_FIELDS)), draw(st.sampled_from(PATTERNS))
        text = f"{field} {'not matches' if op_neg else 'matches'} {quote(draw, pattern)}"
        hit = lambda s: has(s, field) and re.search(pattern, text_of(s, field)) is not None  # noqa: E731
        return text, (lambda s: not hit(s)) if op_neg else hit
    if kind == "int":
        field = draw(st.sampled_from(sorted(INTS)))
        number = draw(st.sampled_from(INTS[field]))
        written = draw(st.sampled_from([str(number), f'"{number}"', f'"{hex(number)}"']))
        top, _, sub = field.partition(".")
        hit = lambda s: (s[top][sub] if sub else s[top]) == number  # noqa: E731
        return f"{field} {'!=' if op_neg else '=='} {written}", (lambda s: not hit(s)) if op_neg else hit
    if kind == "bool":
        value = draw(st.booleans())
        written = draw(st.sampled_from(["true", "True", "1", "t"] if value else ["false", "F", "0"]))
        hit = lambda s: s["EnableTagOverride"] == value  # noqa: E731
        return f"EnableTagOverride {'!=' if op_neg else '=='} {written}", (lambda s: not hit(s)) if op_neg else hit
    if kind == "tags":
        tag = draw(st.sampled_from(TAGS))
        text = f"{quote(draw, tag)} {'not in' if op_neg else 'in'} Tags" if draw(st.booleans()) \
            else f"Tags {'not contains' if op_neg else 'contains'} {quote(draw, tag)}"
        return text, (lambda s: tag not in s["Tags"]) if op_neg else (lambda s: tag in s["Tags"])
    if kind == "meta-key":
        key = draw(st.sampled_from(["env", "foo", "none"]))
        return f"{quote(draw, key)} {'not in' if op_neg else 'in'} Meta", \
            (lambda s: key not in s["Meta"]) if op_neg else (lambda s: key in s["Meta"])
    field = draw(st.sampled_from(["Tags", "Meta", "TaggedAddresses"]))
    return f"{field} is {'not ' if op_neg else ''}empty", (lambda s: bool(s[field])) if op_neg else (lambda s: not s[field])


def quote(draw, value: str) -> str:
    bare = re.fullmatch(r"[a-zA-Z][a-zA-Z0-9_]*", value) is not None
    return draw(st.sampled_from([f'"{value}"', f"`{value}`"] + ([value] if bare else [])))


def has(service: dict, field: str) -> bool:
    top, _, key = field.partition(".")
    return not key or key in service[top]


def text_of(service: dict, field: str) -> str:
    top, _, key = field.partition(".")
    return service[top].get(key, "") if key else service[top]


PRECEDENCE = {"or": 1, "and": 2, "not": 3, "leaf": 4}


@st.composite
def expressions_of(draw, depth: int = 0) -> tuple[str, int, Any]:
    """An expression's text (parenthesised where precedence needs it, and sometimes where it does not), its
    precedence, and its meaning."""
    form = "leaf" if depth >= 3 else draw(st.sampled_from(["leaf", "leaf", "and", "or", "not"]))
    if form == "leaf":
        text, test = draw(leaves())
        return text, PRECEDENCE["leaf"], test
    if form == "not":
        text, prec, test = draw(expressions_of(depth + 1))
        return f"not {wrap(draw, text, prec, PRECEDENCE['not'])}", PRECEDENCE["not"], lambda s: not test(s)
    parts = [draw(expressions_of(depth + 1)) for _ in range(draw(st.integers(2, 3)))]
    text = f" {form} ".join(wrap(draw, t, p, PRECEDENCE[form] + (0 if p == PRECEDENCE[form] else 1)) for t, p, _ in parts)
    tests = [t for _, _, t in parts]
    meaning = (lambda s: all(t(s) for t in tests)) if form == "and" else (lambda s: any(t(s) for t in tests))
    return text, PRECEDENCE[form], meaning


def wrap(draw, text: str, prec: int, needed: int) -> str:
    if prec < needed or draw(st.integers(0, 5)) == 0:
        return draw(st.sampled_from([f"({text})", f"( {text} )", f"(\n{text})"]))
    return text


@settings(max_examples=300, deadline=None)
@given(expression=expressions_of())
def test_a_well_formed_filter_keeps_what_its_meaning_keeps(srv, expression):
    text, _, meaning = expression
    every = srv.consul().get("/v1/agent/services").json()
    r = srv.consul().get("/v1/agent/services", params={"filter": text})
    assert r.status_code == 200, (text, r.text)
    assert set(r.json()) == {sid for sid, service in every.items() if meaning(service)}, text
