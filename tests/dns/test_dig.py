"""`semreg serve --dns` asked by real DNS clients, as a platform asks it: `dig` (Debian's dnsutils) and
dnspython's stub resolver against a real server process, and a ring of three real nodes (with etcd) that
answers the same through every node. Each change is made through the HTTP API, then the test polls the DNS
answer until it shows it, within the TTL (never a sleep to prove that nothing happened)."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import dns.rcode
import dns.resolver
import pytest
from support.paths import ONTOLOGIES
from support.server import ServerProcess, free_port, wait_for

from semreg.bench.localcluster import LocalCluster

pytestmark = [pytest.mark.process, pytest.mark.needs_tool("dig", "dnsutils")]
TTL_S = 5
QUERY = {"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}


def dig(port: int, *args: str) -> str:
    out = subprocess.run(["dig", "@127.0.0.1", "-p", str(port), "+time=2", "+tries=2", *args], capture_output=True,
                         text=True, timeout=30, check=False)
    assert out.returncode == 0, out.stderr + out.stdout
    return out.stdout


def srv_targets(port: int, name: str = "_horror._tcp.semreg.") -> list[str]:
    """The SRV answer as `dig +short` prints it: 'priority weight port target', sorted."""
    return sorted(line for line in dig(port, "+short", name, "SRV").splitlines() if line)


def resolver(port: int) -> dns.resolver.Resolver:
    r = dns.resolver.Resolver(configure=False)
    r.nameservers = ["127.0.0.1"]
    r.port = port
    r.lifetime = 10
    return r


def instance(n: int, kind: str = "Livro", **kw) -> dict:
    return {"service": kind.lower(), "address": f"10.3.{n // 250}.{n % 250 + 1}", "port": 7000 + n, "ttl": 0,
            "tags": [f"ex:{kind} ex:temUmGenero ex:Terror"], **kw}


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    base = tmp_path_factory.mktemp("dns")
    dns_port = free_port()
    server = ServerProcess(base / "data", "--dns", f"127.0.0.1:{dns_port}", "--dns-ttl", str(TTL_S),
                           "--ontology", str(ONTOLOGIES / "obras.ttl"))
    server.start(base / "logs")
    server.dns_port = dns_port  # type: ignore[attr-defined]
    with server.client() as c:
        assert c.put("/v1/queries/horror", json=QUERY).status_code == 201
        yield server, c
    server.stop()


def test_dig_and_dnspython_follow_a_registration_a_drain_and_a_removal(node):
    server, c = node
    port = server.dns_port
    assert srv_targets(port) == []
    assert c.put("/v1/instances/livro-1", json=instance(1, weight=7, meta={"priority": "3"})).status_code == 201
    wait_for(lambda: srv_targets(port) == ["3 7 7001 livro-1.instance.semreg."], TTL_S, "the registration in SRV")
    answer = resolver(port).resolve("horror.semreg.", "A")
    assert [r.address for r in answer] == ["10.3.0.2"] and answer.rrset.ttl <= TTL_S
    srv = resolver(port).resolve("_horror._tcp.semreg.", "SRV")
    assert [(r.priority, r.weight, r.port, str(r.target)) for r in srv] == [(3, 7, 7001, "livro-1.instance.semreg.")]
    assert dig(port, "+short", "livro-1.instance.semreg.", "A").split() == ["10.3.0.2"]

    assert c.put("/v1/instances/livro-1/heartbeat", json={"status": "draining"}).status_code == 200
    wait_for(lambda: srv_targets(port) == [], TTL_S, "the drained instance out of SRV")
    assert c.put("/v1/instances/livro-1/heartbeat", json={"status": "up"}).status_code == 200
    wait_for(lambda: len(srv_targets(port)) == 1, TTL_S, "the instance back in SRV")
    assert c.delete("/v1/instances/livro-1").status_code == 204
    wait_for(lambda: srv_targets(port) == [], TTL_S, "the removed instance out of SRV")
    assert "status: NXDOMAIN" in dig(port, "livro-1.instance.semreg.", "A")


def test_unknown_names_are_nxdomain_to_both_clients(node):
    server, _ = node
    port = server.dns_port
    assert "status: NXDOMAIN" in dig(port, "_never-saved._tcp.semreg.", "SRV")
    assert "status: NXDOMAIN" in dig(port, "never-saved.semreg.", "A")
    assert "status: REFUSED" in dig(port, "example.com.", "A")
    with pytest.raises(dns.resolver.NXDOMAIN):
        resolver(port).resolve("_never-saved._tcp.semreg.", "SRV")
    with pytest.raises(dns.resolver.NoAnswer):  # a known name without records of that type
        resolver(port).resolve("_horror._tcp.semreg.", "TXT")


def test_two_hundred_instances_are_truncated_over_udp_and_fetched_over_tcp(node):
    server, c = node
    port = server.dns_port
    batch = [{"id": f"many-{n}", **instance(n, "Filme")} for n in range(200)]
    assert c.post("/v1/instances/batch", json={"instances": batch}).status_code == 200
    assert c.put("/v1/queries/films", json={"s": "ex:Filme"}).status_code == 201
    truncated = dig(port, "+noedns", "+ignore", "_films._tcp.semreg.", "SRV")
    assert " tc" in truncated.split("flags:")[1].split(";")[0]
    # a client that cannot retry over TCP still gets whole records: each SRV record with its target's A record
    count = int(re.search(r"ANSWER: (\d+),", truncated).group(1))
    assert count > 0 and f"ADDITIONAL: {count}" in truncated and int(re.search(r"MSG SIZE\s+rcvd: (\d+)",
                                                                                 truncated).group(1)) <= 512
    retried = dig(port, "+noedns", "_films._tcp.semreg.", "SRV")
    assert "Truncated, retrying in TCP mode" in retried and "ANSWER: 200" in retried
    assert len(resolver(port).resolve("_films._tcp.semreg.", "SRV")) == 200  # dnspython retries over TCP too
    assert len(resolver(port).resolve("films.semreg.", "A")) == 200


def test_dig_reads_the_zones_soa_and_ns_and_the_soa_of_negative_answers(node):
    server, _ = node
    port = server.dns_port
    soa = dig(port, "+short", "semreg.", "SOA").split()
    assert soa[:2] == ["semreg.", "hostmaster.semreg."] and soa[3:] == ["3600", "600", "86400", str(TTL_S)]
    assert dig(port, "+short", "semreg.", "NS").split() == ["semreg."]
    assert dig(port, "+short", "semreg.", "A").split() == ["127.0.0.1"]
    for name, rdtype, status in (("never-saved.semreg.", "A", "NXDOMAIN"), ("_horror._tcp.semreg.", "TXT", "NOERROR")):
        out = dig(port, name, rdtype)
        assert f"status: {status}" in out and "ANSWER: 0, AUTHORITY: 1," in out
        assert re.search(rf"^semreg\.\s+{TTL_S}\s+IN\s+SOA\s+semreg\. hostmaster\.semreg\. \d+ 3600 600 86400 {TTL_S}$",
                         out, re.M), out


def test_dig_asks_consuls_names_with_a_tag_and_gets_the_soa_where_none_has_it(node):
    server, c = node
    for n, tags in enumerate((["primary"], ["secondary"])):
        body = instance(900 + n, meta={"consul-tags": json.dumps(["ex:Livro ex:temUmGenero ex:Terror", *tags])})
        assert c.put(f"/v1/instances/consul-{n}", json=body).status_code == 201
    port = server.dns_port
    wait_for(lambda: "10.3.3.151" in dig(port, "+short", "primary.horror.service.semreg.", "A"), 3 * TTL_S,
             "the tagged instance in DNS")
    assert dig(port, "+short", "primary.horror.service.semreg.", "A").split() == ["10.3.3.151"]
    srv = dig(port, "+short", "_horror._secondary.service.semreg.", "SRV").split()
    assert srv == ["0", "1", "7901", "consul-1.instance.semreg."]
    out = dig(port, "nobody.horror.service.semreg.", "SRV")
    assert "status: NOERROR" in out and "ANSWER: 0, AUTHORITY: 1," in out and "hostmaster.semreg." in out
    for n in range(2):
        assert c.delete(f"/v1/instances/consul-{n}").status_code in (200, 204)


def test_dig_asking_with_a_large_edns_size_gets_at_most_1232_bytes_and_the_records_that_fit(node):
    server, c = node
    port = server.dns_port
    batch = [{"id": f"mural-{n:017d}", "service": "mural", "address": f"10.4.{n // 250}.{n % 250 + 1}",
              "port": 7500 + n, "ttl": 0, "tags": ["ex:Pintura"]} for n in range(150)]
    assert c.post("/v1/instances/batch", json={"instances": batch}).status_code == 200
    assert c.put("/v1/queries/murals", json={"s": "ex:Pintura"}).status_code == 201
    out = dig(port, "+bufsize=4096", "+ignore", "_murals._tcp.semreg.", "SRV")
    assert int(re.search(r"MSG SIZE\s+rcvd: (\d+)", out).group(1)) <= 1232
    assert " tc" in out.split("flags:")[1].split(";")[0]
    assert "ANSWER: 11, AUTHORITY: 0, ADDITIONAL: 12" in out  # 11 instances with their A records, and the OPT
    assert "ANSWER: 150," in dig(port, "+bufsize=4096", "_murals._tcp.semreg.", "SRV")  # then over TCP: all


@pytest.mark.slow
def test_a_ring_of_three_answers_the_same_through_every_node(tmp_path):
    cluster = LocalCluster(tmp_path / "ring", replicas=2, lease_s=2)
    try:
        cluster.start(0)
        ports = [free_port() for _ in range(3)]
        nodes = [cluster.add("--dns", f"127.0.0.1:{p}") for p in ports]
        wait_for(cluster.converged, 30, "three nodes on one ring")
        with nodes[0].client() as c1, nodes[1].client() as c2:
            r = c1.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                       headers={"Content-Type": "text/turtle"})
            assert r.status_code in (200, 201), r.text
            for n in range(12):
                assert c2.put(f"/v1/instances/r{n}", json=instance(n, ("Livro", "Filme")[n % 2])).status_code == 201
            assert c1.put("/v1/queries/horror", json=QUERY).status_code == 201
            expected = sorted(f"0 1 {7000 + n} r{n}.instance.semreg." for n in range(12))
            for p in ports:
                wait_for(lambda p=p: srv_targets(p) == expected, 15, f"the ring's answer through DNS port {p}")
                assert sorted(r.address for r in resolver(p).resolve("horror.semreg.", "A")) == \
                    sorted(f"10.3.0.{n + 1}" for n in range(12))
            assert c2.put("/v1/instances/r0/heartbeat", json={"status": "draining"}).status_code == 200
            drained = [e for e in expected if " r0." not in e]
            for p in ports:
                wait_for(lambda p=p: srv_targets(p) == drained, TTL_S, f"the drain through DNS port {p}")
    finally:
        cluster.close()


@pytest.mark.parametrize("flags, sentence", [(["--dns", "nonsense"], "give ADDRESS:PORT"),
                                             (["--dns", "127.0.0.1:5353", "--dns-domain", "a..b"], "--dns-domain"),
                                             (["--dns", "127.0.0.1:5353", "--dns-rate", "-1"], "--dns-rate"),
                                             (["--dns", "127.0.0.1:5353", "--dns-tcp-per-address", "0"],
                                              "--dns-tcp-per-address"),
                                             (["--dns", "127.0.0.1:5353", "--dns-tcp-write-timeout", "0"],
                                              "--dns-tcp-write-timeout")])
def test_serve_refuses_dns_flags_that_make_no_listener(tmp_path, flags, sentence):
    out = subprocess.run([sys.executable, "-m", "semreg", "serve", "--memory", *flags], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 2 and sentence in out.stderr, out.stderr
