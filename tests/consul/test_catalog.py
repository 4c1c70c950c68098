"""The Consul-compatible API's reads, over HTTP in this process on a fake clock: catalog and health answer a service
name with the instances registered under it, or a saved query's name with what the query finds by meaning (its
degree in each entry's Meta); `passing` and `tag` filter as Consul filters; a blocking read wakes on its own
change and not on another service's, and times out on the fake clock."""
from __future__ import annotations


def ids(entries: list[dict]) -> set[str]:
    return {e["Service"]["ID"] for e in entries}


def test_catalog_services_lists_names_with_their_tags(srv):
    r = srv.consul().get("/v1/catalog/services")
    assert r.status_code == 200 and int(r.headers["X-Consul-Index"]) > 0
    assert r.headers["X-Consul-KnownLeader"] == "true" and r.headers["X-Consul-LastContact"] == "0"
    services = r.json()
    assert set(services) == {"livros", "filmes", "pinturas"}
    assert set(services["livros"]) == {"ex:Livro ex:temUmGenero ex:Terror", "blue", "ex:Livro ex:temUmGenero ex:Comedia",
                                       "green"}


def test_a_service_name_answers_its_own_instances_in_catalog_and_health(srv):
    c = srv.consul()
    catalog = c.get("/v1/catalog/service/livros").json()
    assert {e["ServiceID"] for e in catalog} == {"livro-1", "livro-2"}
    entry = next(e for e in catalog if e["ServiceID"] == "livro-1")
    assert (entry["Node"], entry["ServiceAddress"], entry["ServicePort"]) == ("n1", "10.0.0.1", 9000)
    health = c.get("/v1/health/service/livros").json()
    assert ids(health) == {"livro-1", "livro-2"}
    one = health[0]
    assert one["Node"]["Node"] == "n1" and one["Node"]["Address"] and isinstance(one["Node"]["Meta"], dict)
    assert isinstance(one["Node"]["TaggedAddresses"], dict)
    assert {ch["CheckID"]: ch["Status"] for ch in one["Checks"]} == {
        "serfHealth": "passing", f"service:{one['Service']['ID']}": "passing"}
    assert c.get("/v1/health/service/nobody").json() == []


def test_a_saved_query_s_name_answers_what_it_finds_by_meaning_with_its_degree(srv):
    health = srv.consul().get("/v1/health/service/obras-de-terror").json()
    assert ids(health) == {"livro-1", "filme-1"}
    assert {e["Service"]["Meta"]["semreg-degree"] for e in health} == {"narrower"}
    catalog = srv.consul().get("/v1/catalog/service/obras-de-terror").json()
    assert {e["ServiceID"] for e in catalog} == {"livro-1", "filme-1"}


def test_passing_leaves_out_warning_and_critical_and_tag_filters_by_exact_text(srv):
    c = srv.consul()
    assert c.put("/v1/agent/check/fail/service:livro-1").status_code == 200
    assert c.put("/v1/agent/check/warn/service:livro-2").status_code == 200
    every = c.get("/v1/health/service/livros").json()
    assert {e["Service"]["ID"]: e["Checks"][1]["Status"] for e in every} == {"livro-1": "critical",
                                                                              "livro-2": "warning"}
    assert c.get("/v1/health/service/livros", params={"passing": "1"}).json() == []
    assert ids(c.get("/v1/health/service/livros", params={"passing": "false"}).json()) == {"livro-1", "livro-2"}
    assert ids(c.get("/v1/health/service/livros", params={"tag": "blue"}).json()) == {"livro-1"}
    assert c.get("/v1/health/service/livros", params=[("tag", "blue"), ("tag", "green")]).json() == []
    assert ids(c.get("/v1/health/service/obras-de-terror", params={"passing": "1"}).json()) == {"filme-1"}


def test_a_blocking_read_wakes_on_its_own_change_and_not_on_another_service_s(srv):
    c = srv.consul()
    index = c.get("/v1/health/service/livros").headers["X-Consul-Index"]
    waiting = c.submit("GET", "/v1/health/service/livros", params={"index": index, "wait": "60s"})
    srv.settle()
    assert c.put("/v1/agent/check/fail/service:pintura-1").status_code == 200
    srv.settle()
    assert not waiting.done()
    assert c.put("/v1/agent/service/deregister/livro-2").status_code == 200
    srv.settle()
    r = waiting.result(10)
    assert int(r.headers["X-Consul-Index"]) > int(index)
    assert ids(r.json()) == {"livro-1"}


