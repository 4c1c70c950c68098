"""Forwarded headers on handed-over connections, read exactly as uvicorn's proxy-headers middleware
reads them on the route (compared against it)."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from uvicorn.middleware.proxy_headers import _TrustedHosts

from semreg.http1.forwarded import forwarded

ALLOW = ["127.0.0.1", "*", "10.0.0.0/8, 127.0.0.1", "::1, 192.168.1.1", ""]
HOSTS = st.sampled_from(["127.0.0.1", "10.1.2.3", "203.0.113.9", "::1", "192.168.1.1", "unknown", "", " 10.0.0.1"])


def uvicorn_view(peer: str, headers: dict[str, str], allow_ips: str) -> tuple[str, str]:
    trusted = _TrustedHosts(allow_ips)
    if peer not in trusted:
        return "http", peer
    scheme = headers.get("x-forwarded-proto", "http").strip()
    client = peer
    if "x-forwarded-for" in headers:
        client = trusted.get_trusted_client_address(headers["x-forwarded-for"])[0] or peer
    return (scheme if scheme in ("http", "https") else "http"), client


@given(st.sampled_from(ALLOW), HOSTS, st.lists(HOSTS, max_size=4),
       st.sampled_from([None, "https", "http", "gopher", " https "]))
def test_the_client_and_scheme_are_what_the_route_sees(allow_ips, peer, chain, proto):
    headers = {}
    if chain:
        headers["x-forwarded-for"] = ", ".join(chain)
    if proto is not None:
        headers["x-forwarded-proto"] = proto
    assert forwarded(peer, headers, allow_ips) == uvicorn_view(peer, headers, allow_ips)


@pytest.mark.parametrize("peer, headers, allow_ips, expected", [
    ("127.0.0.1", {"x-forwarded-proto": "https", "x-forwarded-for": "203.0.113.9"}, "127.0.0.1", ("https", "203.0.113.9")),
    ("203.0.113.5", {"x-forwarded-proto": "https", "x-forwarded-for": "1.2.3.4"}, "127.0.0.1", ("http", "203.0.113.5")),
    ("10.0.0.2", {"x-forwarded-for": "1.2.3.4, 10.0.0.7"}, "10.0.0.0/8", ("http", "1.2.3.4")),
])
def test_only_a_trusted_peer_names_the_client(peer, headers, allow_ips, expected):
    assert forwarded(peer, headers, allow_ips) == expected
