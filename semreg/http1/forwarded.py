"""The client and scheme of a request as uvicorn's proxy-headers middleware (`--forwarded-allow-ips`) sees
them: `X-Forwarded-Proto` and `X-Forwarded-For` are believed only from a trusted peer, and the client is
the nearest address in `X-Forwarded-For` that is not itself trusted (the first one when all are). The
connections the query processes serve themselves use this, so that relative IRIs and rate-limit keys
are the route's. `allow_ips` is uvicorn's syntax: comma-separated addresses, networks or `*`."""
from __future__ import annotations

import ipaddress
from functools import lru_cache

SCHEMES = frozenset({"http", "https"})
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class Trusted:
    """The peers `allow_ips` trusts."""

    def __init__(self, allow_ips: str) -> None:
        entries = [entry.strip() for entry in allow_ips.split(",") if entry.strip()]
        self.everyone = "*" in entries
        self.networks: list[Network] = []
        self.literals: set[str] = set()
        for entry in entries:
            try:
                self.networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                self.literals.add(entry)  # not an address: a name uvicorn compares as text

    def __contains__(self, host: str) -> bool:
        if self.everyone or host in self.literals:
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self.networks)

    def client(self, chain: str) -> str:
        hosts = [host.strip() for host in chain.split(",")]
        if self.everyone:
            return hosts[0]
        for host in reversed(hosts):
            if host not in self:
                return host
        return hosts[0]


@lru_cache(maxsize=8)
def trusted(allow_ips: str) -> Trusted:
    return Trusted(allow_ips)


def forwarded(peer: str, headers: dict[str, str], allow_ips: str) -> tuple[str, str]:
    """(scheme, client address) of a request from `peer` with `headers` (lower-case names)."""
    hosts = trusted(allow_ips)
    if peer not in hosts:
        return "http", peer
    scheme = headers.get("x-forwarded-proto", "http").strip()
    chain = headers.get("x-forwarded-for")
    client = (hosts.client(chain) or peer) if chain is not None else peer
    return (scheme if scheme in SCHEMES else "http"), client
