"""Failed authentications are throttled per client address and per credential, but a valid token is never
refused because of other requests' failures (API.md, Access): on the fake clock in this process, and on the
connections the query processes serve themselves."""
from __future__ import annotations

import json
import logging
import re
import socket

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.inprocess import BASE_URL

from semreg.access.failures import FAILURE_BURST, FAILURE_RATE_PER_S, Failure, FailureThrottle
from semreg.access.ratelimit import RateLimiter
from semreg.access.tokens import Tokens
from semreg.errors import TooManyRequests, Unauthorized
from semreg.http1.client import parse_head

GOOD = "t-good-0123456789abcdef"
AGENT = "t-agent-0123456789abcdef"
WRONG = "t-wrong-0123456789abcdef"
TOKENS = {"tokens": [{"name": "good", "token": GOOD, "scopes": ["read"]},
                     {"name": "agent", "token": AGENT, "scopes": ["read", "write"]}]}
REFILL_S = 1 / FAILURE_RATE_PER_S
BOOK = "<http://example.org/Livro>"


@pytest.fixture
def secured(in_process, tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    return in_process(tokens_file=path)


def from_address(srv, address: str, authorization: str | None, path: str = "/v1/instances") -> httpx.Response:
    """A request from another client address than the in-process client's (127.0.0.1)."""
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(srv.app, client=(address, 50000))
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
            return await http.get(path, headers={"Authorization": authorization} if authorization else {})
    return srv.run(send())


def test_a_scraper_without_bearer_locks_out_neither_valid_tokens_nor_heartbeats_of_its_address(secured):
    """Prometheus 2.42's http_sd with `credentials` and no `type` sends `Authorization: <token>`: after about ten
    refreshes it is throttled, and the valid tokens of its address (a node-local agent's heartbeats) are not."""
    agent = secured.client(AGENT)
    body = {"service": "books", "address": "10.0.0.1", "port": 9000, "ttl": 30, "tags": [BOOK]}
    assert agent.put("/v1/instances/books-1", json=body).status_code == 201
    scraper = secured.client()
    bare = {"Authorization": GOOD}  # the token without its scheme
    statuses = [scraper.get("/v1/prometheus/targets", params={"s": BOOK}, headers=bare).status_code
                for _ in range(FAILURE_BURST + 2)]
    assert statuses == [401] * FAILURE_BURST + [429] * 2
    assert secured.client(GOOD).get("/v1/prometheus/targets", params={"s": BOOK}).status_code == 200
    beat = agent.put("/v1/instances/books-1/heartbeat", json={})
    assert beat.status_code == 200, beat.text
    assert secured.client(GOOD).get("/v1/token/self").json()["name"] == "good"


def test_wrong_tokens_past_the_allowance_get_429_until_time_passes_and_right_ones_always_pass(secured):
    wrong, good = secured.client(WRONG), secured.client(GOOD)
    assert [wrong.get("/v1/instances").status_code for _ in range(FAILURE_BURST)] == [401] * FAILURE_BURST
    refused = wrong.get("/v1/instances")
    assert refused.status_code == 429 and refused.headers["retry-after"] == str(round(REFILL_S))
    assert "failed authentications" in refused.json()["error"] and WRONG not in refused.text
    assert good.get("/v1/instances").status_code == 200  # the same address, a valid token
    assert from_address(secured, "10.0.0.9", f"Bearer {GOOD}").status_code == 200
    secured.advance(REFILL_S - 0.1)
    assert wrong.get("/v1/instances").status_code == 429
    secured.advance(0.1)  # one failure's worth back
    assert wrong.get("/v1/instances").status_code == 401
    assert wrong.get("/v1/instances").status_code == 429
    assert good.get("/v1/instances").status_code == 200


def test_the_same_wrong_token_from_many_addresses_is_throttled_by_its_fingerprint(secured):
    statuses = [from_address(secured, f"10.1.0.{n}", f"Bearer {WRONG}").status_code for n in range(FAILURE_BURST + 1)]
    assert statuses == [401] * FAILURE_BURST + [429]
    assert from_address(secured, "10.1.0.200", f"Bearer {WRONG}").status_code == 429  # a fresh address, too
    other = from_address(secured, "10.1.0.201", "Bearer t-another-wrong-token-0123")
    assert other.status_code == 401  # another credential from a fresh address is only a failure
    assert from_address(secured, "10.1.0.200", f"Bearer {GOOD}").status_code == 200


def test_token_self_counts_failures_and_answers_a_valid_token_whatever_they_were(secured):
    wrong = secured.client(WRONG)
    assert [wrong.get("/v1/token/self").status_code for _ in range(FAILURE_BURST)] == [401] * FAILURE_BURST
    assert wrong.get("/v1/instances").status_code == 429  # the same count as the gate's
    right = secured.client(GOOD).get("/v1/token/self")
    assert right.status_code == 200 and right.json()["name"] == "good"


@pytest.mark.parametrize("header", [f"Bearer {WRONG}", "Bearer short", "Basic dXNlcjpwYXNz", "Bearer ", GOOD])
def test_every_kind_of_bad_credential_is_a_failure(secured, header):
    c = secured.client()
    statuses = [c.get("/v1/instances", headers={"Authorization": header}).status_code for _ in range(FAILURE_BURST + 1)]
    assert statuses == [401] * FAILURE_BURST + [429]


def test_requests_without_a_token_guess_nothing_and_are_not_counted(secured):
    anonymous = secured.client()
    assert {anonymous.get("/v1/instances").status_code for _ in range(3 * FAILURE_BURST)} == {401}
    assert anonymous.get("/v1/token/self").json() == {"name": "anonymous", "scopes": [], "tokens": True}
    assert secured.client(WRONG).get("/v1/instances").status_code == 401


def test_without_tokens_nothing_is_counted(in_process):
    srv = in_process()
    c = srv.client(WRONG)
    assert {c.get("/v1/instances").status_code for _ in range(3 * FAILURE_BURST)} == {200}


def failure_lines(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == "authentication failed"]


def test_each_failure_is_logged_with_address_route_reason_and_fingerprint_never_the_token(secured, caplog):
    with caplog.at_level(logging.WARNING, logger="semreg.auth"):
        from_address(secured, "10.0.0.7", f"Bearer {WRONG}")
        secured.advance(1)
        from_address(secured, "10.0.0.7", WRONG, path="/v1/tags")
    first, second = failure_lines(caplog)
    assert (first.client, first.route, first.status, first.listener) == ("10.0.0.7", "/v1/instances", 401, "public")
    assert first.reason == "the token is not valid." and "Bearer" in second.reason and second.route == "/v1/tags"
    assert re.fullmatch(r"[0-9a-f]{12}", first.fingerprint) and first.fingerprint != second.fingerprint
    assert WRONG not in caplog.text and all(WRONG not in str(r.__dict__) for r in caplog.records)


def test_a_flood_of_failures_logs_a_line_a_second_per_address_with_the_count_it_folded(secured, caplog):
    with caplog.at_level(logging.WARNING, logger="semreg.auth"):
        for _ in range(200):
            from_address(secured, "10.0.0.8", f"Bearer {WRONG}")
        assert len(failure_lines(caplog)) == 1
        secured.advance(1)
        from_address(secured, "10.0.0.8", f"Bearer {WRONG}")
    first, second = failure_lines(caplog)
    assert (first.folded, second.folded) == (0, 199)
    assert second.status == 429
    started = [r for r in caplog.records if r.getMessage() == "authentication failures throttled"]
    assert sorted(r.kind for r in started) == ["address", "credential"]  # once each, however many followed
    assert {r.client for r in started} == {"10.0.0.8"} and all(r.retry_after_s > 0 for r in started)


def test_log_lines_are_bounded_in_all_under_many_addresses(in_process, tmp_path, caplog):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    srv = in_process(tokens_file=path, auth_failure_log_rate=5)
    with caplog.at_level(logging.WARNING, logger="semreg.auth"):
        for n in range(60):
            from_address(srv, f"10.2.{n // 250}.{n % 250}", f"Bearer t-spray-{n:04d}-0123456789")
    assert len(failure_lines(caplog)) == 5


def metric_lines(srv, name: str) -> dict[str, float]:
    text = srv.client(GOOD).get("/metrics").text
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith(name + "{")}


