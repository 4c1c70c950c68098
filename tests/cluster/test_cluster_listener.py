"""The node-to-node listener: the internal API only there (the public port answers 404 even with the secret),
the right secret always admitted, and wrong ones throttled per client address and per secret, logged and
counted, on a ring of apps in this process."""
from __future__ import annotations

import hmac
import logging
import socket

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.inprocess_ring import InProcessRing, RingNode

from semreg.access.failures import Failure
from semreg.errors import TooManyRequests
from semreg.http.cluster_listener import SECRET_FAILURE_BURST, SECRET_FAILURE_RATE_PER_S, secret_failures

REFILL_S = round(1 / SECRET_FAILURE_RATE_PER_S)


def from_address(in_ring: InProcessRing, node: RingNode, address: str, secret: str) -> httpx.Response:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(node.node.cluster_app, client=(address, 5000))
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


def test_the_right_secret_is_admitted_whatever_wrong_ones_its_address_sent(in_ring: InProcessRing,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    """Five wrong secrets from one address (a stray local process), then the ring's own members on that address
    are still admitted: only the wrong ones get 429, until time passes."""
    n1 = in_ring.add("n1")
    secret = in_ring.secret.read_text().strip()
    caplog.set_level(logging.WARNING, logger="semreg.auth")
    for _ in range(SECRET_FAILURE_BURST):
        assert from_address(in_ring, n1, "10.0.0.9", "guess" * 4).status_code == 401
    r = from_address(in_ring, n1, "10.0.0.9", "guess" * 4)
    assert r.status_code == 429 and int(r.headers["Retry-After"]) == REFILL_S, r.text
    assert from_address(in_ring, n1, "10.0.0.9", secret).status_code == 200  # the right one, the same address
    assert from_address(in_ring, n1, "10.0.0.9", "").status_code == 429  # no secret is a failure here
    assert from_address(in_ring, n1, "10.0.0.8", "other" * 4).status_code == 401  # another address and guess
    in_ring.advance(REFILL_S, step=4)
    assert from_address(in_ring, n1, "10.0.0.9", "again" * 4).status_code == 401  # one failure's worth back
    failures = [rec for rec in caplog.records if rec.getMessage() == "authentication failed"]
    assert {rec.listener for rec in failures} == {"cluster"} and {rec.client for rec in failures} == {"10.0.0.9",
                                                                                                       "10.0.0.8"}
    assert all(secret not in str(rec.__dict__) for rec in caplog.records)
    metrics = n1.get("/metrics").text
    assert 'semreg_auth_failures_total{address="10.0.0.9",listener="cluster"} 8.0' in metrics
    assert 'semreg_auth_throttled_total{listener="cluster"} 2.0' in metrics


def test_the_same_wrong_secret_from_many_addresses_is_throttled_but_the_right_one_is_not(in_ring: InProcessRing
                                                                                      ) -> None:
    n1 = in_ring.add("n1")
    secret = in_ring.secret.read_text().strip()
    stale = "an-old-cluster-secret-0123"
    statuses = [from_address(in_ring, n1, f"10.0.1.{n}", stale).status_code for n in range(SECRET_FAILURE_BURST + 1)]
    assert statuses == [401] * SECRET_FAILURE_BURST + [429]
    assert from_address(in_ring, n1, "10.0.1.100", secret).status_code == 200


def test_the_secret_is_compared_as_digests_of_one_length_whatever_was_shown(in_ring: InProcessRing,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    n1 = in_ring.add("n1")
    secret = in_ring.secret.read_text().strip()
    compared: list[tuple[int, int]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    for shown in (secret, secret[:3], secret + "x" * 100, ""):
        from_address(in_ring, n1, "10.0.2.1", shown)
    assert compared == [(32, 32)] * 4


@pytest.mark.parametrize("failures_at, now, refused", [
    ([], 0.0, False),
    ([0.0] * (SECRET_FAILURE_BURST - 1), 1.0, False),
    ([0.0] * SECRET_FAILURE_BURST, 1.0, True),
    ([0.0] * SECRET_FAILURE_BURST, REFILL_S - 0.5, True),
    ([0.0] * SECRET_FAILURE_BURST, REFILL_S, False),  # one failure's worth back
])
def test_the_throttle_allows_a_burst_then_one_failure_every_refill(failures_at: list[float], now: float,
                                                                   refused: bool) -> None:
    throttle = secret_failures(20, 10)
    for t in failures_at:
        assert throttle.failed(Failure("a", "f", "a wrong cluster secret", "/internal/v1/x"), t) is None
    answer = throttle.failed(Failure("a", "f", "a wrong cluster secret", "/internal/v1/x"), now)
    assert isinstance(answer, TooManyRequests) if refused else answer is None
    assert throttle.failed(Failure("b", "g", "a wrong cluster secret", "/internal/v1/x"), now) is None


def response(sock: socket.socket) -> tuple[int, bytes]:
    """One response read off `sock`: its status (0 when none came) and everything read of it."""
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
    return status, data


def exchange(port: int, raw: bytes) -> tuple[int, bool]:
    """Send `raw` to the cluster listener; (the response's status, whether the connection was closed after it).
    A connection kept open is shown so by a second exchange on it, not by waiting for a close that never comes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(raw)
        status, _ = response(sock)
        try:
            sock.sendall(raw)
            again, data = response(sock)
        except (BrokenPipeError, ConnectionResetError):
            return status, True
        if again == 0 and data == b"":
            return status, True
        assert again == status, data[:200]
        return status, False


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
