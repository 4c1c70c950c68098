"""What a DNS question's name asks, relative to the zone semreg answers (`--dns-domain`, default `semreg.`):

    _NAME._tcp.DOMAIN          SRV of the saved query NAME's routable instances
    _NAME._tcp.ENV.DOMAIN      the same in the environment ENV (instead of the query's own)
    NAME.DOMAIN, NAME.ENV.DOMAIN   A/AAAA of those instances' addresses
    ID.instance.DOMAIN         one instance (an id with dots spans several labels)
    DOMAIN                     the zone itself: it exists, and holds no records of its own

Saved-query names are DNS labels and compared without case, as DNS compares names; an instance id and an
environment are taken as the question spells them (semreg's are case-sensitive). Pure.
"""
from __future__ import annotations

from dataclasses import dataclass

import dns.exception
import dns.name

APEX, SRV, ADDRESS, INSTANCE, UNKNOWN = "apex", "srv", "address", "instance", "unknown"
INSTANCE_LABEL = "instance"


@dataclass(frozen=True)
class Asked:
    kind: str  # APEX, SRV, ADDRESS, INSTANCE or UNKNOWN (a name in the zone that cannot exist: NXDOMAIN)
    name: str = ""  # the saved query's, or the instance's id
    environment: str | None = None  # None: the saved query's own


def zone(domain: str) -> dns.name.Name:
    """`--dns-domain` as an absolute name (`semreg` and `semreg.` are the same zone); ValueError says why not."""
    text = domain.strip()
    if not text or text == ".":
        raise ValueError("--dns-domain needs a domain, such as semreg. or svc.example.com.")
    try:
        return dns.name.from_text(text if text.endswith(".") else text + ".")
    except dns.exception.DNSException as exc:
        raise ValueError(f"--dns-domain {domain}: {exc}") from None


def _text(label: bytes) -> str:
    return label.decode("utf-8", "replace")


def asked(qname: dns.name.Name, domain: dns.name.Name) -> Asked | None:
    """What `qname` asks of the zone `domain`; None when it is outside the zone (REFUSED: not ours to answer)."""
    if not qname.is_subdomain(domain):
        return None
    labels = qname.relativize(domain).labels if qname != domain else ()
    if not labels:
        return Asked(APEX)
    if len(labels) >= 2 and labels[-1].lower() == INSTANCE_LABEL.encode():
        return Asked(INSTANCE, ".".join(_text(label) for label in labels[:-1]))
    first = _text(labels[0]).lower()
    if first.startswith("_") and len(labels) in (2, 3) and labels[1].lower() == b"_tcp":
        return Asked(SRV, first[1:], _text(labels[2]) if len(labels) == 3 else None)
    if not first.startswith("_") and len(labels) in (1, 2):
        return Asked(ADDRESS, first, _text(labels[1]) if len(labels) == 2 else None)
    return Asked(UNKNOWN)


def instance_name(instance_id: str, domain: dns.name.Name) -> dns.name.Name | None:
    """`ID.instance.DOMAIN`, or None for an id that makes no DNS name (a label past 63 bytes, a name past 255)."""
    try:
        return dns.name.Name([*instance_id.encode().split(b"."), INSTANCE_LABEL.encode(), *domain.labels])
    except dns.exception.DNSException:
        return None
