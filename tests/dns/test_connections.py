"""The DNS listener's TCP connections (`semreg.dns.connections`), tried with real sockets on loopback against the
app in this process (on a fake clock: a deadline passes when the test moves the clock, and a test waits for
the connection's end as an event): one address cannot take every connection from the others, a message sent a
byte at a time is cut at its deadline, and a client that never reads is closed. Then the shedding rule, as a
table over the pure bookkeeping."""
from __future__ import annotations

import socket
import struct

import dns.flags
import dns.message
import dns.query
import dns.rcode
import pytest
from support import dnswire
from support.paths import ONTOLOGIES
from support.server import wait_for

from semreg.clock import FakeClock
from semreg.dns.connections import Connections, Limits

QUESTION = dns.message.make_query("_horror._tcp.semreg.", "SRV")


def dns_server(in_process, **settings):
    srv = in_process(dns="127.0.0.1:0", dns_rate_per_s=0, **settings)
    c = srv.client()
    r = c.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
              headers={"Content-Type": "text/turtle"})
    assert r.status_code == 201, r.text
    assert c.put("/v1/instances/i0", json={"service": "livro", "address": "10.0.0.1", "port": 8000, "ttl": 0,
                                           "tags": ["ex:Livro ex:temUmGenero ex:Terror"]}).status_code == 201
    assert c.put("/v1/queries/horror", json={"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}).status_code \
        == 201
    return srv


def connect(srv, source: str = "127.0.0.1") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", srv.node.dns.port), timeout=10, source_address=(source, 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # closed at the end: no TIME_WAIT
    return s


def exchange(s: socket.socket, query: dns.message.Message = QUESTION) -> dns.message.Message:
    return dns.message.from_wire(dnswire.exchange(s, query.to_wire()))


def ended(s: socket.socket) -> bool:
    """Whether the server closed `s`: the end of its stream (after what it had sent), or a reset (within 5 s)."""
    s.settimeout(5)
    try:
        while s.recv(65536):
            pass
    except ConnectionResetError:
        pass
    return True


def still_open(s: socket.socket) -> bool:
    """Whether `s` is open from the server's side now: nothing to read, and no end."""
    timeout = s.gettimeout()
    s.settimeout(0)
    try:
        return s.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except ConnectionResetError:
        return False
    finally:
        s.settimeout(timeout)


def answered(m: dns.message.Message) -> bool:
    return m.rcode() == dns.rcode.NOERROR and len(m.answer) == 1


def test_260_idle_connections_from_one_address_leave_another_address_answered(in_process):
    srv = dns_server(in_process)
    held = [connect(srv, "127.0.0.1") for _ in range(260)]
    try:
        assert answered(dns.query.tcp(QUESTION, "127.0.0.1", port=srv.node.dns.port, source="127.0.0.2",
                                      timeout=5))
        # --dns-tcp-per-address 16: the first address's others were closed at once, its first 16 left alone
        wait_for(lambda: sum(not still_open(s) for s in held) == 244, what="244 connections closed")
        kept = [s for s in held if still_open(s)]
        assert len(kept) == 16 and srv.node.dns.connections.refused == 244
        assert all(answered(exchange(s)) for s in kept)
    finally:
        for s in held:
            s.close()


def test_when_every_connection_is_held_a_newcomer_takes_the_place_of_the_busiest_addresss_longest_waiting(
        in_process):
    srv = dns_server(in_process, dns_tcp_connections=5, dns_tcp_per_address=3)
    busy = [connect(srv, "127.0.0.1") for _ in range(3)]
    other = [connect(srv, "127.0.0.2") for _ in range(2)]
    sockets = [*busy, *other]
    try:
        wait_for(lambda: srv.node.dns.connections.held == 5, what="five connections held")
        srv.advance(1)
        assert answered(exchange(busy[0]))  # it waits since now; busy[1] has waited longest
        sockets.append(connect(srv, "127.0.0.3"))
        assert answered(exchange(sockets[-1]))
        assert ended(busy[1])
        assert all(answered(exchange(s)) for s in (busy[0], busy[2], *other))
        assert srv.node.dns.connections.shed == 1
    finally:
        for s in sockets:
            s.close()


def test_a_message_sent_a_byte_a_second_is_cut_at_its_deadline(in_process):
    srv = dns_server(in_process)  # --dns-tcp-timeout 10
    with connect(srv) as s:
        assert answered(exchange(s))  # the deadline of the next message starts with this answer
        message = QUESTION.to_wire(prepend_length=True)
        for second in range(9):
            s.sendall(message[second:second + 1])
            srv.advance(1)
        assert still_open(s)  # 9 s after the answer, 9 bytes in
        s.sendall(message[9:10])
        srv.advance(1)  # 10 s: the message is not whole, however many bytes came
        assert ended(s)
    assert srv.node.dns.connections.read_timeouts == 1
    with connect(srv) as s:
        assert answered(exchange(s))


def test_a_connection_that_sends_nothing_is_closed_at_the_same_deadline(in_process):
    srv = dns_server(in_process, dns_tcp_timeout_s=3)
    with connect(srv) as s:
        wait_for(lambda: srv.node.dns.connections.held == 1, what="the connection held")
        srv.advance(2.9)
        assert still_open(s)
        srv.advance(0.1)
        assert ended(s)


def test_a_client_that_never_reads_its_answers_is_closed_at_the_write_timeout(in_process):
    # --dns-tcp-write-timeout 10; the clock moves 10 s at a time below, while the server may still be reading the
    # questions sent: no read deadline may pass meanwhile
    srv = dns_server(in_process, dns_tcp_timeout_s=1e6)
    c = srv.client()
    batch = [{"id": f"big-{n}", "service": "big", "address": f"10.2.{n // 250}.{n % 250 + 1}", "port": 80, "ttl": 0,
              "tags": ["ex:Pintura"]} for n in range(1000)]
    assert c.post("/v1/instances/batch", json={"instances": batch}).status_code == 200
    assert c.put("/v1/queries/big", json={"s": "ex:Pintura"}).status_code == 201
    query = dns.message.make_query("_big._tcp.semreg.", "SRV").to_wire(prepend_length=True)  # ~64 KB answers
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", srv.node.dns.port))
    try:
        s.setblocking(False)
        sent = 0
        try:
            while sent < 2000:  # far more answers than the sockets' buffers hold; it never reads one
                s.send(query)
                sent += 1
        except BlockingIOError:
            pass  # the server stopped reading: it is stuck sending an answer
        conns = srv.node.dns.connections
        wait_for(lambda: (srv.advance(10), conns.write_timeouts)[1] == 1, what="the write timeout")
        s.setblocking(True)
        s.settimeout(10)
        assert ended(s) and conns.held == 0
    finally:
        s.close()
    with connect(srv) as again:  # the address is not held against it
        assert answered(exchange(again))


# -- the bookkeeping, as a table -------------------------------------------------------------------------------
def table(most: int, per_address: int, opened: list[str]) -> tuple[Connections, list, list[str]]:
    clock = FakeClock()
    conns = Connections(clock, Limits(most, per_address, 10.0, 10.0))
    closed: list[str] = []
    held = []
    for n, address in enumerate(opened):
        held.append(conns.open(address, lambda n=n: closed.append(f"#{n}")))
        clock.advance(0.1)
    return conns, held, closed


@pytest.mark.parametrize("opened, newcomer, refused, shed", [
    (["a", "a", "b"], "a", True, []),  # a at its cap of 2: the newcomer is refused, nothing else touched
    (["a", "a", "b"], "c", False, []),  # room for it
    (["a", "a", "b", "c"], "d", False, ["#0"]),  # full: a holds the most, #0 waited longest
    (["a", "b", "c", "a"], "d", False, ["#0"]),
    (["a", "b", "c", "d"], "e", False, ["#0"]),  # one each: the longest waiting of all
    (["b", "a", "a", "c"], "b", False, ["#1"]),  # a newcomer from b (one) sheds one of a's (two)
])
def test_who_is_refused_and_who_is_shed(opened, newcomer, refused, shed):
    conns, held, closed = table(4, 2, opened)
    assert all(c is not None for c in held)
    new = conns.open(newcomer, lambda: closed.append("new"))
    assert (new is None) == refused and closed == shed
    assert conns.held == min(4, len(opened) + (0 if refused else 1))


def test_a_connection_being_answered_is_shed_after_those_waiting():
    conns, held, closed = table(3, 3, ["a", "a", "a"])
    conns.answering(held[0])
    conns.answering(held[1])
    conns.open("b", lambda: None)
    assert closed == ["#2"]  # the only one of a's waiting for a message, though the newest