def test_the_metrics_name_the_addresses_that_failed_last_and_fold_the_rest(in_process, tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    srv = in_process(tokens_file=path, auth_failure_addresses=3)
    for n in range(5):
        for _ in range(n + 1):
            from_address(srv, f"10.3.0.{n}", f"Bearer t-wrong-{n}-0123456789abc")
    found = metric_lines(srv, "semreg_auth_failures_total")
    assert found == {'semreg_auth_failures_total{address="10.3.0.2",listener="public"}': 3.0,
                     'semreg_auth_failures_total{address="10.3.0.3",listener="public"}': 4.0,
                     'semreg_auth_failures_total{address="10.3.0.4",listener="public"}': 5.0,
                     'semreg_auth_failures_total{address="other",listener="public"}': 3.0}
    assert metric_lines(srv, "semreg_auth_throttled_total") == {'semreg_auth_throttled_total{listener="public"}': 0.0}
    for _ in range(FAILURE_BURST + 2):
        from_address(srv, "10.3.0.9", f"Bearer {WRONG}")
    assert metric_lines(srv, "semreg_auth_throttled_total") == {'semreg_auth_throttled_total{listener="public"}': 2.0}


def test_the_throttle_looks_the_credential_up_first(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    tokens, throttle = Tokens(path), FailureThrottle(rate_per_s=1, burst=2)
    for _ in range(2):
        with pytest.raises(Unauthorized):
            throttle.authenticate(tokens, f"Bearer {WRONG}", "a", 0.0)
    with pytest.raises(TooManyRequests):
        throttle.authenticate(tokens, f"Bearer {WRONG}", "a", 0.5)
    assert throttle.authenticate(tokens, f"Bearer {GOOD}", "a", 0.5).name == "good"
    assert throttle.authenticate(tokens, f"Bearer {GOOD}", "b", 0.0).name == "good"


def test_tokens_are_compared_as_digests_of_one_length_whatever_was_presented(tmp_path, monkeypatch):
    import hmac

    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    tokens = Tokens(path)
    compared: list[tuple[int, int]] = []
    real = hmac.compare_digest

    def spy(a, b):
        compared.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    assert tokens.authenticate(f"Bearer {GOOD}").name == "good"
    assert tokens.authenticate(f"Bearer {AGENT}").name == "agent"
    assert compared == [(32, 32), (32, 32)]


@pytest.mark.parametrize("now, spent, wait", [(0.0, 0, 0.0), (0.0, 10, 6.0), (3.0, 10, 3.0), (6.0, 10, 0.0),
                                              (0.0, 9, 0.0)])
def test_the_wait_after_failures(now, spent, wait):
    limiter = RateLimiter(1 / 6, 10)
    for _ in range(spent):
        limiter.take("a", 0.0)
    assert limiter.wait("a", now) == pytest.approx(wait)
    assert limiter.wait("b", now) == 0.0


CLIENTS = [f"10.9.0.{n}" for n in range(3)]
CREDENTIALS = [f"Bearer {GOOD}", f"Bearer {AGENT}", f"Bearer {WRONG}", GOOD, "Bearer t-other-0123456789abcd", "Basic x"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.sampled_from(CLIENTS), st.sampled_from(CREDENTIALS),
                                st.floats(min_value=0, max_value=2)), max_size=80))
