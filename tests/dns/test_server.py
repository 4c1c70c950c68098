"""The DNS listeners of `--dns` (API.md, Saved queries), asked over real UDP and TCP sockets by dnspython's
query functions and by raw bytes, against the app in this process (on a fake clock): what each kind of name
answers, the rcodes, the zone's SOA and NS, answers cut to the size of their transport, the rate per client,
and garbage of every shape, which never stops the listeners nor gets SERVFAIL."""
from __future__ import annotations

import random
import socket
import struct

import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.dnswire import exchange
from support.inprocess import InProcess
from support.paths import ONTOLOGIES

from semreg.dns.answers import SUBSETS, shuffled
from semreg.registry.targets import Target


@pytest.fixture(scope="module")
def server():
    with InProcess(dns="127.0.0.1:0", dns_rate_per_s=0) as srv:
        c = srv.client()
        r = c.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
                  headers={"Content-Type": "text/turtle"})
        assert r.status_code == 201, r.text
        for n, (kind, extra) in enumerate([("Livro", {"weight": 5, "meta": {"priority": "2"}}), ("Filme", {}),
                                           ("Livro", {"address": "fd00::7"}), ("Filme", {"address": "films.example"})]):
            body = {"service": kind.lower(), "address": f"10.0.0.{n + 1}", "port": 8000 + n, "ttl": 0,
                    "tags": [f"ex:{kind} ex:temUmGenero ex:Terror"], **extra}
            assert c.put(f"/v1/instances/i{n}", json=body).status_code == 201
        assert c.put("/v1/instances/st", json={"service": "staged", "address": "10.9.0.1", "port": 1, "ttl": 0,
                                               "environment": "staging", "tags": ["ex:Livro"]}).status_code == 201
        assert c.put("/v1/queries/horror", json={"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}).status_code \
            == 201
        assert c.put("/v1/queries/books", json={"s": "ex:Livro"}).status_code == 201
        yield srv


def ask(srv: InProcess, name: str, rdtype: str = "SRV", tcp: bool = False, **kw) -> dns.message.Message:
    q = dns.message.make_query(name, rdtype, **kw)
    port = srv.node.dns.port
    if tcp:
        return dns.query.tcp(q, "127.0.0.1", port=port, timeout=5)
    return dns.query.udp(q, "127.0.0.1", port=port, timeout=5)


def records(m: dns.message.Message, section: str = "answer") -> set[str]:
    return {f"{rr.name} {dns.rdatatype.to_text(rr.rdtype)} {r}" for rr in getattr(m, section) for r in rr}


def test_srv_names_each_routable_instance_with_its_weight_priority_and_address(server):
    m = ask(server, "_horror._tcp.semreg.")
    assert m.rcode() == dns.rcode.NOERROR and m.flags & dns.flags.AA
    assert records(m) == {"_horror._tcp.semreg. SRV 2 5 8000 i0.instance.semreg.",
                          "_horror._tcp.semreg. SRV 0 1 8001 i1.instance.semreg.",
                          "_horror._tcp.semreg. SRV 0 1 8002 i2.instance.semreg.",
                          "_horror._tcp.semreg. SRV 0 1 8003 i3.instance.semreg."}
    assert records(m, "additional") >= {"i0.instance.semreg. A 10.0.0.1", "i1.instance.semreg. A 10.0.0.2",
                                        "i2.instance.semreg. AAAA fd00::7", "i3.instance.semreg. CNAME films.example."}
    assert all(rr.ttl == 5 for rr in m.answer)


def test_a_and_aaaa_name_the_addresses_that_are_ip_addresses(server):
    assert records(ask(server, "horror.semreg.", "A")) == {"horror.semreg. A 10.0.0.1", "horror.semreg. A 10.0.0.2"}
    assert records(ask(server, "horror.semreg.", "AAAA")) == {"horror.semreg. AAAA fd00::7"}
    assert records(ask(server, "i0.instance.semreg.", "A")) == {"i0.instance.semreg. A 10.0.0.1"}
    assert records(ask(server, "i3.instance.semreg.", "A")) == {"i3.instance.semreg. CNAME films.example."}


def test_an_environment_in_the_name_is_the_environment_read(server):
    assert records(ask(server, "_books._tcp.staging.semreg.")) == {"_books._tcp.staging.semreg. SRV 0 1 1 "
                                                                   "st.instance.semreg."}
    assert records(ask(server, "books.staging.semreg.", "A")) == {"books.staging.semreg. A 10.9.0.1"}
    empty = ask(server, "_books._tcp.nowhere.semreg.")
    assert empty.rcode() == dns.rcode.NOERROR and not empty.answer


NEGATIVE = [("_never._tcp.semreg.", "SRV", dns.rcode.NXDOMAIN), ("never.semreg.", "A", dns.rcode.NXDOMAIN),
            ("nobody.instance.semreg.", "A", dns.rcode.NXDOMAIN), ("a.b.c.semreg.", "A", dns.rcode.NXDOMAIN),
            ("_horror._tcp.semreg.", "A", dns.rcode.NOERROR), ("horror.semreg.", "SRV", dns.rcode.NOERROR),
            ("horror.semreg.", "TXT", dns.rcode.NOERROR), ("i0.instance.semreg.", "TXT", dns.rcode.NOERROR),
            ("semreg.", "TXT", dns.rcode.NOERROR), ("semreg.", "AAAA", dns.rcode.NOERROR),
            ("_books._tcp.nowhere.semreg.", "SRV", dns.rcode.NOERROR)]


@pytest.mark.parametrize("name, rdtype, rcode", [*NEGATIVE, ("example.com.", "A", dns.rcode.REFUSED)])
def test_unknown_names_are_nxdomain_known_ones_without_the_type_are_empty_others_refused(server, name, rdtype, rcode):
    m = ask(server, name, rdtype)
    assert m.rcode() == rcode and not m.answer


@pytest.mark.parametrize("name, rdtype, rcode", NEGATIVE)
@pytest.mark.parametrize("tcp", [False, True])
def test_nxdomain_and_empty_answers_carry_the_soa_so_that_resolvers_may_cache_them(server, name, rdtype, rcode, tcp):
    m = ask(server, name, rdtype, tcp=tcp)
    assert m.rcode() == rcode and m.flags & dns.flags.AA and not m.answer
    (soa,) = m.authority  # RFC 2308: the SOA, whose TTL and MINIMUM (both --dns-ttl) say how long to cache
    assert (soa.name, soa.rdtype, soa.ttl, soa[0].minimum) == (dns.name.from_text("semreg."), dns.rdatatype.SOA, 5, 5)


def test_a_name_outside_the_zone_gets_no_soa(server):
    m = ask(server, "example.com.", "A")
    assert m.rcode() == dns.rcode.REFUSED and not m.authority and not m.flags & dns.flags.AA


def test_the_apex_has_an_soa_and_an_ns_record_naming_itself_at_the_listen_address(server):
    (soa,) = ask(server, "semreg.", "SOA").answer
    serial = int(server.clock.wall())
    assert [str(r) for r in soa] == [f"semreg. hostmaster.semreg. {serial} 3600 600 86400 5"] and soa.ttl == 5
    server.advance(2)  # the serial is the answer's time in seconds: it moves whenever an answer may have
    assert ask(server, "semreg.", "SOA", tcp=True).answer[0][0].serial == serial + 2
    ns = ask(server, "semreg.", "NS")
    assert records(ns) == {"semreg. NS semreg."} and records(ns, "additional") == {"semreg. A 127.0.0.1"}
    assert records(ask(server, "semreg.", "A")) == {"semreg. A 127.0.0.1"}
    assert records(ask(server, "semreg.", "ANY")) == {"semreg. NS semreg.", "semreg. A 127.0.0.1",
                                                      f"semreg. SOA semreg. hostmaster.semreg. {serial + 2} 3600 600 "
                                                      "86400 5"}


def test_an_answer_follows_registration_drain_and_removal(server):
    c = server.client()

    def ids() -> set[str]:
        return {str(r.target).split(".")[0] for rr in ask(server, "_books._tcp.semreg.").answer for r in rr}

    before = ids()
    assert c.put("/v1/instances/new", json={"service": "n", "address": "10.1.1.1", "port": 9, "ttl": 0,
                                            "tags": ["ex:Livro"]}).status_code == 201
    assert ids() == before | {"new"}
    assert c.put("/v1/instances/new/heartbeat", json={"status": "draining"}).status_code == 200
    assert ids() == before
    assert c.put("/v1/instances/new/heartbeat", json={"status": "up"}).status_code == 200
    assert ids() == before | {"new"}
    assert c.delete("/v1/instances/new").status_code == 204
    assert ids() == before


def test_a_large_answer_is_truncated_over_udp_and_whole_over_tcp(server):
    c = server.client()
    batch = [{"id": f"big{n}", "service": "big", "address": f"10.2.{n // 250}.{n % 250 + 1}", "port": 80, "ttl": 0,
              "tags": ["ex:Pintura"]} for n in range(200)]
    assert c.post("/v1/instances/batch", json={"instances": batch}).status_code == 200
    assert c.put("/v1/queries/big", json={"s": "ex:Pintura"}).status_code == 201
    udp = ask(server, "_big._tcp.semreg.")
    assert udp.flags & dns.flags.TC
    edns = ask(server, "_big._tcp.semreg.", use_edns=0, payload=4096)
    assert edns.flags & dns.flags.TC  # 200 SRV records and their addresses pass 4096 bytes too
    whole = ask(server, "_big._tcp.semreg.", tcp=True)
    assert not whole.flags & dns.flags.TC and sum(len(rr) for rr in whole.answer) == 200
    assert len(records(ask(server, "big.semreg.", "A", tcp=True))) == 200


@pytest.fixture(scope="module")
def crowd(server):
    """150 instances of a saved query `murals` and 1,500 of `frescos`, each id 23 characters long."""
    c = server.client()
    for query, term, count in (("murals", "ex:Mural", 150), ("frescos", "ex:Fresco", 1500)):
        batch = [{"id": f"{query[:6]}-{n:016d}", "service": query, "address": f"10.5.{n // 250}.{n % 250 + 1}",
                  "port": 9000 + n, "ttl": 0, "tags": [term]} for n in range(count)]
        assert c.post("/v1/instances/batch", json={"instances": batch}).status_code == 200
        assert c.put(f"/v1/queries/{query}", json={"s": term}).status_code == 201
    return server


def check_whole(m: dns.message.Message, query: str, most: int) -> int:
    """Every SRV record is one of the query's instances, with its port and with its own A record beside it
    (and no A record without its SRV record); returns how many."""
    srv = {str(r.target): r.port for rr in m.answer for r in rr}
    glue = {str(rr.name): r.address for rr in m.additional for r in rr}
    assert srv.keys() == glue.keys() and 0 < len(srv) < most
    for target, port in srv.items():
        n = int(target.split(".")[0].split("-")[1])
        assert target == f"{query[:6]}-{n:016d}.instance.semreg." and port == 9000 + n
        assert glue[target] == f"10.5.{n // 250}.{n % 250 + 1}"
    return len(srv)


@pytest.mark.parametrize("payload", [1232, 1233, 4096, 65535])
def test_whatever_edns_size_is_asked_a_udp_answer_is_at_most_1232_bytes(crowd, payload):
    query = dns.message.make_query("_murals._tcp.semreg.", "SRV", use_edns=0, payload=payload).to_wire()
    wire = udp_exchange(crowd.node.dns.port, query)
    assert wire is not None and len(wire) <= 1232 < 30 * len(query)
    m = dns.message.from_wire(wire)
    assert m.flags & dns.flags.TC and m.payload == 1232  # what the server takes, said in its OPT record
    check_whole(m, "murals", 150)


@pytest.mark.parametrize("edns, most_bytes", [(False, 512), (True, 1232)])
def test_150_instances_over_udp_keep_as_many_whole_records_as_fit_with_tc(crowd, edns, most_bytes):
    query = dns.message.make_query("_murals._tcp.semreg.", "SRV", use_edns=0 if edns else None)
    wire = udp_exchange(crowd.node.dns.port, query.to_wire())
    assert wire is not None and len(wire) <= most_bytes
    m = dns.message.from_wire(wire)
    assert m.rcode() == dns.rcode.NOERROR and m.flags & dns.flags.TC
    # 99 bytes an instance (its SRV record, never compressed, and its A record): 4 in 512 bytes, 11 in 1232
    assert check_whole(m, "murals", 150) == (11 if edns else 4)
    assert len(records(ask(crowd, "murals.semreg.", "A"))) == 30  # 16 bytes an A record, after 31 of header and question


def test_a_cut_udp_answer_is_a_shuffled_subset_so_clients_without_tcp_spread_over_the_instances(crowd):
    """As Consul shuffles before it trims: asked again and again, the 4 instances that fit in 512 bytes are not
    always the same 4, each answer whole; at most `SUBSETS` different ones are made per change of the answer."""
    seen: set[frozenset[str]] = set()
    for _ in range(60):
        wire = udp_exchange(crowd.node.dns.port, dns.message.make_query("_murals._tcp.semreg.", "SRV").to_wire())
        assert wire is not None
        m = dns.message.from_wire(wire)
        assert m.flags & dns.flags.TC and check_whole(m, "murals", 150) == 4
        seen.add(frozenset(str(r.target) for rr in m.answer for r in rr))
    assert 1 < len(seen) <= SUBSETS
    addresses = set()
    for _ in range(60):
        addresses |= {r.split()[-1] for r in records(ask(crowd, "murals.semreg.", "A"))}
    assert len(addresses) > 30  # 30 A records fit; the subsets between them hold more of the 150


def test_a_cut_udp_answer_never_skips_a_preferred_srv_priority(server):
    c = server.client()
    batch = [{"id": f"tier-{n:03d}", "service": "tiers", "address": f"10.6.0.{n + 1}", "port": 9000 + n, "ttl": 0,
              "tags": ["ex:Escultura"], "meta": {"priority": "1" if n % 10 == 0 else "2"}} for n in range(100)]
    assert c.post("/v1/instances/batch", json={"instances": batch}).status_code == 200
    assert c.put("/v1/queries/tiers", json={"s": "ex:Escultura"}).status_code == 201
    seen: set[str] = set()
    for _ in range(40):
        m = ask(server, "_tiers._tcp.semreg.")
        assert m.flags & dns.flags.TC and {r.priority for rr in m.answer for r in rr} == {1}
        seen |= {str(r.target) for rr in m.answer for r in rr}
    assert len(seen) > len(m.answer[0])  # of the 10 of priority 1, more than one answer's worth
    whole = ask(server, "_tiers._tcp.semreg.", tcp=True)
    assert not whole.flags & dns.flags.TC and sum(len(rr) for rr in whole.answer) == 100
    assert c.delete("/v1/queries/tiers").status_code in (200, 204)
    for n in range(100):
        assert c.delete(f"/v1/instances/tier-{n:03d}").status_code in (200, 204)


def test_shuffled_keeps_the_priorities_in_order_and_mixes_within_them():
    targets = [Target(f"t{n}", "s", "default", "10.0.0.1", n, "http", 1, n % 3, "exact", 0, ()) for n in range(30)]
    rng = random.Random(7)
    orders = [shuffled(targets, rng) for _ in range(5)]
    for order in orders:
        assert [t.priority for t in order] == sorted(t.priority for t in targets) and set(order) == set(targets)
    assert len({tuple(t.id for t in order) for order in orders}) == 5


def test_1500_instances_over_tcp_keep_as_many_as_fit_in_one_message(crowd):
    q = dns.message.make_query("_frescos._tcp.semreg.", "SRV")
    with socket.create_connection(("127.0.0.1", crowd.node.dns.port), timeout=10) as s:
        wire = exchange(s, q.to_wire())
    m = dns.message.from_wire(wire)
    assert m.rcode() == dns.rcode.NOERROR and m.flags & dns.flags.TC  # partial: it says so
    # 108 bytes an instance: no pointer reaches past 16,383 bytes, where the A records are, so each names in full
    # `instance` (and points at `semreg.`, in the question)
    assert check_whole(m, "frescos", 1500) == 606 and len(wire) <= 65535
    assert len(records(ask(crowd, "frescos.semreg.", "A", tcp=True))) == 1500  # 16 bytes each: all fit


def test_past_its_rate_a_client_is_refused_until_time_passes(in_process):
    srv = in_process(dns="127.0.0.1:0", dns_rate_per_s=3)
    answers = [ask(srv, "semreg.", "SOA").rcode() for _ in range(5)]
    assert answers == [dns.rcode.NOERROR] * 3 + [dns.rcode.REFUSED] * 2
    srv.advance(1)
    assert ask(srv, "semreg.", "SOA").rcode() == dns.rcode.NOERROR


# -- garbage ---------------------------------------------------------------------------------------
def udp_exchange(port: int, data: bytes) -> bytes | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(0.5)
        s.sendto(data, ("127.0.0.1", port))
        try:
            return s.recv(65535)
        except TimeoutError:
            return None


def tcp_exchange(port: int, data: bytes, framed: bool) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack("!H", len(data)) + data if framed else data)
        s.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := s.recv(65535):
            chunks.append(chunk)
        return b"".join(chunks)


VALID = dns.message.make_query("_horror._tcp.semreg.", "SRV").to_wire()
LABELS = st.sampled_from(["service", "SERVICE", "_tcp", "_horror", "horror", "books", "instance", "i0", "staging",
                          "primary", "_primary", "-", "_", "x" * 40]) | st.binary(min_size=1, max_size=12)
IN_ZONE = st.builds(lambda labels, rdtype, edns: dns.message.make_query(
    dns.name.Name([*labels, b"semreg", b""]), rdtype, use_edns=0 if edns else None),
    st.lists(LABELS, max_size=5), st.sampled_from(["SRV", "A", "AAAA", "ANY", "TXT", "SOA", "NS", "CNAME"]),
    st.booleans())


def check_alive(server: InProcess) -> None:
    assert ask(server, "_horror._tcp.semreg.").rcode() == dns.rcode.NOERROR
    assert server.node.dns.failed == 0  # nothing answered SERVFAIL


def mutated(data: bytes, flips: list[tuple[int, int]]) -> bytes:
    out = bytearray(data)
    for at, value in flips:
        out[at % len(out)] = value
    return bytes(out)


PACKETS = st.one_of(st.binary(max_size=600),
                    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=8).map(
                        lambda flips: mutated(VALID, flips)),
                    st.integers(0, len(VALID)).map(lambda n: VALID[:n]),
                    IN_ZONE.map(lambda q: q.to_wire()))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(IN_ZONE)
