"""What a discovery answer says to a platform that only wants addresses: DNS records and Prometheus
targets. A `Target` is one routable instance of an answer (status `up`: `blocked`, `draining` and
`critical` ones are left out, as routing leaves them out), with what the balancer knows of it: its weight
and its `meta.priority`. Pure: a merged answer in, plain data out."""
from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from typing import Any

import orjson

from semreg.registry.balancer import priority_of
from semreg.registry.discovery import DiscoverResult
from semreg.registry.instances import UP

# the meta key under which an instance registered through the Consul API keeps its tags as Consul wrote them (a
# JSON list; `semreg.consul.tags`): the Consul tags DNS's `TAG.NAME.service` filters on
CONSUL_TAGS_KEY = "consul-tags"


@dataclass(frozen=True)
class Target:
    id: str
    service: str
    environment: str
    address: str
    port: int
    scheme: str
    weight: int
    priority: int  # meta.priority as a DNS SRV priority (0-65535; none given: 0)
    degree: str
    distance: int
    meta: tuple[tuple[str, str], ...]

    @property
    def host_port(self) -> str:
        """`address:port`, an IPv6 address in brackets."""
        return f"[{self.address}]:{self.port}" if ":" in self.address else f"{self.address}:{self.port}"

    def has_consul_tag(self, tag: str) -> bool:
        """Whether the instance carries the Consul tag `tag`, compared without case as Consul's DNS compares a
        tag label (and as DNS compares names)."""
        raw = dict(self.meta).get(CONSUL_TAGS_KEY)
        if raw is None:
            return False
        try:
            tags = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return False
        wanted = tag.lower()
        return isinstance(tags, list) and any(isinstance(t, str) and t.lower() == wanted for t in tags)

    @property
    def ip(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
        """The address when it is an IP address (None for a host name)."""
        try:
            return ipaddress.ip_address(self.address)
        except ValueError:
            return None


def srv_priority(meta: dict[str, str]) -> int:
    """`meta.priority` as SRV's priority: lower first, whole numbers 0-65535; missing or unreadable: 0."""
    value = priority_of(meta)
    if math.isinf(value) or math.isnan(value):
        return 0
    return min(65535, max(0, int(value)))


def target_of(inst: Any, degree: str = "", distance: int = 0) -> Target:
    """An instance (local or another node's) as a target."""
    r = inst.reg
    meta = dict(r.meta)
    return Target(inst.id, r.service, r.environment, r.address, int(r.port), r.scheme, int(r.weight),
                  srv_priority(meta), degree, distance, tuple(sorted(meta.items())))


def targets_of(result: DiscoverResult) -> list[Target]:
    """The routable instances of an answer, in its ranking."""
    return [target_of(inst, m[1], m[2]) for inst, m in zip(result.members, result.best) if inst.status == UP]