def test_valid_credentials_are_always_admitted_and_wrong_ones_get_401_or_429(tmp_path, steps):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    tokens, throttle, now = Tokens(path), FailureThrottle(rate_per_s=0.5, burst=3), 0.0
    failures: dict[str, list[float]] = {}
    for client, credential, elapsed in steps:
        now += elapsed
        if credential in (f"Bearer {GOOD}", f"Bearer {AGENT}"):
            assert throttle.authenticate(tokens, credential, client, now).name in ("good", "agent")
            continue
        with pytest.raises((Unauthorized, TooManyRequests)) as raised:
            throttle.authenticate(tokens, credential, client, now)
        counted = failures.setdefault(client, [])
        if isinstance(raised.value, Unauthorized):
            counted.append(now)
        # an address never gets more 401s than its allowance lets it: burst at once, then one every 2 s
        assert len(counted) <= 3 + (now - counted[0]) * 0.5 + 1e-9 if counted else True


@settings(max_examples=50, deadline=None)
@given(addresses=st.lists(st.integers(0, 10_000), min_size=1, max_size=400),
       credentials=st.lists(st.integers(0, 10_000), min_size=1, max_size=400))
def test_the_bookkeeping_stays_bounded_under_many_addresses_and_credentials(addresses, credentials):
    throttle = FailureThrottle(max_keys=16, shown=4)
    for n, (address, credential) in enumerate(zip(addresses, credentials)):
        fingerprint = throttle.fingerprint(f"Bearer t-{credential:05d}-0123456789")
        throttle.failed(Failure(f"10.{address}", fingerprint, "the token is not valid.", "/v1/instances"), n / 10)
    assert throttle.tracked() <= 16 * 4  # addresses and credentials, with their throttled spells
    assert throttle.report.tracked() <= 16 + 4
    shown = throttle.report.by_address()
    assert len(shown) <= 4 + 1 and sum(n for _, n in shown) == throttle.report.total == len(addresses[:len(credentials)])


