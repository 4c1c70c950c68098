"""A DNS query's bytes in, its answer's bytes out (dnspython reads and writes the wire format).

- A packet dnspython cannot read is answered FORMERR (with its id, when it has one), never with an error.
- One question of class IN, opcode QUERY; anything else: FORMERR, REFUSED or NOTIMP, as RFC 1035 says.
- A name outside the zone: REFUSED (this is not a recursive resolver). A name in the zone that no saved
  query or instance has: NXDOMAIN. A name that exists without records of the type asked: NOERROR, empty.
- An answer larger than `limit` bytes (512 over UDP, or the size the client advertised with EDNS) is cut
  at a whole record set with the TC bit, so that the client asks again over TCP, which answers whole.
- An internal error answers SERVFAIL, the last resort, and is logged by the caller.

Building an answer of 50 records with dnspython's objects takes milliseconds; between two changes of a saved
query's answer the bytes are the same but for the asker's id. So an answer to a saved query is kept by the
query's bytes after its id (name as spelt, type, flags, EDNS size) and the transport, with the version of
the data it was made of (`Found.version`), and sent again with the new id while that version holds.
"""
from __future__ import annotations

import functools
import struct
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.IN.A
import dns.rdtypes.IN.AAAA
import dns.rdtypes.IN.SRV
import dns.rrset

from semreg.dns.names import ADDRESS, INSTANCE, SRV, UNKNOWN, Asked, asked, instance_name
from semreg.registry.targets import Target

SRV_RDATA, A_RDATA, AAAA_RDATA = dns.rdtypes.IN.SRV.SRV, dns.rdtypes.IN.A.A, dns.rdtypes.IN.AAAA.AAAA
UDP_LIMIT = 512  # bytes an answer over UDP may have unless the client says more (RFC 1035)
EDNS_LIMIT = 4096  # the most this server answers over UDP whatever a client advertises (DNS Flag Day 2020: 1232)
TCP_LIMIT = 65535


class Found:
    """A saved query's routable instances, with a version that changes whenever they may have (an answer made
    of them is kept and sent again, with the asker's id, while the version stays). The instances are read
    only when an answer is made."""

    def __init__(self, version: Hashable, make: Callable[[], Sequence[Target]]) -> None:
        self.version = version
        self._make = make

    @functools.cached_property
    def targets(self) -> Sequence[Target]:
        return self._make()


class Resolver(Protocol):
    """What the answers are made of: a saved query's routable instances (None: no such query), one instance
    (None: not registered)."""

    async def query(self, name: str, environment: str | None) -> Found | None: ...

    async def instance(self, instance_id: str) -> Target | None: ...


@dataclass
class Zone:
    domain: dns.name.Name
    ttl_s: int = 5
    # answers to saved queries by the query's bytes after its id (and the transport): (version, answer bytes)
    answers: OrderedDict[tuple[bytes, bool], tuple[Hashable, bytes, Asked]] = field(default_factory=OrderedDict)
    max_answers: int = 1024

    def kept(self, key: tuple[bytes, bool], version: Hashable) -> bytes | None:
        entry = self.answers.get(key)
        if entry is None or entry[0] != version:
            return None
        self.answers.move_to_end(key)
        return entry[1]

    def keep(self, key: tuple[bytes, bool], version: Hashable, wire: bytes, what: Asked) -> None:
        self.answers[key] = (version, wire, what)
        self.answers.move_to_end(key)
        while len(self.answers) > self.max_answers:
            self.answers.popitem(last=False)


def udp_limit(request: dns.message.Message) -> int:
    """The largest answer a UDP client takes: 512 bytes, or its EDNS payload size (at most `EDNS_LIMIT`)."""
    if request.edns < 0:
        return UDP_LIMIT
    return max(UDP_LIMIT, min(EDNS_LIMIT, request.payload))


def bare(wire: bytes, rcode: int) -> bytes | None:
    """An answer with only a header (and `rcode`), for a packet that cannot be read: its id, when it has one."""
    if len(wire) < 2:
        return None  # not even an id to answer to
    (ident,) = struct.unpack("!H", wire[:2])
    if len(wire) >= 3 and wire[2] & 0x80:
        return None  # a response, not a query: never answer one (no loops between servers)
    return struct.pack("!HHHHHH", ident, 0x8000 | (rcode & 0xF), 0, 0, 0, 0)


def parse(wire: bytes) -> dns.message.Message | bytes | None:
    """The query, or the bytes of the answer it gets without being looked at (FORMERR, NOTIMP), or None."""
    try:
        request = dns.message.from_wire(wire)
    except dns.exception.DNSException:
        return bare(wire, dns.rcode.FORMERR)
    except Exception:  # dnspython raises others for some garbage (e.g. UnicodeError): garbage all the same
        return bare(wire, dns.rcode.FORMERR)
    if request.flags & dns.flags.QR:
        return None
    if request.opcode() != dns.opcode.QUERY:
        return reply(request, dns.rcode.NOTIMP)
    if len(request.question) != 1:
        return reply(request, dns.rcode.FORMERR)
    return request


