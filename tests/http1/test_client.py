"""The hand-framed HTTP/1.1 reader: heads, bodies by their framing, and every way a response can be wrong."""
from __future__ import annotations

import asyncio

import pytest

from semreg.http1.client import (
    MAX_HEADER_LINES,
    ClosedEarly,
    ResponseError,
    TooLarge,
    encode_request,
    iter_body,
    parse_head,
    read_body,
    read_head,
)


def read(raw: bytes, limit: int | None = None, responses: int = 1) -> list[tuple[int, bytes | None, bool]]:
    """Each response of `raw` (then EOF) as (status, body, keep_alive)."""
    async def go():
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        out = []
        for _ in range(responses):
            head = await read_head(reader)
            out.append((head.status, await read_body(reader, head, limit), head.keep_alive))
        return out
    return asyncio.run(go())


def test_encode_request():
    assert encode_request("PUT", "/v1/instances/a/heartbeat", "127.0.0.1:8080", b'{"load": 3}',
                          {"Authorization": "Bearer t"}) == (
        b"PUT /v1/instances/a/heartbeat HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAuthorization: Bearer t\r\n"
        b'Content-Length: 11\r\n\r\n{"load": 3}')
    assert encode_request("GET", "/", "h") == b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"
    assert encode_request("GET", "/ünï/☃", "h").startswith(b"GET /\xfcn\xef/? HTTP/1.1\r\n")


@pytest.mark.parametrize("raw, status", [
    (b"HTTP/1.1 200 OK", 200),
    (b"HTTP/1.0 503", 503),
    (b"HTTP/1.1 404 Not Found Here", 404),
])
def test_status_lines(raw, status):
    assert parse_head(raw).status == status


@pytest.mark.parametrize("raw, message", [
    (b"SSH-2.0-OpenSSH_9.2", "not HTTP"),
    (b"", "not HTTP"),
    (b"HTTP/1.1", "not HTTP"),
    (b"HTTP/1.1 2000 OK", "not three digits"),
    (b"HTTP/1.1 OK 200", "not three digits"),
    (b"HTTP/1.1 -20 OK", "not three digits"),
])
def test_status_lines_that_are_not(raw, message):
    with pytest.raises(ResponseError, match=message):
        parse_head(raw)


def head(status_line: bytes, headers: list[bytes]):
    return parse_head(b"\r\n".join([status_line, *headers]))


@pytest.mark.parametrize("status_line, headers, keep_alive, length, chunked, until_close", [
    (b"HTTP/1.1 200 OK", [b"Content-Length: 2"], True, 2, False, False),
    (b"HTTP/1.1 200 OK", [b"Content-Length: 2", b"Connection: close"], False, 2, False, False),
    (b"HTTP/1.1 200 OK", [b"connection: Close"], False, None, False, True),
    (b"HTTP/1.0 200 OK", [b"Content-Length: 2"], False, 2, False, False),
    (b"HTTP/1.0 200 OK", [b"Content-Length: 2", b"Connection: keep-alive"], True, 2, False, False),
    (b"HTTP/1.1 200 OK", [b"Transfer-Encoding: chunked", b"Content-Length: 9"], True, None, True, False),
    (b"HTTP/1.1 200 OK", [b"transfer-encoding: gzip, Chunked"], True, None, True, False),
    (b"HTTP/1.1 204 No Content", [], True, None, False, False),
    (b"HTTP/1.1 304 Not Modified", [b"Content-Length: 50"], True, 50, False, False),
    (b"HTTP/1.1 200 OK", [b"Content-Length : 2", b"X-Odd:no-space"], True, 2, False, False),
])
def test_heads(status_line, headers, keep_alive, length, chunked, until_close):
    parsed = head(status_line, headers)
    assert (parsed.keep_alive, parsed.length, parsed.chunked, parsed.until_close) == (keep_alive, length, chunked, until_close)


def test_head_headers_are_lower_case_and_the_last_repeat_wins():
    parsed = head(b"HTTP/1.1 200 OK", [b"X-Semreg-Index: 17", b"Content-Type: a", b"content-type: b"])
    assert parsed.headers == {"x-semreg-index": "17", "content-type": "b"}


@pytest.mark.parametrize("headers, message", [
    ([b"no colon here"], "malformed header line"),
    ([b": no name"], "malformed header line"),
    ([b"Content-Length: two"], "is not a number"),
    ([b"Content-Length: -2"], "is not a number"),
    ([b"Content-Length: 2, 2"], "is not a number"),
])
def test_malformed_heads(headers, message):
    with pytest.raises(ResponseError, match=message):
        head(b"HTTP/1.1 200 OK", headers)