def ask_sparql(port: int, sock: socket.socket, token: str) -> int:
    sock.sendall(f"GET /sparql?query=ASK%20%7B%7D HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                 f"Authorization: Bearer {token}\r\n\r\n".encode())
    return answered(sock)


def answered(sock: socket.socket) -> int:
    """The status of the next response on `sock`, its body read."""
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
def test_the_query_processes_throttle_failures_with_the_server_and_admit_valid_tokens(start_server, tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    node = start_server("--tokens", str(path), data_dir=None)
    with socket.create_connection(("127.0.0.1", node.port), timeout=30) as sock:
        statuses = [ask_sparql(node.port, sock, WRONG) for _ in range(FAILURE_BURST + 1)]
        assert statuses == [401] * FAILURE_BURST + [429]
        assert ask_sparql(node.port, sock, GOOD) == 200
        assert ask_sparql(node.port, sock, WRONG) == 429
    with httpx.Client(base_url=node.url, headers={"Authorization": f"Bearer {GOOD}"}) as http:
        assert http.get("/v1/instances", headers={"Authorization": f"Bearer {WRONG}"}).status_code == 429  # one count
        metrics = http.get("/metrics").text
    assert 'semreg_auth_failures_total{address="127.0.0.1",listener="public"} 13.0' in metrics
    assert "authentication failed" in node.log() and WRONG not in node.log()


def test_any_authorization_header_gets_200_or_401_and_never_holds_back_a_good_token(secured):
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


def test_raw_authorization_bytes_over_a_socket_get_401_then_429_and_a_valid_token_200(secured):
    url = secured.listen()
    port = int(url.rsplit(":", 1)[1])
    values = [b"Bearer \xff\xfe" + b"x" * 20, b"Bearer " + b"A" * 8000, b"bearer", b"Bearer\t" + WRONG.encode(),
              b"Digest abc", b"Bearer " + WRONG.encode() + b" trailing", b"Bearer " + GOOD.encode()]
    seen = []
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        for n in range(FAILURE_BURST + 1):
            seen.append(exchange(sock, values[n % (len(values) - 1)]))
        seen.append(exchange(sock, values[-1]))
    assert seen == [401] * FAILURE_BURST + [429, 200]


def exchange(sock: socket.socket, authorization: bytes) -> int:
    sock.sendall(b"GET /v1/instances HTTP/1.1\r\nHost: x\r\nAuthorization: " + authorization + b"\r\n\r\n")
    return answered(sock)
