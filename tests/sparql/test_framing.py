"""The framing of handed-over `/sparql` connections, over raw sockets against a running server: the
smuggling and limit cases each get their status and close the connection; a slow or stalled client
costs no one else anything; timers follow the bytes."""
from __future__ import annotations

import json
import socket
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.paths import ONTOLOGIES
from support.raw import Raw, get, load, q

pytestmark = pytest.mark.process

ASK = "application/sparql-query"


def chunked(body: bytes, *, size: int = 1, trailers: bytes = b"") -> bytes:
    pieces = [b"%x\r\n%s\r\n" % (len(body[k:k + size]), body[k:k + size]) for k in range(0, len(body), size)]
    return b"".join(pieces) + b"0\r\n" + trailers + b"\r\n"


def post_head(*fields: bytes, version: bytes = b"HTTP/1.1") -> bytes:
    return b"POST /sparql " + version + b"\r\nHost: t\r\nContent-Type: " + ASK.encode() + b"\r\n" + b"".join(
        field + b"\r\n" for field in fields) + b"\r\n"


@pytest.fixture(scope="module")
def node():
    from support.server import ServerProcess

    server = ServerProcess(None, "--ontology", str(ONTOLOGIES / "obras.ttl"), "--sparql-workers", "1",
                           "--sparql-max-workers", "1")
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as logs:
        server.start(Path(logs))
        load(server.url)
        yield server
        server.stop()


def handed_over(node) -> Raw:
    conn = Raw(node.port)
    conn.send(get(q("ASK {}")))
    assert conn.response()[0].status == 200
    return conn


BODY = b"ASK { ?s ?p ?o }"
TABLE = [
    ("content-length beside transfer-encoding",
     post_head(b"Content-Length: 5", b"Transfer-Encoding: chunked") + chunked(BODY), 400),
    ("transfer-encoding padded with a vertical tab", post_head(b"Transfer-Encoding: \x0bchunked") + chunked(BODY), 400),
    ("content-length padded with a form feed", post_head(b"Content-Length: \x0c16") + BODY, 400),
    ("a NUL in a field value", post_head(b"X: a\x00b", b"Content-Length: 16") + BODY, 400),
    ("a control character in a field value", post_head(b"X: a\x01b", b"Content-Length: 16") + BODY, 400),
    ("transfer-encoding on HTTP/1.0",
     post_head(b"Transfer-Encoding: chunked", b"Connection: keep-alive", version=b"HTTP/1.0") + chunked(BODY), 400),
    ("a content-length of 4,400 digits", post_head(b"Content-Length: " + b"9" * 4400), 400),
    ("a field ended by a bare LF", b"GET /sparql HTTP/1.1\r\nHost: t\nAccept: */*\r\n\r\n", 400),
    ("two content-lengths", post_head(b"Content-Length: 16", b"Content-Length: 16") + BODY, 400),
    ("a hundred and one chunk trailers",
     post_head(b"Transfer-Encoding: chunked") + chunked(BODY, size=16, trailers=b"T: x\r\n" * 101), 431),
    ("a chunk trailer of 200 KB",
     post_head(b"Transfer-Encoding: chunked") + chunked(BODY, size=16, trailers=b"T: " + b"x" * 200_000 + b"\r\n"), 431),
    ("a chunk extension of 200 KB", post_head(b"Transfer-Encoding: chunked") + b"1;" + b"e" * 200_000, 431),
]


@pytest.mark.parametrize("raw, status", [row[1:] for row in TABLE], ids=[row[0] for row in TABLE])
def test_a_request_smuggled_or_past_a_limit_gets_its_status_and_the_connection_closes(node, raw, status):
    conn = handed_over(node)
    try:
        writer = threading.Thread(target=lambda: _send_quietly(conn.sock, raw))  # the server may stop reading
        writer.start()
        head, body = conn.response()
        writer.join(10)
        assert (head.status, head.keep_alive) == (status, False) and "error" in json.loads(body)
        assert conn.closed()
    finally:
        conn.close()
    again = handed_over(node)  # the process is still there and serving
    again.close()


def test_a_request_pipelined_before_a_refused_one_is_answered_first(node):
    conn = handed_over(node)
    try:
        conn.send(get(q("ASK { ?s ?p ?o }")) + b"GET /sparql HTTP/1.1\r\nBad Header: x\r\n\r\n")
        first, body = conn.response()
        assert first.status == 200 and json.loads(body)["boolean"] is True
        refused, _ = conn.response()
        assert (refused.status, refused.keep_alive) == (400, False) and conn.closed()
    finally:
        conn.close()


def _send_quietly(sock: socket.socket, data: bytes) -> None:
    try:
        sock.sendall(data)
    except OSError:
        pass  # refused before it was all sent


