"""What a DNS question's name asks, relative to the zone semreg answers (`--dns-domain`, default `semreg.`):

    _NAME._tcp.DOMAIN          SRV of the saved query NAME's routable instances
    _NAME._tcp.ENV.DOMAIN      the same in the environment ENV (instead of the query's own)
    NAME.DOMAIN, NAME.ENV.DOMAIN   A/AAAA of those instances' addresses
    ID.instance.DOMAIN         one instance (an id with dots spans several labels)
    DOMAIN                     the zone itself: its SOA, NS and addresses (`apex`)

and Consul's names, so that a resolver or a client configured for Consul's DNS asks semreg unchanged (with
`--dns-domain consul.` even its domain):

    NAME.service.DOMAIN            SRV, or A/AAAA, as the question's type asks, of the saved query NAME
    TAG.NAME.service.DOMAIN        the same, only the instances carrying the Consul tag TAG
    _NAME._TAG.service.DOMAIN      RFC 2782's spelling of it (`_tcp` as TAG: no tag, as Consul reads it)
    ....service.ENV.DOMAIN         any of these in the environment ENV (where Consul puts a datacenter)

`service`, like `instance`, is a label of the zone's own: `NAME.service.DOMAIN` and `_NAME._tcp.service.DOMAIN`
are Consul's names, no longer the query NAME in an environment called `service`; that environment is asked as
Consul would ask it, `NAME.service.service.DOMAIN`.

Saved-query names are DNS labels and compared without case, as DNS compares names; an instance id and an
environment are taken as the question spells them (semreg's are case-sensitive). Pure.
"""
from __future__ import annotations

from dataclasses import dataclass

import dns.exception
import dns.name

APEX, SRV, ADDRESS, INSTANCE, SERVICE, UNKNOWN = "apex", "srv", "address", "instance", "service", "unknown"
INSTANCE_LABEL = "instance"
SERVICE_LABEL = b"service"
ANY_TAG = b"tcp"  # `_NAME._tcp.service`: RFC 2782's protocol where Consul reads a tag, so no tag at all


@dataclass(frozen=True)
class Asked:
    kind: str  # APEX, SRV, ADDRESS, INSTANCE, SERVICE or UNKNOWN (a name in the zone that cannot exist: NXDOMAIN)
    name: str = ""  # the saved query's, or the instance's id
    environment: str | None = None  # None: the saved query's own
    tag: str | None = None  # SERVICE: only the instances with this Consul tag (lower case: compared without case)


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
    service = consul(labels)
    if service is not None:
        return service
    if first.startswith("_") and len(labels) in (2, 3) and labels[1].lower() == b"_tcp":
        return Asked(SRV, first[1:], _text(labels[2]) if len(labels) == 3 else None)
    if not first.startswith("_") and len(labels) in (1, 2):
        return Asked(ADDRESS, first, _text(labels[1]) if len(labels) == 2 else None)
    return Asked(UNKNOWN)


def consul(labels: tuple[bytes, ...]) -> Asked | None:
    """Consul's `[TAG.]NAME.service[.ENV]` or `_NAME._TAG.service[.ENV]` (labels relative to the zone); None when
    `service` is not where those names have it. A name with `service` there but no saved query's shape in front
    of it cannot exist (UNKNOWN)."""
    # the environment's place first, so that `NAME.service.service.DOMAIN` is the environment called `service`
    if len(labels) >= 3 and labels[-2].lower() == SERVICE_LABEL:
        front, environment = labels[:-2], _text(labels[-1])
    elif len(labels) >= 2 and labels[-1].lower() == SERVICE_LABEL:  # `service.DOMAIN` alone: a query so named
        front, environment = labels[:-1], None
    else:
        return None
    words = [_text(label).lower() for label in front]
    if len(words) == 1 and not words[0].startswith("_"):
        return Asked(SERVICE, words[0], environment)
    if len(words) == 2 and words[0].startswith("_") and words[1].startswith("_"):
        tag = words[1][1:]
        return Asked(SERVICE, words[0][1:], environment, None if tag == ANY_TAG.decode() else tag)
    if len(words) == 2 and not words[0].startswith("_") and not words[1].startswith("_"):
        return Asked(SERVICE, words[1], environment, words[0])
    return Asked(UNKNOWN)


def instance_name(instance_id: str, domain: dns.name.Name) -> dns.name.Name | None:
    """`ID.instance.DOMAIN`, or None for an id that makes no DNS name (a label past 63 bytes, a name past 255)."""
    try:
        return dns.name.Name([*instance_id.encode().split(b"."), INSTANCE_LABEL.encode(), *domain.labels])
    except dns.exception.DNSException:
        return None
