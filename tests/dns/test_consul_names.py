"""Consul's DNS names (`NAME.service.DOMAIN`, `TAG.NAME.service.DOMAIN`, `_NAME._TAG.service.DOMAIN`, each with an
environment where Consul puts a datacenter) over a real UDP socket, against the app in this process, in a zone
named `consul.` as a resolver configured for Consul asks it: the saved query's instances, only those with the
Consul tag when one is named, SRV or addresses as the question's type asks; the zone's own names keep answering."""
from __future__ import annotations

import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import orjson
import pytest
from support.inprocess import InProcess
from support.paths import ONTOLOGIES


@pytest.fixture(scope="module")
def server():
    with InProcess(dns="127.0.0.1:0", dns_rate_per_s=0, dns_domain="consul.") as srv:
        c = srv.client()
        r = c.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                  headers={"Content-Type": "text/turtle"})
        assert r.status_code == 201, r.text
        for n, (kind, tags, env) in enumerate([("Livro", ["primary", "V1"], "default"), ("Filme", ["v1"], "default"),
                                               ("Livro", [], "default"), ("Filme", ["primary"], "staging")]):
            meta = {"consul-tags": orjson.dumps([f"ex:{kind} ex:temUmGenero ex:Terror", *tags]).decode()} if tags \
                else {}
            body = {"service": kind.lower(), "address": f"10.0.0.{n + 1}", "port": 8000 + n, "ttl": 0,
                    "environment": env, "tags": [f"ex:{kind} ex:temUmGenero ex:Terror"], "meta": meta}
            r = c.put(f"/v1/instances/i{n}", json=body)
            assert r.status_code == 201, r.text
        assert c.put("/v1/queries/horror", json={"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}).status_code \
            == 201
        yield srv


def ask(srv: InProcess, name: str, rdtype: str) -> dns.message.Message:
    return dns.query.udp(dns.message.make_query(name, rdtype), "127.0.0.1", port=srv.node.dns.port, timeout=5)


def records(m: dns.message.Message, section: str = "answer") -> set[str]:
    return {f"{rr.name} {dns.rdatatype.to_text(rr.rdtype)} {r}" for rr in getattr(m, section) for r in rr}


def test_name_service_answers_srv_with_each_targets_address(server):
    m = ask(server, "horror.service.consul.", "SRV")
    assert m.rcode() == dns.rcode.NOERROR and m.flags & dns.flags.AA
    assert records(m) == {f"horror.service.consul. SRV 0 1 {8000 + n} i{n}.instance.consul." for n in range(3)}
    assert records(m, "additional") == {f"i{n}.instance.consul. A 10.0.0.{n + 1}" for n in range(3)}


def test_name_service_answers_a_with_the_addresses(server):
    assert records(ask(server, "Horror.Service.consul.", "A")) == {f"Horror.Service.consul. A 10.0.0.{n + 1}"
                                                                    for n in range(3)}


@pytest.mark.parametrize("name", ["primary.horror.service.consul.", "PRIMARY.horror.service.consul.",
                                  "_horror._primary.service.consul."])
def test_a_tag_keeps_the_instances_carrying_it_without_case(server, name):
    assert {r.split()[-1] for r in records(ask(server, name, "SRV"))} == {"i0.instance.consul."}
    assert {r.split()[-1] for r in records(ask(server, name, "A"))} == {"10.0.0.1"}


def test_v1_matches_v1_and_V1_and_tcp_in_rfc_2782s_spelling_is_no_tag(server):
    assert {r.split()[-1] for r in records(ask(server, "v1.horror.service.consul.", "A"))} == {"10.0.0.1", "10.0.0.2"}
    assert len(records(ask(server, "_horror._tcp.service.consul.", "SRV"))) == 3


def test_an_environment_stands_where_consul_puts_a_datacenter(server):
    assert records(ask(server, "horror.service.staging.consul.", "A")) == {"horror.service.staging.consul. A 10.0.0.4"}
    assert records(ask(server, "primary.horror.service.staging.consul.", "A")) == {
        "primary.horror.service.staging.consul. A 10.0.0.4"}


@pytest.mark.parametrize("name, rdtype, rcode", [
    ("nobody.horror.service.consul.", "SRV", dns.rcode.NOERROR),  # the query is there; no instance has the tag
    ("horror.service.consul.", "TXT", dns.rcode.NOERROR),
    ("nothing.service.consul.", "SRV", dns.rcode.NXDOMAIN),
    ("a.b.horror.service.consul.", "A", dns.rcode.NXDOMAIN),
])
def test_no_records_carry_the_soa_nxdomain_or_not(server, name, rdtype, rcode):
    m = ask(server, name, rdtype)
    assert m.rcode() == rcode and not m.answer
    assert [rr.rdtype for rr in m.authority] == [dns.rdatatype.SOA] and m.authority[0].name.to_text() == "consul."


def test_the_zones_own_names_keep_answering_in_it(server):
    assert len(records(ask(server, "_horror._tcp.consul.", "SRV"))) == 3
    assert len(records(ask(server, "horror.consul.", "A"))) == 3
    assert records(ask(server, "i1.instance.consul.", "A")) == {"i1.instance.consul. A 10.0.0.2"}
    assert [rr.rdtype for rr in ask(server, "consul.", "SOA").answer] == [dns.rdatatype.SOA]
