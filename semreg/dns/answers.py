"""A DNS query's bytes in, its answer's bytes out (dnspython reads and writes the wire format).

- A packet dnspython cannot read is answered FORMERR (with its id, when it has one), never with an error.
- One question of class IN, opcode QUERY; anything else: FORMERR, REFUSED or NOTIMP, as RFC 1035 says.
- A name outside the zone: REFUSED (this is not a recursive resolver). A name in the zone that no saved
  query or instance has: NXDOMAIN. A name that exists without records of the type asked: NOERROR, empty.
  Both carry the zone's SOA (`apex`), so that resolvers may cache them (RFC 2308).
- An answer larger than `limit` bytes (512 over UDP, or the size the client advertised with EDNS, at most
  1232; 65,535 over TCP) keeps as many whole records as fit, each SRV record with its target's address, and
  sets TC (`fit`): the client may ask again over TCP, or make do with the instances it got. Over UDP those are
  a subset shuffled within SRV priority (`shuffled`), as Consul shuffles before it trims, so that clients which
  cannot ask again spread over the instances; over TCP, the first in the query's ranking.
- An internal error answers SERVFAIL, the last resort, and is logged by the caller.

Building an answer of 50 records with dnspython's objects takes milliseconds; between two changes of a saved
query's answer the bytes are the same but for the asker's id. So an answer to a saved query is kept by the
query's bytes after its id (name as spelt, type, flags, EDNS size) and the transport, with the version of
the data it was made of (`Found.version`), and sent again with the new id while that version holds.
"""
from __future__ import annotations

import asyncio
import functools
import itertools
import random
import struct
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
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

from semreg.dns import apex
from semreg.dns.fit import Unit, fitted
from semreg.dns.names import ADDRESS, APEX, INSTANCE, SERVICE, SRV, Asked, asked, instance_name
from semreg.registry.targets import Target

SRV_RDATA, A_RDATA, AAAA_RDATA = dns.rdtypes.IN.SRV.SRV, dns.rdtypes.IN.A.A, dns.rdtypes.IN.AAAA.AAAA
UDP_LIMIT = 512  # bytes an answer over UDP may have unless the client says more (RFC 1035)
# the most this server answers over UDP whatever a client advertises (DNS Flag Day 2020): no fragments, and an
# answer at most ~30 times its question, so that the listener is a poor amplifier
EDNS_LIMIT = 1232
TCP_LIMIT = 65535
# no record is shorter than 16 bytes (a pointer to its name, type, class, TTL, length and an IPv4 address), so
# an answer of `limit` bytes holds fewer than `limit // RECORD_BYTES` instances: the records of the others are
# never made (20,000 instances asked over UDP make 77 instances' records, not 20,000)
RECORD_BYTES = 16
INLINE_TARGETS = 32  # instances an answer is written for on the event loop; more, on a worker thread
# the shuffled subsets kept for a question whose UDP answer is cut (each made once per change of the answer, then
# one sent at random): enough for the clients of one saved query to spread over its instances, few enough to
# keep making an answer rare
SUBSETS = 16
TC_BYTE = 0x02  # the TC bit in the third byte of a message


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
class Kept:
    """The answers kept for one question: one, or, for a UDP answer cut to fit, up to `SUBSETS` shuffled ones."""

    version: Hashable
    wires: list[bytes]
    what: Asked
    cut: bool


