"""The zone's own records, at its apex (`DOMAIN`): SOA, NS and the apex's addresses. Pure.

- NS names the apex itself. Every other name of the zone may be taken by a saved query (any DNS label) or an
  instance (any id), so the apex is the one name no registration can claim.
- The apex's A/AAAA are the listen address of `--dns` when it is an IP address other than a wildcard; a
  wildcard (0.0.0.0, ::) or a host name gives none, and a forwarder is told the server's address in its own
  configuration (CoreDNS's `forward`, dnsmasq's `server=/DOMAIN/ADDR#PORT`, unbound's `forward-zone`).
- SOA: MNAME the apex, RNAME `hostmaster.DOMAIN`, serial the time in whole seconds (RFC 1912's advice, and
  Consul's choice). The answers change with every registration, lapse, ontology and saved query, on whichever
  node holds them, so the serial is the moment of the answer: it moves whenever an answer may have, and reads
  the same from every node of a ring, where a count of writes would differ from node to node and could go
  backwards from one asked to the next. MINIMUM, and the SOA's own TTL, is `--dns-ttl`: a resolver caches an
  NXDOMAIN or an empty answer (which carry the SOA, RFC 2308) as long as an answer. No zone transfer is
  served; refresh, retry and expire are the usual values, for the tools that check them.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Sequence

import dns.name
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.NS
import dns.rdtypes.ANY.SOA
import dns.rdtypes.IN.A
import dns.rdtypes.IN.AAAA
import dns.rrset

from semreg.dns.fit import Unit

IP = ipaddress.IPv4Address | ipaddress.IPv6Address
REFRESH_S, RETRY_S, EXPIRE_S = 3600, 600, 86400
HOSTMASTER = b"hostmaster"


def listen_addresses(host: str) -> tuple[IP, ...]:
    """The apex's addresses for a listener on `host`: the address itself, unless it is a wildcard or a name."""
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return ()
    return () if ip.is_unspecified else (ip,)


def serial(now_s: float) -> int:
    """The SOA serial at wall time `now_s`: its whole seconds, in serial number arithmetic's 32 bits (RFC 1982)."""
    return int(now_s) % 2**32


def soa(domain: dns.name.Name, ttl_s: int, now_s: float) -> dns.rrset.RRset:
    out = dns.rrset.RRset(domain, dns.rdataclass.IN, dns.rdatatype.SOA)
    out.update_ttl(ttl_s)
    out.add(dns.rdtypes.ANY.SOA.SOA(dns.rdataclass.IN, dns.rdatatype.SOA, domain, dns.name.Name([HOSTMASTER,
                                    *domain.labels]), serial(now_s), REFRESH_S, RETRY_S, EXPIRE_S, ttl_s))
    return out


def ns(domain: dns.name.Name, ttl_s: int) -> dns.rrset.RRset:
    out = dns.rrset.RRset(domain, dns.rdataclass.IN, dns.rdatatype.NS)
    out.update_ttl(ttl_s)
    out.add(dns.rdtypes.ANY.NS.NS(dns.rdataclass.IN, dns.rdatatype.NS, domain))
    return out


def addresses(domain: dns.name.Name, ttl_s: int, ips: Sequence[IP], rdtype: int) -> list[dns.rrset.RRset]:
    """The apex's A and AAAA records, as `rdtype` asks (ANY: both)."""
    out: list[dns.rrset.RRset] = []
    for kind, version, make in ((dns.rdatatype.A, 4, dns.rdtypes.IN.A.A),
                                (dns.rdatatype.AAAA, 6, dns.rdtypes.IN.AAAA.AAAA)):
        chosen = [ip for ip in ips if ip.version == version]
        if chosen and rdtype in (kind, dns.rdatatype.ANY):
            rrset = dns.rrset.RRset(domain, dns.rdataclass.IN, kind)
            rrset.update_ttl(ttl_s)
            for ip in chosen:
                rrset.add(make(dns.rdataclass.IN, kind, str(ip)))
            out.append(rrset)
    return out


def records(rdtype: int, domain: dns.name.Name, ttl_s: int, ips: Sequence[IP], now_s: float) -> list[Unit]:
    """What a question of type `rdtype` at the apex gets: SOA, NS (with its name's addresses as additional
    records, unless they are in the answer already) and the addresses, as `rdtype` asks."""
    out: list[Unit] = []
    if rdtype in (dns.rdatatype.SOA, dns.rdatatype.ANY):
        out.append(Unit((soa(domain, ttl_s, now_s),)))
    if rdtype == dns.rdatatype.NS:
        out.append(Unit((ns(domain, ttl_s),), tuple(addresses(domain, ttl_s, ips, dns.rdatatype.ANY))))
    elif rdtype == dns.rdatatype.ANY:
        out.append(Unit((ns(domain, ttl_s),)))
    out.extend(Unit((rrset,)) for rrset in addresses(domain, ttl_s, ips, rdtype))
    return out
