"""Many blocked Consul reads at once, over HTTP in this process on a fake clock: churn on a service none of them
answers (registrations, TTL checks passed, warned and failed, maintenance, heartbeats, drains, deregistrations,
through the Consul listener and the public API) wakes none, by name or by meaning; a change relevant to some
wakes exactly those. "None woke" is read off the hub once it has finished what the changes started
(`srv.settle()`), never after a delay: a wake takes its topic's waiters off at once, so the hub's count of
waiting reads shows it."""
from __future__ import annotations

from concurrent.futures import Future

from support.case_study import SAVED_QUERY
from support.inprocess import InProcess

# the reads' names: saved queries (by meaning) and plain service names, with the instances each answers
ANSWERS = {
    SAVED_QUERY: {"livro-1", "filme-1"},  # works of horror
    "livros-de-terror": {"livro-1"},
    "obras-de-drama": {"pintura-1"},
    "livros": {"livro-1", "livro-2"},
    "filmes": {"filme-1"},
    "pinturas": {"pintura-1"},
}
READS = 200
CHURNED = 5


def ids(entries: list[dict]) -> set[str]:
    return {e["Service"]["ID"] if "Service" in e else e["ServiceID"] for e in entries}


def hub_counts(srv: InProcess) -> tuple[int, int]:
    """(reads waiting on the hub, wakes it has sent)."""
    hub = srv.node.coordinator.hub
    return srv.call(lambda: (hub.watches, hub.wakeups))


def save_queries(srv: InProcess) -> None:
    for name, (s, o) in {"livros-de-terror": ("ex:Livro", "ex:Terror"), "obras-de-drama": ("ex:Obra", "ex:Drama")}.items():
        r = srv.client().put(f"/v1/queries/{name}", json={"s": s, "p": "ex:temUmGenero", "o": o})
        assert r.status_code in (200, 201), r.text


def block(srv: InProcess) -> list[tuple[str, Future]]:
    """`READS` blocking reads spread over every name, health and catalog in turn, each at its read's index: (the
    name, the submitted request). Returns once every one waits on the hub."""
    c = srv.consul()
    names = list(ANSWERS)
    reads = []
    for n in range(READS):
        name = names[n % len(names)]
        path = f"/v1/{('health', 'catalog')[n // len(names) % 2]}/service/{name}"
        first = c.get(path)
        assert first.status_code == 200 and ids(first.json()) == ANSWERS[name]
        params = {"index": first.headers["X-Consul-Index"], "wait": "60s"}
        if n % 5 == 0:
            params["passing"] = "1"  # Prometheus reads without it, consul-template and Fabio with it
        reads.append((name, c.submit("GET", path, params=params)))
    for _ in range(20):  # each settle lets the loop run what is pending: the last reads reach the hub
        srv.settle()
        if hub_counts(srv)[0] == READS:
            break
    assert hub_counts(srv)[0] == READS
    return reads


def churn(srv: InProcess) -> None:
    """Every kind of change, on services none of the reads answers, with tags none of the saved queries finds:
    a novel about comedy is a work (and a book) of the wrong genre."""
    c, public = srv.consul(), srv.client()
    for n in range(CHURNED):
        sid = f"romance-{n}"
        assert c.put("/v1/agent/service/register", json={
            "ID": sid, "Name": "romances", "Tags": ["ex:Romance ex:temUmGenero ex:Comedia", "blue"],
            "Address": "10.0.1.1", "Port": 9100 + n, "Check": {"TTL": "30s", "Status": "passing"}}).status_code == 200
        for verb in ("pass", "warn", "fail", "pass"):
            assert c.put(f"/v1/agent/check/{verb}/service:{sid}").status_code == 200
        assert c.put(f"/v1/agent/check/update/service:{sid}", json={"Status": "warning", "Output": "slow"}) \
            .status_code == 200
        for enable in ("true", "false"):
            assert c.put(f"/v1/agent/service/maintenance/{sid}", params={"enable": enable}).status_code == 200
        r = public.put(f"/v1/instances/escultura-{n}", json={
            "service": "esculturas", "address": "10.0.2.1", "port": 9200 + n, "ttl": 30,
            "tags": [{"s": "ex:Filme", "p": "ex:temUmGenero", "o": "ex:Comedia"}]})
        assert r.status_code in (200, 201), r.text
        for body in ({"load": 3}, {"status": "draining"}, {"status": "up", "load": 1}):
            assert public.put(f"/v1/instances/escultura-{n}/heartbeat", json=body).status_code == 200
    for n in range(CHURNED):
        if n % 2:
            assert c.put(f"/v1/agent/service/deregister/romance-{n}").status_code == 200
            assert public.delete(f"/v1/instances/escultura-{n}").status_code in (200, 204)


def test_churn_on_another_service_wakes_none_of_many_blocked_reads(srv):
    save_queries(srv)
    reads = block(srv)
    _, wakes = hub_counts(srv)
    churn(srv)
    srv.settle()
    assert hub_counts(srv) == (READS, wakes)  # every read still waits, and the hub woke no topic
    assert not [name for name, read in reads if read.done()]


def test_a_relevant_change_wakes_exactly_the_reads_it_concerns(srv):
    save_queries(srv)
    reads = block(srv)
    churn(srv)
    srv.settle()
    # a drama book: read by its name (livros) and by meaning (obras-de-drama); not by the others
    assert srv.consul().put("/v1/agent/service/register", json={
        "ID": "livro-3", "Name": "livros", "Tags": ["ex:Livro ex:temUmGenero ex:Drama"], "Address": "10.0.0.3",
        "Port": 9000}).status_code == 200
    srv.settle()
    concerned = {"livros", "obras-de-drama"}
    woken = [(name, read.result(10)) for name, read in reads if name in concerned]
    assert len(woken) == sum(1 for name, _ in reads if name in concerned)
    for name, r in woken:
        assert int(r.headers["X-Consul-Index"]) > int(r.request.url.params["index"])
        assert "livro-3" in ids(r.json()), name
    assert not [name for name, read in reads if name not in concerned and read.done()]
    assert hub_counts(srv)[0] == READS - len(woken)
