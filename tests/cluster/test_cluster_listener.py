"""The node-to-node listener: the internal API only there (the public port answers 404 even with the secret),
and wrong secrets throttled per client address and logged, on a ring of apps in this process."""
from __future__ import annotations

import logging
import socket

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.inprocess_ring import InProcessRing, RingNode

from semreg.errors import TooManyRequests
from semreg.http.cluster_listener import FAILURES_ALLOWED, WINDOW_S, SecretFailures


def from_address(in_ring: InProcessRing, node: RingNode, address: str, secret: str) -> httpx.Response:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(node.app.state.cluster_app, client=(address, 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://cluster.test") as client:
            return await client.post("/internal/v1/inventory", json={"ids": None},
                                     headers={"X-Semreg-Cluster": secret})
    return in_ring.run(send())


def test_the_internal_api_is_not_on_the_public_port_even_with_the_secret(in_ring: InProcessRing) -> None:
    n1 = in_ring.add("n1")
    secret = {"X-Semreg-Cluster": in_ring.secret.read_text().strip()}
    assert n1.request("POST", "/internal/v1/inventory", json={"ids": None}, headers=secret).status_code == 404
    assert n1.get("/internal/v1/instances", headers=secret).status_code == 404
    r = n1.internal_request("POST", "/internal/v1/inventory", json={"ids": None}, headers=secret)
    assert r.status_code == 200 and r.json() == {"inventory": {}}
    assert n1.internal_request("GET", "/v1/instances").status_code == 404  # and the public API not there


def test_wrong_secrets_are_throttled_per_address_and_logged(in_ring: InProcessRing,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    n1 = in_ring.add("n1")
    secret = in_ring.secret.read_text().strip()
    caplog.set_level(logging.WARNING, logger="semreg.internal")
    for _ in range(FAILURES_ALLOWED):
        assert from_address(in_ring, n1, "10.0.0.9", "guess" * 4).status_code == 401
    r = from_address(in_ring, n1, "10.0.0.9", "guess" * 4)
    assert r.status_code == 429 and 1 <= int(r.headers["Retry-After"]) <= WINDOW_S + 1, r.text
    assert from_address(in_ring, n1, "10.0.0.9", secret).status_code == 429  # the address, not the guess
    assert from_address(in_ring, n1, "10.0.0.8", secret).status_code == 200  # another address is not held up
    in_ring.advance(WINDOW_S + 1, step=5)
    assert from_address(in_ring, n1, "10.0.0.9", secret).status_code == 200
    failures = [rec for rec in caplog.records if "without the cluster secret" in rec.getMessage()]
    assert len(failures) == FAILURES_ALLOWED and {rec.client for rec in failures} == {"10.0.0.9"}


@pytest.mark.parametrize("failures_at, now, refused", [
    ([], 0.0, False),
    ([0.0] * (FAILURES_ALLOWED - 1), 1.0, False),
    ([0.0] * FAILURES_ALLOWED, 1.0, True),
    ([0.0] * FAILURES_ALLOWED, WINDOW_S - 0.5, True),
    ([0.0] * FAILURES_ALLOWED, WINDOW_S + 0.1, False),  # the oldest is out of the window
])
def test_the_throttle_counts_failures_within_the_window(failures_at: list[float], now: float, refused: bool) -> None:
    clock = [0.0]
    throttle = SecretFailures(lambda: clock[0])
    for t in failures_at:
        clock[0] = t
        throttle.failed("a", "/internal/v1/x")
    clock[0] = now
    if refused:
        with pytest.raises(TooManyRequests):
            throttle.check("a")
    else:
        throttle.check("a")
    throttle.check("b")


def exchange(port: int, raw: bytes) -> tuple[int, bool]:
    """Send `raw` to the cluster listener; (the response's status, whether the connection was closed after it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(raw)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0
        head, _, body = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        sock.settimeout(2)
        try:
            closed = sock.recv(1) == b""
        except (TimeoutError, ConnectionResetError):
            closed = False
        return status, closed


@pytest.mark.parametrize("raw, status, closed", [
    (b"POST /internal/v1/inventory HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n{\"ids\":null}", 401, False),
    (b"POST /internal/v1/inventory HTTP/1.1\r\nHost: x\r\nX-Semreg-Cluster: \x00\r\nContent-Length: 0\r\n\r\n", 400,
     True),
    (b"POST /internal/v1/inventory HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"0\r\n\r\n", 400, True),
    (b"GET /v1/instances HTTP/1.1\r\nHost: x\r\n\r\n", 404, False),
    (b"GARBAGE\r\n\r\n", 400, True),
])
def test_the_cluster_listener_over_raw_sockets(in_ring: InProcessRing, raw: bytes, status: int, closed: bool) -> None:
    n1 = in_ring.add("n1")
    assert exchange(n1.port, raw) == (status, closed)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shown=st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7e), max_size=80),
       body=st.binary(max_size=200))
def test_any_secret_and_body_from_a_stranger_get_a_4xx_never_a_5xx(in_ring: InProcessRing, shown: str,
                                                                      body: bytes) -> None:
    if not in_ring.nodes:
        in_ring.add("n1")
    n1 = in_ring.nodes["n1"]
    r = n1.internal_request("POST", "/internal/v1/records", content=body, headers={"X-Semreg-Cluster": shown})
    assert r.status_code in (401, 429), r.text
