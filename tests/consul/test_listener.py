"""`semreg serve --consul-listen` in its own process, driven by a real Consul client (py-consul): it registers with
pattern and plain tags and a TTL check, passes and fails the check, reads back through the catalog and health
APIs, finds a saved query's name answered by meaning, narrows its reads with filter expressions, puts a service in
maintenance and takes it out, and holds a blocking read that wakes on its own change. The blocking read's waiting is
the thread's join, with a deadline, never a sleep."""
from __future__ import annotations

import threading

import consul
import httpx
import pytest
from support.paths import ONTOLOGIES
from support.server import free_port

pytestmark = pytest.mark.process


@pytest.fixture
def server(start_server):
    port = free_port()
    srv = start_server("--consul-listen", f"127.0.0.1:{port}")
    with httpx.Client(base_url=srv.url, timeout=30) as api:
        assert api.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                       headers={"Content-Type": "text/turtle"}).status_code == 201
        assert api.put("/v1/queries/obras-de-terror", json={"s": "ex:Obra", "p": "ex:temUmGenero",
                                                            "o": "ex:Terror"}).status_code in (200, 201)
        yield api, consul.Consul(host="127.0.0.1", port=port)


def test_py_consul_registers_checks_and_discovers_by_name_and_by_meaning(server):
    api, c = server
    for sid, name, tags in [("livro-1", "livros", ["ex:Livro ex:temUmGenero ex:Terror", "blue"]),
                            ("filme-1", "filmes", ["ex:Filme ex:temUmGenero ex:Terror"]),
                            ("pintura-1", "pinturas", ["ex:Pintura ex:temUmGenero ex:Drama"])]:
        assert c.agent.service.register(name, service_id=sid, address="127.0.0.1", port=9000, tags=tags,
                                        meta={"team": "arts"}, check=consul.Check.ttl("30s"))
    # a TTL check starts critical, as Consul starts it, until the service passes it
    _, passing = c.health.service("livros", passing=True)
    assert passing == []
    for sid in ("livro-1", "filme-1", "pintura-1"):
        assert c.agent.check.ttl_pass(f"service:{sid}")
    _, passing = c.health.service("livros", passing=True)
    assert [e["Service"]["ID"] for e in passing] == ["livro-1"]
    assert passing[0]["Service"]["Tags"] == ["ex:Livro ex:temUmGenero ex:Terror", "blue"]
    _, tagged = c.health.service("livros", tag="blue")
    assert [e["Service"]["ID"] for e in tagged] == ["livro-1"]
    _, services = c.catalog.services()
    assert {"livros", "filmes", "pinturas"} <= set(services)
    _, found = c.health.service("obras-de-terror", passing=True)
    assert {e["Service"]["ID"] for e in found} == {"livro-1", "filme-1"}
    assert c.agent.check.ttl_fail("service:filme-1")
    _, found = c.health.service("obras-de-terror", passing=True)
    assert {e["Service"]["ID"] for e in found} == {"livro-1"}
    # the same instances on semreg's own API: one registry
    assert api.get("/v1/instances/filme-1").json()["status"] == "critical"


def test_a_blocking_read_of_py_consul_wakes_on_its_own_change(server):
    _, c = server
    assert c.agent.service.register("livros", service_id="livro-1", address="127.0.0.1", port=9000)
    assert c.agent.service.register("livros", service_id="livro-2", address="127.0.0.1", port=9001)
    index, entries = c.health.service("livros")
    assert len(entries) == 2
    answer: dict = {}
    reader = threading.Thread(target=lambda: answer.update(r=c.health.service("livros", index=index, wait="20s")))
    reader.start()
    assert c.agent.service.deregister("livro-2")
    reader.join(15)
    assert not reader.is_alive(), "the blocking read did not wake on its own change"
    new_index, entries = answer["r"]
    assert int(new_index) > int(index)
    assert [e["Service"]["ID"] for e in entries] == ["livro-1"]