def test_a_blocking_read_of_a_saved_query_wakes_when_what_it_finds_changes(srv):
    c = srv.consul()
    index = c.get("/v1/health/service/obras-de-terror").headers["X-Consul-Index"]
    waiting = c.submit("GET", "/v1/health/service/obras-de-terror", params={"index": index, "wait": "60s"})
    srv.settle()
    assert c.put("/v1/agent/service/deregister/livro-2").status_code == 200  # a comedy: not in the answer
    srv.settle()
    assert not waiting.done()
    assert c.put("/v1/agent/service/deregister/filme-1").status_code == 200
    srv.settle()
    assert ids(waiting.result(10).json()) == {"livro-1"}


def test_a_blocking_read_ends_when_its_wait_does_with_the_same_index(srv):
    c = srv.consul()  # a service without a TTL check: no lease lapses while the clock moves
    assert c.put("/v1/agent/service/register", json={"ID": "q1", "Name": "quadros", "Port": 1}).status_code == 200
    index = c.get("/v1/catalog/service/quadros").headers["X-Consul-Index"]
    waiting = c.submit("GET", "/v1/catalog/service/quadros", params={"index": index, "wait": "120000ms"})
    srv.settle()
    srv.advance(119)
    assert not waiting.done()
    srv.advance(2)
    r = waiting.result(10)
    assert r.status_code == 200 and r.headers["X-Consul-Index"] == index


def test_a_namespace_is_an_environment(srv):
    c = srv.consul()
    assert c.put("/v1/agent/service/register", params={"ns": "staging"}, json={
        "ID": "s1", "Name": "livros", "Port": 1, "Address": "10.0.0.9"}).status_code == 200
    assert srv.client().get("/v1/instances/s1").json()["environment"] == "staging"
    assert ids(c.get("/v1/health/service/livros", params={"ns": "staging"}).json()) == {"s1"}
    assert "s1" not in ids(c.get("/v1/health/service/livros").json())
    assert {"s1", "livro-1"} <= ids(c.get("/v1/health/service/livros", params={"ns": "*"}).json())
    assert c.get("/v1/agent/services", headers={"X-Consul-Namespace": "staging"}).json().keys() == {"s1"}


def test_status_nodes_and_refusals_in_consul_s_words(srv):
    c = srv.consul()
    assert c.get("/v1/status/leader").json() == "127.0.0.1:8500"
    assert c.get("/v1/status/peers").json() == ["127.0.0.1:8500"]
    assert [n["Node"] for n in c.get("/v1/catalog/nodes").json()] == ["n1"]
    for path, params in [("/v1/health/service/livros", {"index": "x"}), ("/v1/health/service/livros", {"wait": "2x"}),
                         ("/v1/health/service/livros", {"filter": "Service.Port == x"}),
                         ("/v1/catalog/services", {"dc": "elsewhere"}), ("/v1/catalog/services", {"ns": "*x\x01"})]:
        r = c.get(path, params=params)
        assert r.status_code == 400 and r.headers["content-type"].startswith("text/plain"), (path, params, r.text)
    r = c.get("/v1/kv/anything")
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/plain")


# The Go types Prometheus's Consul SD decodes these answers into (hashicorp/consul/api: ServiceEntry, Node,
# AgentService, HealthCheck; the agent's self as map[string]map[string]interface{}). encoding/json matches field names
# without regard to case and ignores the others, but a value of the wrong JSON type fails the whole decode.
STR, INT, BOOL = "string", "int", "bool"
STRINGS, STRING_MAP = ["string"], {"*": "string"}
GO_NODE = {"ID": STR, "Node": STR, "Address": STR, "Datacenter": STR, "TaggedAddresses": STRING_MAP,
           "Meta": STRING_MAP, "CreateIndex": INT, "ModifyIndex": INT}
GO_SERVICE = {"Kind": STR, "ID": STR, "Service": STR, "Tags": STRINGS, "Meta": STRING_MAP, "Port": INT, "Address": STR,
              "TaggedAddresses": {"*": {"Address": STR, "Port": INT}}, "Weights": {"Passing": INT, "Warning": INT},
              "EnableTagOverride": BOOL, "CreateIndex": INT, "ModifyIndex": INT, "Datacenter": STR, "Namespace": STR}
GO_CHECK = {"Node": STR, "CheckID": STR, "Name": STR, "Status": STR, "Notes": STR, "Output": STR, "ServiceID": STR,
            "ServiceName": STR, "ServiceTags": STRINGS, "Type": STR, "Namespace": STR, "CreateIndex": INT,
            "ModifyIndex": INT}
GO_ENTRY = {"Node": GO_NODE, "Service": GO_SERVICE, "Checks": [GO_CHECK]}