def test_any_question_in_the_zone_gets_a_well_formed_answer_with_records_or_the_soa(server, query):
    """Whatever names of Consul's, semreg's own or neither a question spells: an answer to its id, within the
    size it may take, NOERROR or NXDOMAIN, and the zone's SOA wherever there is no record to answer."""
    wire = udp_exchange(server.node.dns.port, query.to_wire())
    assert wire is not None and len(wire) <= (1232 if query.edns >= 0 else 512)
    m = dns.message.from_wire(wire)
    assert m.id == query.id and m.flags & dns.flags.QR and m.flags & dns.flags.AA
    assert m.rcode() in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN)
    if not m.answer:
        assert [rr.rdtype for rr in m.authority] == [dns.rdatatype.SOA]
    assert server.node.dns.failed == 0


@pytest.mark.slow  # a packet that gets no answer is known so only once its wait for one is over (0.5 s)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(PACKETS)
def test_garbage_over_udp_gets_an_answer_or_none_never_a_failure(server, data):
    reply = udp_exchange(server.node.dns.port, data)
    if reply is not None:
        assert reply[:2] == data[:2] and reply[2] & 0x80  # an answer to that id
        assert reply[3] & 0x0F != dns.rcode.SERVFAIL
    assert server.node.dns.failed == 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(PACKETS, st.booleans())