def test_a_body_of_a_million_tiny_chunks_is_read_whole_and_answered(node):
    """A million one-byte chunks (6 MB of framing) are read and answered: read again on every read, as they once
    were, they would not be within the test's time (its timeout is a bound on a hang, not a speed)."""
    conn = handed_over(node)
    try:
        body = b"ASK {" + b" " * 999_000 + b"}"
        conn.send(post_head(b"Transfer-Encoding: chunked") + chunked(body))
        head, answer = conn.response()
        assert head.status == 200 and json.loads(answer)["boolean"] is True
    finally:
        conn.close()


def test_a_client_that_never_reads_its_answers_holds_up_no_one_else(node):
    stalled = handed_over(node)
    try:
        stalled.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        request = get(q("SELECT * { ?s ?p ?o }"), "Accept: application/sparql-results+xml")
        stalled.sock.setblocking(False)
        sent = 0
        try:
            while sent < 50_000_000:  # until the server stops taking requests from it
                sent += stalled.sock.send(request * 64)
        except BlockingIOError:
            pass
        other = Raw(node.port, timeout_s=10)
        try:  # answered at all while the stalled client still reads nothing: it waits behind no one
            other.send(get(q("ASK { ?s ?p ?o }")))
            head, body = other.response()
            assert head.status == 200 and json.loads(body)["boolean"] is True
        finally:
            other.close()
    finally:
        stalled.close()


def test_a_client_that_half_closes_after_pipelining_gets_every_answer(node):
    conn = handed_over(node)
    try:
        request = get(q("SELECT * { ?s ?p ?o }"), "Accept: application/sparql-results+xml")
        conn.sock.sendall(request * 200)  # 30 KB of requests, 30 MB of answers
        conn.sock.shutdown(socket.SHUT_WR)
        statuses = [conn.response()[0].status for _ in range(200)]
        assert statuses == [200] * 200 and conn.closed()
    finally:
        conn.close()


def test_a_slow_upload_is_served_however_long_it_takes_while_bytes_keep_coming(node):
    conn = handed_over(node)
    try:
        conn.send(post_head(b"Content-Length: %d" % len(BODY)))
        for byte in range(len(BODY)):  # 16 bytes, one every 0.5 s: 8 s in all, past the 5 s keep-alive
            threading.Event().wait(0.5)
            conn.send(BODY[byte:byte + 1])
        head, body = conn.response()
        assert head.status == 200 and json.loads(body)["boolean"] is True
    finally:
        conn.close()


def test_a_head_not_whole_within_the_keep_alive_timeout_gets_408(node):
    conn = handed_over(node)
    try:
        conn.send(b"GET /sparql?query=ASK%7B%7D HTTP/1.1\r\nHost: t\r\n")
        head, body = conn.response()  # waits for the server's timer, not a fixed delay
        assert (head.status, head.keep_alive) == (408, False) and "error" in json.loads(body)
        assert conn.closed()
    finally:
        conn.close()


_FRAGMENTS = st.sampled_from([
    b"GET /sparql?query=ASK%7B%7D HTTP/1.1\r\n", b"POST /sparql HTTP/1.1\r\n", b"GET /v1/health HTTP/1.1\r\n",
    b"HTTP/1.0\r\n", b"Host: t\r\n", b"Content-Length: 6\r\n", b"Content-Length: x\r\n",
    b"Transfer-Encoding: chunked\r\n", b"Content-Type: application/sparql-query\r\n", b"Expect: 100-continue\r\n",
    b"Connection: close\r\n", b"X-Forwarded-For: 1.2.3.4\r\n", b"\r\n", b"\n", b"ASK {}", b"6\r\nASK {}\r\n",
    b"0\r\n\r\n", b"T: x\r\n", b"\x00", b"\x0b", b" ", b":", b"99999999999999999999",
])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_FRAGMENTS | st.binary(max_size=8), max_size=14).map(b"".join))
def test_no_bytes_get_a_5xx_or_stop_the_process(node, raw):
    conn = handed_over(node)
    try:
        _send_quietly(conn.sock, raw)
        conn.sock.shutdown(socket.SHUT_WR)
        conn.sock.settimeout(10)
        received = b""
        try:
            while chunk := conn.sock.recv(1 << 16):
                received += chunk
        except (ConnectionResetError, TimeoutError):
            pass
        statuses = [int(line[9:12]) for line in received.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")
                    and line[9:12].isdigit()]
        assert all(status < 500 for status in statuses), received[:500]
    finally:
        conn.close()
    again = handed_over(node)  # every process still serving
    again.close()


def test_behind_a_proxy_the_rate_limit_counts_the_forwarded_client_on_both_paths(start_server):
    for extra in ((), ("--sparql-in-server",)):
        node = start_server("--rate-limit", "0.01", "--rate-burst", "1", *extra, data_dir=None)
        conn = Raw(node.port)
        try:
            statuses = []
            for client in ("198.51.100.1", "198.51.100.2", "198.51.100.1"):
                conn.send(get(q("ASK {}"), f"X-Forwarded-For: {client}"))
                statuses.append(conn.response()[0].status)
            assert statuses == [200, 200, 429], extra
        finally:
            conn.close()
