"""Failed authentications are throttled per client address (API.md, Access): on the fake clock in this
process, and on the connections the query processes serve themselves."""
from __future__ import annotations

import json
import logging
import socket

import httpx
import pytest
from support.inprocess import BASE_URL

from semreg.access.failures import FAILURE_BURST, FailureThrottle
from semreg.access.ratelimit import RateLimiter
from semreg.access.tokens import Tokens
from semreg.errors import TooManyRequests, Unauthorized
from semreg.http1.client import parse_head

GOOD = "t-good-0123456789abcdef"
WRONG = "t-wrong-0123456789abcdef"
TOKENS = {"tokens": [{"name": "good", "token": GOOD, "scopes": ["read"]}]}


@pytest.fixture
def secured(in_process, tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    return in_process(tokens_file=path)


def from_address(srv, address: str, token: str | None, path: str = "/v1/instances") -> httpx.Response:
    """A request from another client address than the in-process client's (127.0.0.1)."""
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(srv.app, client=(address, 50000))
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
            return await http.get(path, headers={"Authorization": f"Bearer {token}"} if token else {})
    return srv.run(send())


def test_failures_past_the_burst_get_429_even_for_a_right_token_until_time_passes(secured):
    wrong, good = secured.client(WRONG), secured.client(GOOD)
    assert [wrong.get("/v1/instances").status_code for _ in range(FAILURE_BURST)] == [401] * FAILURE_BURST
    refused = wrong.get("/v1/instances")
    assert refused.status_code == 429 and refused.headers["retry-after"] == "6"
    assert "failed authentications" in refused.json()["error"]
    right = good.get("/v1/instances")  # a right guess now cannot be told from a wrong one
    assert right.status_code == 429
    assert from_address(secured, "10.0.0.9", GOOD).status_code == 200  # another address is not held back
    assert from_address(secured, "10.0.0.9", WRONG).status_code == 401
    secured.advance(5.9)
    assert good.get("/v1/instances").status_code == 429
    secured.advance(0.1)  # one failure's worth back
    assert good.get("/v1/instances").status_code == 200  # a success takes nothing
    assert wrong.get("/v1/instances").status_code == 401
    assert wrong.get("/v1/instances").status_code == 429


def test_token_self_counts_and_refuses_failures_too(secured):
    wrong = secured.client(WRONG)
    assert [wrong.get("/v1/token/self").status_code for _ in range(FAILURE_BURST)] == [401] * FAILURE_BURST
    refused = secured.client(GOOD).get("/v1/token/self")
    assert refused.status_code == 429 and refused.headers["retry-after"] == "6"
    assert secured.client(GOOD).get("/v1/instances").status_code == 429  # the same count as the gate's


@pytest.mark.parametrize("header", [f"Bearer {WRONG}", "Bearer short", "Basic dXNlcjpwYXNz", "Bearer "])
def test_every_kind_of_bad_credential_is_a_failure(secured, header):
    c = secured.client()
    statuses = [c.get("/v1/instances", headers={"Authorization": header}).status_code for _ in range(FAILURE_BURST + 1)]
    assert statuses == [401] * FAILURE_BURST + [429]


def test_requests_without_a_token_guess_nothing_and_are_not_counted(secured):
    anonymous = secured.client()
    assert {anonymous.get("/v1/instances").status_code for _ in range(3 * FAILURE_BURST)} == {401}
    assert anonymous.get("/v1/token/self").json() == {"name": "anonymous", "scopes": [], "tokens": True}
    assert secured.client(GOOD).get("/v1/instances").status_code == 200


def test_without_tokens_nothing_is_counted(in_process):
    srv = in_process()
    c = srv.client(WRONG)
    assert {c.get("/v1/instances").status_code for _ in range(3 * FAILURE_BURST)} == {200}


def test_failures_are_logged_with_the_address_and_never_the_token(secured, caplog):
    with caplog.at_level(logging.WARNING, logger="semreg.auth"):
        for _ in range(FAILURE_BURST):
            from_address(secured, "10.0.0.7", WRONG)
    failed = [r for r in caplog.records if r.getMessage() == "authentication failed"]
    assert len(failed) == FAILURE_BURST and all(r.levelno == logging.WARNING for r in failed)
    assert {r.client for r in failed} == {"10.0.0.7"}  # type: ignore[attr-defined]
    assert [r.throttled for r in failed] == [False] * (FAILURE_BURST - 1) + [True]  # type: ignore[attr-defined]
    assert WRONG not in caplog.text and all(WRONG not in str(r.__dict__) for r in caplog.records)


@pytest.mark.parametrize("now, spent, wait", [(0.0, 0, 0.0), (0.0, 10, 6.0), (3.0, 10, 3.0), (6.0, 10, 0.0),
                                              (0.0, 9, 0.0)])
def test_the_wait_after_failures(tmp_path, now, spent, wait):
    limiter = RateLimiter(1 / 6, 10)
    for _ in range(spent):
        limiter.take("a", 0.0)
    assert limiter.wait("a", now) == pytest.approx(wait)
    assert limiter.wait("b", now) == 0.0


def test_the_throttle_checks_before_it_looks_at_the_token(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    tokens, throttle = Tokens(path), FailureThrottle(rate_per_s=1, burst=2)
    for _ in range(2):
        with pytest.raises(Unauthorized):
            throttle.authenticate(tokens, f"Bearer {WRONG}", "a", 0.0)
    with pytest.raises(TooManyRequests):
        throttle.authenticate(tokens, f"Bearer {GOOD}", "a", 0.5)
    assert throttle.authenticate(tokens, f"Bearer {GOOD}", "a", 1.0).name == "good"
    assert throttle.authenticate(tokens, f"Bearer {GOOD}", "b", 0.0).name == "good"


def ask_sparql(port: int, sock: socket.socket, token: str) -> int:
    sock.sendall(f"GET /sparql?query=ASK%20%7B%7D HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                 f"Authorization: Bearer {token}\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the connection closed before an answer"
        data += chunk
    raw, _, rest = data.partition(b"\r\n\r\n")
    head = parse_head(raw)
    length = int(head.headers.get("content-length", "0"))
    while len(rest) < length:
        rest += sock.recv(65536)
    return head.status


@pytest.mark.process
def test_failures_on_handed_over_sparql_connections_are_throttled(start_server, tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    node = start_server("--tokens", str(path), data_dir=None)
    with socket.create_connection(("127.0.0.1", node.port), timeout=30) as sock:
        statuses = [ask_sparql(node.port, sock, WRONG) for _ in range(FAILURE_BURST + 1)]
        assert statuses == [401] * FAILURE_BURST + [429]
        assert ask_sparql(node.port, sock, GOOD) == 429
    assert "authentication failed" in node.log() and WRONG not in node.log()


def test_any_authorization_header_gets_200_or_401_and_never_holds_back_a_good_token_after_the_wait(secured):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    c = secured.client()
    text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=80)

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(value=st.one_of(text, text.map(lambda t: "Bearer " + t)))
    def check(value):
        secured.advance(60)  # a fresh allowance each time
        header = {"Authorization": value.encode("latin-1")}
        statuses = [c.get(path, headers=header).status_code for path in ("/v1/token/self", "/v1/instances")]
        assert set(statuses) <= {200, 401}, statuses  # two failures at most: never 429, never 500
        assert c.get("/v1/instances", headers={"Authorization": f"Bearer {GOOD}"}).status_code == 200

    check()


def test_raw_authorization_bytes_over_a_socket_get_401_then_429(secured):
    url = secured.listen()
    port = int(url.rsplit(":", 1)[1])
    values = [b"Bearer \xff\xfe" + b"x" * 20, b"Bearer " + b"A" * 8000, b"bearer", b"Bearer\t" + WRONG.encode(),
              b"Digest abc", b"Bearer " + WRONG.encode() + b" trailing"]
    seen = []
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        for n in range(FAILURE_BURST + 1):
            sock.sendall(b"GET /v1/instances HTTP/1.1\r\nHost: x\r\nAuthorization: " + values[n % len(values)] + b"\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                assert chunk, "closed before an answer"
                data += chunk
            raw, _, rest = data.partition(b"\r\n\r\n")
            head = parse_head(raw)
            length = int(head.headers.get("content-length", "0"))
            while len(rest) < length:
                rest += sock.recv(65536)
            seen.append(head.status)
    assert seen == [401] * FAILURE_BURST + [429]