def reply(request: dns.message.Message, rcode: dns.rcode.Rcode) -> bytes:
    response = dns.message.make_response(request, our_payload=EDNS_LIMIT)
    response.set_rcode(rcode)
    return response.to_wire()


async def answer(wire: bytes, resolver: Resolver, zone: Zone, tcp: bool = False) -> bytes | None:
    """The answer to one query (None: none is sent)."""
    key = (wire[2:], tcp)
    entry = zone.answers.get(key)
    if entry is not None:  # asked before: read again only if its saved query's answer changed since
        found = await resolver.query(entry[2].name, entry[2].environment)
        kept = zone.kept(key, found.version) if found is not None else None
        if kept is not None:
            return wire[:2] + kept[2:]
    parsed = parse(wire)
    if not isinstance(parsed, dns.message.Message):
        return parsed
    request = parsed
    response = dns.message.make_response(request, our_payload=EDNS_LIMIT)
    response.flags |= dns.flags.AA
    question = request.question[0]
    what = asked(question.name, zone.domain) if question.rdclass in (dns.rdataclass.IN, dns.rdataclass.ANY) else None
    limit = TCP_LIMIT if tcp else udp_limit(request)
    if what is None:
        response.set_rcode(dns.rcode.REFUSED)
        response.flags &= ~dns.flags.AA
    elif what.kind in (SRV, ADDRESS):
        found = await resolver.query(what.name, what.environment)
        if found is None:
            response.set_rcode(dns.rcode.NXDOMAIN)
        else:
            fill_query(response, question.name, question.rdtype, what, found.targets, zone)
            out = response.to_wire(max_size=limit, prefer_truncation=True)
            if len(wire) <= UDP_LIMIT:  # a question is short; the longest packets are kept out of memory
                zone.keep(key, found.version, out, what)
            return out
    else:
        await fill(response, question.name, question.rdtype, what, resolver, zone)
    return response.to_wire(max_size=limit, prefer_truncation=True)


async def fill(response: dns.message.Message, qname: dns.name.Name, rdtype: int, what: Asked, resolver: Resolver,
               zone: Zone) -> None:
    """The records of the zone's apex, an unknown name (NXDOMAIN), or one instance."""
    if what.kind == UNKNOWN:
        response.set_rcode(dns.rcode.NXDOMAIN)
    elif what.kind == INSTANCE:
        target = await resolver.instance(what.name)
        if target is None:
            response.set_rcode(dns.rcode.NXDOMAIN)
            return
        add_address(response.answer, qname, [target], rdtype, zone.ttl_s, cname=True)


def fill_query(response: dns.message.Message, qname: dns.name.Name, rdtype: int, what: Asked,
               found: Sequence[Target], zone: Zone) -> None:
    """The records of a saved query's name: SRV, or A/AAAA."""
    if what.kind == SRV and rdtype in (dns.rdatatype.SRV, dns.rdatatype.ANY):
        add_srv(response, qname, found, zone)
    elif what.kind == ADDRESS:
        add_address(response.answer, qname, found, rdtype, zone.ttl_s)


def add_srv(response: dns.message.Message, qname: dns.name.Name, found: Sequence[Target], zone: Zone) -> None:
    srv = dns.rrset.RRset(qname, dns.rdataclass.IN, dns.rdatatype.SRV)
    srv.update_ttl(zone.ttl_s)
    for t in found:
        name = instance_name(t.id, zone.domain)
        if name is None:
            continue
        srv.add(SRV_RDATA(dns.rdataclass.IN, dns.rdatatype.SRV, t.priority, min(t.weight, 65535), t.port, name))
        add_address(response.additional, name, [t], dns.rdatatype.ANY, zone.ttl_s, cname=True)
    if srv:
        response.answer.insert(0, srv)


def add_address(section: list, name: dns.name.Name, found: Sequence[Target], rdtype: int, ttl_s: int,
                cname: bool = False) -> None:
    """A and AAAA records of the targets' IP addresses (as `rdtype` asks); with `cname`, a host name as a
    CNAME (one instance's name stands for that host); without, host names are left out."""
    records: dict[int, dns.rrset.RRset] = {}
    for t in found:
        ip = t.ip
        if ip is None:
            if cname and rdtype in (dns.rdatatype.CNAME, dns.rdatatype.A, dns.rdatatype.AAAA, dns.rdatatype.ANY):
                try:
                    host = dns.name.from_text(t.address if t.address.endswith(".") else t.address + ".")
                except dns.exception.DNSException:
                    continue
                records.setdefault(dns.rdatatype.CNAME, dns.rrset.from_text(name, ttl_s, "IN", "CNAME", host.to_text()))
            continue
        kind = dns.rdatatype.A if ip.version == 4 else dns.rdatatype.AAAA
        if rdtype not in (kind, dns.rdatatype.ANY):
            continue
        rrset = records.get(kind)
        if rrset is None:
            rrset = records[kind] = dns.rrset.RRset(name, dns.rdataclass.IN, kind)
            rrset.update_ttl(ttl_s)
        rrset.add((A_RDATA if kind == dns.rdatatype.A else AAAA_RDATA)(dns.rdataclass.IN, kind, str(ip)))
    section.extend(records.values())