@dataclass
class Zone:
    domain: dns.name.Name
    ttl_s: int = 5
    # answers to saved queries by the query's bytes after its id (and the transport)
    answers: OrderedDict[tuple[bytes, bool], Kept] = field(default_factory=OrderedDict)
    max_answers: int = 1024
    addresses: tuple[apex.IP, ...] = ()  # the apex's A/AAAA (`apex.listen_addresses`)
    wall: Callable[[], float] = time.time  # the SOA's serial is its seconds
    rng: random.Random = field(default_factory=random.Random)  # which subset a cut UDP answer holds

    def kept(self, key: tuple[bytes, bool], version: Hashable) -> bytes | None:
        """A kept answer to send again (None: make one): the one answer, or, for a cut UDP answer, one of its
        subsets at random once `SUBSETS` are made (until then, None: another is made)."""
        entry = self.answers.get(key)
        if entry is None or entry.version != version or entry.cut and len(entry.wires) < SUBSETS:
            return None
        self.answers.move_to_end(key)
        return entry.wires[0] if len(entry.wires) == 1 else self.rng.choice(entry.wires)

    def cut_before(self, key: tuple[bytes, bool], version: Hashable) -> bool:
        """Whether the answer to this question was a cut UDP answer the last time, and the data is the same."""
        entry = self.answers.get(key)
        return entry is not None and entry.cut and entry.version == version

    def keep(self, key: tuple[bytes, bool], version: Hashable, wire: bytes, what: Asked, cut: bool = False) -> None:
        entry = self.answers.get(key)
        if cut and entry is not None and entry.cut and entry.version == version:
            entry.wires.append(wire)
        else:
            self.answers[key] = Kept(version, [wire], what, cut)
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
    name_end = question_end(wire)
    # kept by the question's bytes after its id, the name in lower case (DNS names are: a client varying the
    # case of its names, as resolvers do against spoofing, must not make each answer anew)
    key = (wire[2:12] + wire[12:name_end].lower() + wire[name_end:], tcp)
    entry = zone.answers.get(key)
    if entry is not None:  # asked before: read again only if its saved query's answer changed since
        found = await resolver.query(entry.what.name, entry.what.environment)
        kept = zone.kept(key, found.version) if found is not None else None
        if kept is not None:  # the asker's id and the asker's spelling of the name
            return wire[:2] + kept[2:12] + wire[12:name_end] + kept[name_end:]
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
        return response.to_wire(max_size=limit)
    if what.kind in (SRV, ADDRESS, SERVICE):
        found = await resolver.query(what.name, what.environment)
        if found is not None:
            targets = found.targets  # read on the loop (the registry's objects); written on a thread if many
            if what.tag is not None:  # Consul's TAG.NAME.service: those carrying the tag (the key holds the tag)
                targets = [t for t in targets if t.has_consul_tag(what.tag)]

            shuffle = not tcp and zone.cut_before(key, found.version)

            def written() -> bytes:
                nonlocal shuffle
                units, left_out = query_units(question.name, question.rdtype, what,
                                              shuffled(targets, zone.rng) if shuffle else targets, zone,
                                              limit // RECORD_BYTES)
                out = finish(response, units, limit, zone, left_out)
                if not shuffle and not tcp and out[2] & TC_BYTE and targets:  # cut: the first subset, shuffled too
                    shuffle = True
                    return written()
                return out
            # a cut 64 KB answer over TCP is written 3-4 times by dnspython: ~250 ms, off the event loop
            out = written() if len(targets) <= INLINE_TARGETS else await asyncio.to_thread(written)
            if len(wire) <= UDP_LIMIT:  # a question is short; the longest packets are kept out of memory
                zone.keep(key, found.version, out, what, cut=shuffle)
            return out
        response.set_rcode(dns.rcode.NXDOMAIN)
        return finish(response, [], limit, zone)
    return finish(response, await other_units(response, question.name, question.rdtype, what, resolver, zone), limit,
                  zone)


def shuffled(targets: Sequence[Target], rng: random.Random) -> list[Target]:
    """`targets` in SRV priority order (lower first, as a client must try them), shuffled within each priority:
    the order a cut UDP answer takes its subset from, so that clients which cannot ask again over TCP spread
    over the instances, as Consul's shuffled answers spread them, and never skip a preferred priority."""
    return sorted(targets, key=lambda t: (t.priority, rng.random()))


def question_end(wire: bytes) -> int:
    """Where the question's name ends in a query's bytes (12, the header's end, when it cannot be read)."""
    at = 12
    while at < len(wire):
        length = wire[at]
        if length == 0:
            return at + 1
        if length >= 0xC0:  # a pointer: none belongs in a question
            return 12
        at += 1 + length
    return 12


def finish(response: dns.message.Message, units: list[Unit], limit: int, zone: Zone, left_out: bool = False) -> bytes:
    """The answer's bytes: `units`, as many as fit in `limit`; an answer without records (NXDOMAIN, or a name
    without records of the type asked) carries the zone's SOA, so that resolvers may cache it (RFC 2308)."""
    if not units:
        response.authority = [apex.soa(zone.domain, zone.ttl_s, zone.wall())]
    return fitted(response, units, limit, left_out)


async def other_units(response: dns.message.Message, qname: dns.name.Name, rdtype: int, what: Asked,
                      resolver: Resolver, zone: Zone) -> list[Unit]:
    """The records of the zone's apex, an unknown name (NXDOMAIN), or one instance."""
    if what.kind == APEX:
        return apex.records(rdtype, zone.domain, zone.ttl_s, zone.addresses, zone.wall())
    if what.kind == INSTANCE:
        target = await resolver.instance(what.name)
        if target is not None:
            record = address_of(qname, target, rdtype, zone.ttl_s, cname=True)
            return [Unit((record,))] if record is not None else []
    response.set_rcode(dns.rcode.NXDOMAIN)
    return []


def query_units(qname: dns.name.Name, rdtype: int, what: Asked, found: Sequence[Target], zone: Zone, most: int
                ) -> tuple[list[Unit], bool]:
    """The records of a saved query's name: SRV (each with its target's address), or A/AAAA; those of the first
    `most` instances, and whether there were more."""
    if (what.kind == SRV and rdtype in (dns.rdatatype.SRV, dns.rdatatype.ANY)
            or what.kind == SERVICE and rdtype == dns.rdatatype.SRV):  # Consul's name: SRV or addresses by type
        made = srv_units(qname, found, zone)
    elif what.kind in (ADDRESS, SERVICE):
        made = address_units(qname, found, rdtype, zone.ttl_s)
    else:
        return [], False
    units = list(itertools.islice(made, most + 1))
    return units[:most], len(units) > most


def srv_units(qname: dns.name.Name, found: Sequence[Target], zone: Zone) -> Iterator[Unit]:
    for t in found:
        name = instance_name(t.id, zone.domain)
        if name is None:
            continue
        srv = dns.rrset.RRset(qname, dns.rdataclass.IN, dns.rdatatype.SRV)
        srv.update_ttl(zone.ttl_s)
        srv.add(SRV_RDATA(dns.rdataclass.IN, dns.rdatatype.SRV, t.priority, min(t.weight, 65535), t.port, name))
        glue = address_of(name, t, dns.rdatatype.ANY, zone.ttl_s, cname=True)
        yield Unit((srv,), (glue,) if glue is not None else ())


def address_units(qname: dns.name.Name, found: Sequence[Target], rdtype: int, ttl_s: int) -> Iterator[Unit]:
    """A and AAAA records of the targets' IP addresses (as `rdtype` asks), each address once; host names are
    left out (a CNAME cannot stand beside other records)."""
    seen: set[object] = set()
    for t in found:
        ip = t.ip
        if ip is None or ip in seen:
            continue
        record = address_of(qname, t, rdtype, ttl_s)
        if record is not None:
            seen.add(ip)
            yield Unit((record,))


def address_of(name: dns.name.Name, t: Target, rdtype: int, ttl_s: int, cname: bool = False) -> dns.rrset.RRset | None:
    """`t`'s A or AAAA record (as `rdtype` asks); with `cname`, a host name as a CNAME (one instance's name
    stands for that host); without, or when its address is no name, None."""
    ip = t.ip
    if ip is None:
        if not cname or rdtype not in (dns.rdatatype.CNAME, dns.rdatatype.A, dns.rdatatype.AAAA, dns.rdatatype.ANY):
            return None
        try:
            host = dns.name.from_text(t.address if t.address.endswith(".") else t.address + ".")
        except dns.exception.DNSException:
            return None
        return dns.rrset.from_text(name, ttl_s, "IN", "CNAME", host.to_text())
    kind = dns.rdatatype.A if ip.version == 4 else dns.rdatatype.AAAA
    if rdtype not in (kind, dns.rdatatype.ANY):
        return None
    rrset = dns.rrset.RRset(name, dns.rdataclass.IN, kind)
    rrset.update_ttl(ttl_s)
    rrset.add((A_RDATA if kind == dns.rdatatype.A else AAAA_RDATA)(dns.rdataclass.IN, kind, str(ip)))
    return rrset