def test_garbage_over_tcp_gets_an_answer_or_a_closed_connection(server, data, framed):
    reply = tcp_exchange(server.node.dns.port, data, framed)
    if framed and reply:
        (size,) = struct.unpack("!H", reply[:2])
        assert len(reply) == size + 2 and reply[5] & 0x0F != dns.rcode.SERVFAIL
    assert server.node.dns.failed == 0


def test_the_listeners_answer_after_the_garbage(server):
    for data in (b"", b"\x00", b"\xff" * 12, VALID[:12], b"\x12\x34" + b"\x00" * 10 + b"\xc0\x0c" * 50):
        udp_exchange(server.node.dns.port, data)
        tcp_exchange(server.node.dns.port, data, True)
    check_alive(server)


def test_a_saved_query_of_several_patterns_answers_with_the_instances_matching_all(server):
    c = server.client()
    r = c.put("/v1/queries/horror-books", json={"all": ["ex:Obra ex:temUmGenero ex:Terror", "ex:Livro"]})
    assert r.status_code == 201, r.text
    assert records(ask(server, "_horror-books._tcp.semreg.")) == {
        "_horror-books._tcp.semreg. SRV 2 5 8000 i0.instance.semreg.",
        "_horror-books._tcp.semreg. SRV 0 1 8002 i2.instance.semreg."}
    assert records(ask(server, "horror-books.semreg.", "A")) == {"horror-books.semreg. A 10.0.0.1"}
    assert records(ask(server, "horror-books.semreg.", "AAAA")) == {"horror-books.semreg. AAAA fd00::7"}
    assert c.delete("/v1/queries/horror-books").status_code == 204