def decodes(value, go, at="") -> None:
    """Assert `value` decodes into the Go type `go` as encoding/json would (null decodes into anything)."""
    if value is None:
        return
    if go == STR:
        assert isinstance(value, str), at
    elif go == INT:
        assert isinstance(value, int) and not isinstance(value, bool), at
    elif go == BOOL:
        assert isinstance(value, bool), at
    elif isinstance(go, list):
        assert isinstance(value, list), at
        for n, item in enumerate(value):
            decodes(item, go[0], f"{at}[{n}]")
    elif "*" in go:
        assert isinstance(value, dict), at
        for key, item in value.items():
            decodes(item, go["*"], f"{at}.{key}")
    else:
        assert isinstance(value, dict), at
        fields = {name.lower(): kind for name, kind in go.items()}
        for key, item in value.items():
            if key.lower() in fields:
                decodes(item, fields[key.lower()], f"{at}.{key}")


def test_agent_self_and_a_blocking_health_read_decode_as_prometheus_s_consul_sd_reads_them(srv):
    c = srv.consul()
    info = c.get("/v1/agent/self").json()
    assert all(isinstance(v, dict) for v in info.values())  # map[string]map[string]interface{}
    datacenter = info["Config"]["Datacenter"]
    assert isinstance(datacenter, str)
    first = c.get("/v1/health/service/obras-de-terror", params={"stale": "", "dc": datacenter})
    index = first.headers["X-Consul-Index"]
    assert int(index) > 0
    waiting = c.submit("GET", "/v1/health/service/obras-de-terror",
                       params={"index": index, "stale": "", "wait": "120000ms", "dc": datacenter})
    srv.settle()
    assert c.put("/v1/agent/service/deregister/filme-1").status_code == 200
    srv.settle()
    r = waiting.result(10)
    assert int(r.headers["X-Consul-Index"]) > int(index)  # an index that moves, or Prometheus emits nothing new
    entries = r.json()
    assert [e["Service"]["ID"] for e in entries] == ["livro-1"]
    for n, entry in enumerate(entries):
        decodes(entry, GO_ENTRY, f"[{n}]")
        assert entry["Node"] is not None and entry["Node"]["Address"] and entry["Node"]["Node"]
        assert isinstance(entry["Node"]["Meta"], dict) and isinstance(entry["Node"]["TaggedAddresses"], dict)
        assert all(check["Status"] in ("passing", "warning", "critical") for check in entry["Checks"])


def test_the_consul_routes_are_counted_in_the_node_s_metrics(srv):
    assert srv.consul().get("/v1/health/service/livros").status_code == 200
    metrics = srv.client().get("/metrics").text
    assert 'route="/v1/health/service/{name:path}"' in metrics
    assert 'route="/v1/agent/service/register"' in metrics


def test_a_repeated_read_answers_what_changed_since_the_last_one(srv):
    """The entries are built once while an answer stands: a check's status, a new instance and a drain each show
    at the next read, by name and by meaning, in catalog and health alike."""
    c = srv.consul()
    paths = ["/v1/health/service/livros", "/v1/health/service/obras-de-terror", "/v1/catalog/service/livros",
             "/v1/catalog/services"]
    before = {p: c.get(p) for p in paths}
    assert all(r.status_code == 200 for r in before.values())
    assert {p: c.get(p).content for p in paths} == {p: r.content for p, r in before.items()}
    assert c.put("/v1/agent/check/fail/service:livro-1").status_code == 200
    status = {e["Service"]["ID"]: e["Checks"][1]["Status"] for e in c.get("/v1/health/service/livros").json()}
    assert status == {"livro-1": "critical", "livro-2": "passing"}
    assert ids(c.get("/v1/health/service/obras-de-terror", params={"passing": "1"}).json()) == {"filme-1"}
    assert c.put("/v1/agent/service/register", json={
        "ID": "livro-3", "Name": "livros", "Tags": ["ex:Livro ex:temUmGenero ex:Terror", "violet"],
        "Address": "10.0.0.3", "Port": 9000}).status_code == 200
    assert {e["ServiceID"] for e in c.get("/v1/catalog/service/livros").json()} == {"livro-1", "livro-2", "livro-3"}
    assert "violet" in c.get("/v1/catalog/services").json()["livros"]
    # by meaning, discovery answers: a critical instance is not among what it finds
    assert ids(c.get("/v1/health/service/obras-de-terror").json()) == {"livro-3", "filme-1"}
    assert c.put("/v1/agent/service/maintenance/livro-3", params={"enable": "true"}).status_code == 200
    checks = next(e["Checks"] for e in c.get("/v1/health/service/livros").json() if e["Service"]["ID"] == "livro-3")
    assert [ch["CheckID"] for ch in checks][-1] == "_service_maintenance:livro-3"
    assert int(c.get("/v1/health/service/livros").headers["X-Consul-Index"]) \
        > int(before["/v1/health/service/livros"].headers["X-Consul-Index"])