@pytest.mark.parametrize("raw, status, body, keep_alive", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, b"ok", True),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 200, b"", True),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n", 200, b"abcde", True),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n",
     200, b"0123456789", True),
    (b"HTTP/1.1 204 No Content\r\n\r\n", 204, b"", True),
    (b"HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n", 304, b"", True),
    (b"HTTP/1.0 200 OK\r\n\r\nbody until close", 200, b"body until close", False),
    (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\n!",
     201, b"!", True),
    (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", 101, b"", True),
])
def test_bodies_by_their_framing(raw, status, body, keep_alive):
    assert read(raw) == [(status, body, keep_alive)]


def test_responses_back_to_back_on_one_connection():
    raw = (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
           b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
           b"HTTP/1.1 204 No Content\r\n\r\n")
    assert read(raw, responses=3) == [(200, b"ok", True), (404, b"abcde", True), (204, b"", True)]


@pytest.mark.parametrize("raw, limit", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n", 10),  # known from the head: nothing read
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n6\r\n", 10),
    (b"HTTP/1.0 200 OK\r\n\r\n" + b"x" * 11, 10),
])
def test_a_body_past_the_limit_is_none(raw, limit):
    assert read(raw, limit) == [(200, None, raw.startswith(b"HTTP/1.1"))]


@pytest.mark.parametrize("raw, error, message", [
    (b"", ClosedEarly, "before a response arrived"),
    (b"HTT", ClosedEarly, "middle of the response head"),
    (b"HTTP/1.1 200", ClosedEarly, "middle of the response head"),
    (b"HTTP/1.1 200 OK\r\nContent-Le", ClosedEarly, "middle of the response head"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", ClosedEarly, "middle of the response head"),
    (b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok", ClosedEarly, "middle of the response head"),  # bare LF ends
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", ClosedEarly, "middle of the response body"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", ClosedEarly, "middle of the response body"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n", ClosedEarly, "middle of the response body"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n", ClosedEarly, "middle of the response body"),
    (b"SSH-2.0-OpenSSH_9.2\r\n", ResponseError, "not HTTP"),
    (b"SS", ResponseError, "not HTTP"),
    (b"HTTP", ClosedEarly, "middle of the response head"),
    (b"HTTP/", ClosedEarly, "middle of the response head"),
    (b"HTTP/1.1 200 OK\r\n" + b"X-A: 1\r\n" * 10_000 + b"\r\n", ResponseError, "longer than the read buffer"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", ResponseError, "malformed chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\nab\r\n0\r\n\r\n", ResponseError, "malformed chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-2\r\n", ResponseError, "malformed chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", ResponseError, "longer than its size"),
    (b"HTTP/1.1 200 OK\r\n" + b"X-A: 1\r\n" * (MAX_HEADER_LINES + 1) + b"\r\n", ResponseError, "header lines"),
    (b"HTTP/1.1 100 Continue\r\n\r\n" * 20, ResponseError, "interim responses"),
])
def test_responses_that_break_off_or_are_malformed(raw, error, message):
    with pytest.raises(error, match=message):
        read(raw)


def stream(raw: bytes, limit: int = 1 << 20, piece: int = 3) -> tuple[list[bytes], Exception | None]:
    """The pieces `iter_body` yields for the first response of `raw` (then EOF), and the error it ended with."""
    async def go():
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        head = await read_head(reader)
        pieces: list[bytes] = []
        try:
            async for data in iter_body(reader, head, limit, piece):
                pieces.append(data)
        except ResponseError as exc:
            return pieces, exc
        return pieces, None
    return asyncio.run(go())


@pytest.mark.parametrize("raw", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nabcdefgh",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n5;ext=1\r\ndefgh\r\n0\r\nX-T: 1\r\n\r\n",
    b"HTTP/1.0 200 OK\r\n\r\nuntil close",
    b"HTTP/1.1 204 No Content\r\n\r\n",
])
def test_a_streamed_body_is_the_body_read_whole_in_pieces_no_longer_than_asked(raw):
    pieces, error = stream(raw)
    assert error is None and all(0 < len(p) <= 3 for p in pieces)
    assert b"".join(pieces) == read(raw)[0][1]


@pytest.mark.parametrize("raw, error", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", ClosedEarly),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", ClosedEarly),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", ResponseError),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", ResponseError),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n", TooLarge),  # past the limit of 10, known from the head
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n6\r\nabcdef\r\n0\r\n\r\n", TooLarge),
    (b"HTTP/1.0 200 OK\r\n\r\n" + b"x" * 11, TooLarge),
])
def test_a_streamed_body_that_breaks_off_or_runs_past_its_limit_ends_in_an_error(raw, error):
    _, ended = stream(raw, limit=10)
    assert isinstance(ended, error)