def test_an_answer_is_kept_whatever_the_case_of_the_name_and_echoes_the_askers_spelling(crowd):
    """Resolvers vary the case of the names they ask (against spoofing): one answer made, kept by the name in
    lower case, sent back with each asker's own spelling of it (a cut 64 KB answer costs ~250 ms to make)."""
    zone = crowd.node.dns.zone
    spellings = ["_frescos._tcp.semreg.", "_FRESCOS._tcp.SEMREG.", "_FrEsCoS._TcP.sEmReG."]
    answers = []
    for name in spellings:
        q = dns.message.make_query(name, "SRV")
        with socket.create_connection(("127.0.0.1", crowd.node.dns.port), timeout=10) as s:
            answers.append(dns.message.from_wire(exchange(s, q.to_wire())))
    kept = [key for key in zone.answers if b"_frescos" in key[0]]
    assert len([k for k in kept if k[1]]) == 1  # one answer over TCP kept for the three spellings
    assert check_whole(answers[0], "frescos", 1500) == 606
    for name, m in zip(spellings, answers):
        assert m.question[0].name.to_text() == name  # byte for byte: the asker's own case
        assert m.rcode() == dns.rcode.NOERROR and m.flags & dns.flags.TC
        # the same records (a name compressed against the question reads in the asker's case: names compare
        # without regard to case)
        assert {r.lower() for r in records(m)} == {r.lower() for r in records(answers[0])}
        assert {r.lower() for r in records(m, "additional")} == {r.lower() for r in records(answers[0], "additional")}


def test_the_dns_counters_are_on_metrics(server):
    ask(server, "_horror._tcp.semreg.")
    metrics = server.client().get("/metrics").text
    answered = next(line for line in metrics.splitlines() if line.startswith("semreg_dns_answered_total "))
    assert float(answered.split()[1]) >= 1
    assert 'semreg_dns_tcp_closed_total{reason="per_address"} 0.0' in metrics
    assert "semreg_dns_tcp_connections " in metrics