def test_py_consul_s_maintenance_drains_a_service_and_ends_the_drain(server):
    api, c = server
    assert c.agent.service.register("livros", service_id="livro-1", address="127.0.0.1", port=9000,
                                    tags=["ex:Livro ex:temUmGenero ex:Terror"], check=consul.Check.ttl("30s"))
    assert c.agent.check.ttl_pass("service:livro-1")
    assert c.agent.service.maintenance("livro-1", True, reason="deploying")  # sent as enable=True
    assert api.get("/v1/instances/livro-1").json()["status"] == "draining"
    _, passing = c.health.service("obras-de-terror", passing=True)
    assert passing == []
    _, listed = c.health.service("livros")
    assert {ch["CheckID"]: ch["Status"] for ch in listed[0]["Checks"]}["_service_maintenance:livro-1"] == "critical"
    assert c.agent.check.ttl_pass("service:livro-1")  # the service's check passing does not end it
    assert api.get("/v1/instances/livro-1").json()["status"] == "draining"
    assert c.agent.service.maintenance("livro-1", False)
    _, passing = c.health.service("obras-de-terror", passing=True)
    assert [e["Service"]["ID"] for e in passing] == ["livro-1"]


def test_py_consul_s_filter_expressions_narrow_its_reads_and_a_bad_one_is_its_bad_request(server):
    _, c = server
    for sid, tags, version in [("livro-1", ["ex:Livro ex:temUmGenero ex:Terror", "blue"], "1"),
                               ("livro-2", ["ex:Livro ex:temUmGenero ex:Comedia"], "2")]:
        assert c.agent.service.register("livros", service_id=sid, address="127.0.0.1", port=9000, tags=tags,
                                        meta={"version": version}, check=consul.Check.ttl("30s"))
    assert c.agent.check.ttl_pass("service:livro-1")  # livro-2's check stays critical, as it started
    _, found = c.health.service("livros", filter_expr='Service.Meta.version == "2" or "blue" in Service.Tags')
    assert {e["Service"]["ID"] for e in found} == {"livro-1", "livro-2"}
    _, found = c.health.service("livros", filter_expr="Checks.Status == critical")
    assert [e["Service"]["ID"] for e in found] == ["livro-2"]
    _, found = c.health.service("obras-de-terror", filter_expr='Service.Meta["semreg-degree"] == narrower')
    assert [e["Service"]["ID"] for e in found] == ["livro-1"]
    assert set(c.agent.services(filter_expr="Meta.version != 1")) == {"livro-2"}
    with pytest.raises(consul.ConsulException, match='Selector "Service.Version" is not valid'):
        c.health.service("livros", filter_expr="Service.Version == 2")


@pytest.mark.parametrize("value, says", [("8500", "give HOST:PORT"), ("127.0.0.1:70000", "give HOST:PORT"),
                                         ("127.0.0.1:{port}", "port of its own")])
def test_a_consul_listen_address_that_cannot_be_is_refused_before_anything_starts(value, says):
    import subprocess
    import sys

    port = free_port()
    out = subprocess.run([sys.executable, "-m", "semreg", "serve", "--memory", "--no-sparql", "--port", str(port),
                          "--consul-listen", value.format(port=port)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and says in out.stderr, out.stderr


def test_a_critical_status_reported_through_a_ttl_check_is_kept_across_a_restart(start_server, tmp_path):
    port = free_port()
    data = tmp_path / "data"
    first = start_server("--consul-listen", f"127.0.0.1:{port}", data_dir=data)
    c = consul.Consul(host="127.0.0.1", port=port)
    assert c.agent.service.register("livros", service_id="livro-1", address="127.0.0.1", port=9000,
                                    check=consul.Check.ttl("30s"))
    assert c.agent.check.ttl_pass("service:livro-1")
    assert c.agent.check.ttl_fail("service:livro-1")
    first.stop()
    start_server("--consul-listen", f"127.0.0.1:{port}", data_dir=data)
    _, entries = c.health.service("livros")
    assert [check["Status"] for check in entries[0]["Checks"] if check["CheckID"] == "service:livro-1"] == ["critical"]
