"""A small, bounded DNS load generator over UDP: `outstanding` queries in flight on one socket, each answered
one sent at once in its place, for a fixed `duration_s`. A query not answered within `timeout_s` counts as
lost and is replaced. Every answer is read back (dnspython): a truncated one, or one with another rcode or
another number of records than expected, counts as an error, so the rate measures whole answers. The header
says all three (rcode, TC, ANCOUNT), so that is what is read of each answer; the first is also parsed whole
(dnspython takes milliseconds over 100 records: parsing each would measure this generator, not the server)."""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import dns.message
import dns.rcode

from semreg.bench.stats import latency_stats


@dataclass
class DnsLoadResult:
    answered: int = 0
    errors: int = 0
    lost: int = 0
    elapsed_s: float = 0.0
    latencies_s: list[float] = field(default_factory=list)

    def figures(self) -> dict:
        return {"queries_per_s": round(self.answered / self.elapsed_s, 1) if self.elapsed_s else 0.0,
                "answered": self.answered, "errors": self.errors, "lost": self.lost,
                **{k: v for k, v in latency_stats(self.latencies_s).items() if k != "n"}}


class _Load(asyncio.DatagramProtocol):
    def __init__(self, query: dns.message.Message, expected_records: int, result: DnsLoadResult) -> None:
        self.template = query.to_wire()[2:]  # the query after its id, which each send puts in front
        self.expected = expected_records
        self.result = result
        self.pending: dict[int, float] = {}  # query id → when it was sent
        self.next_id = 1
        self.transport: asyncio.DatagramTransport | None = None
        self.sending = True
        self.checked = False  # whether one answer was parsed whole

    def connection_made(self, transport) -> None:
        self.transport = transport

    def send(self) -> None:
        if not self.sending or self.transport is None:
            return
        ident = self.next_id
        self.next_id = self.next_id % 65535 + 1
        self.pending[ident] = time.perf_counter()
        self.transport.sendto(ident.to_bytes(2, "big") + self.template)

    def datagram_received(self, data: bytes, addr) -> None:
        if len(data) < 2:
            return
        sent = self.pending.pop(int.from_bytes(data[:2], "big"), None)
        if sent is None:
            return  # an answer to a query already counted lost
        self.result.latencies_s.append(time.perf_counter() - sent)
        whole = (len(data) >= 12 and data[3] & 0x0F == dns.rcode.NOERROR and not data[2] & 0x02
                 and int.from_bytes(data[6:8], "big") == self.expected)
        if whole and not self.checked:
            self.checked = True
            try:
                reply = dns.message.from_wire(data)
                whole = sum(len(rrset) for rrset in reply.answer) == self.expected
            except Exception:
                whole = False
        if whole:
            self.result.answered += 1
        else:
            self.result.errors += 1
        self.send()

    def expire(self, timeout_s: float) -> None:
        now = time.perf_counter()
        for ident, sent in list(self.pending.items()):
            if now - sent > timeout_s:
                del self.pending[ident]
                self.result.lost += 1
                self.send()


async def udp_load(host: str, port: int, qname: str, rdtype: str, expected_records: int, *, outstanding: int = 32,
                   duration_s: float = 10.0, timeout_s: float = 1.0, payload: int = 4096) -> DnsLoadResult:
    """`outstanding` queries for (qname, rdtype) kept in flight against host:port for `duration_s`."""
    query = dns.message.make_query(qname, rdtype, use_edns=0, payload=payload)
    result = DnsLoadResult()
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.create_datagram_endpoint(lambda: _Load(query, expected_records, result),
                                                              remote_addr=(host, port))
    started = time.perf_counter()
    try:
        for _ in range(outstanding):
            protocol.send()
        while time.perf_counter() - started < duration_s:
            await asyncio.sleep(min(0.1, timeout_s / 2))
            protocol.expire(timeout_s)
    finally:
        protocol.sending = False
        result.elapsed_s = time.perf_counter() - started
        transport.close()
    return result
