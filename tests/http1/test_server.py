"""The query processes' own HTTP/1.1 request framing, and the query-string reader they share with the route."""
from __future__ import annotations

from urllib.parse import parse_qsl

import pytest
from hypothesis import given
from hypothesis import strategies as st

from semreg.http1.server import CONTINUE, RequestError, chunked_body, encode_response, parse_head
from semreg.sparql.protocol import _parse_ascii_params, parse_params


@pytest.mark.parametrize("raw, method, target, headers, keep_alive", [
    (b"GET /sparql?query=x HTTP/1.1\r\nHost: a\r\nAccept: b\r\n\r\n", "GET", "/sparql?query=x",
     {"host": "a", "accept": "b"}, True),
    (b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n", "GET", "/", {"connection": "close"}, False),
    (b"GET / HTTP/1.0\r\n\r\n", "GET", "/", {}, False),
    (b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", "GET", "/", {"connection": "Keep-Alive"}, True),
    (b"\r\n\r\nGET / HTTP/1.1\r\n\r\n", "GET", "/", {}, True),  # blank lines before a request are skipped
    (b"GET / HTTP/1.1\nHost: a\n\n", "GET", "/", {"host": "a"}, True),  # bare LF ends lines too
    (b"GET / HTTP/1.1\r\nAccept: a\r\nAccept: b\r\n\r\n", "GET", "/", {"accept": "a, b"}, True),
    (b"GET / HTTP/1.1\r\nX:  spaced \t\r\n\r\n", "GET", "/", {"x": "spaced"}, True),
])
def test_a_head_is_read_as_the_rfc_frames_it(raw, method, target, headers, keep_alive):
    head = parse_head(raw + b"the next request")
    assert head is not None
    assert (head.method, head.target, head.headers, head.keep_alive) == (method, target, headers, keep_alive)
    assert raw[head.size:] == b""  # `size` ends exactly at the blank line


def test_a_head_not_all_in_yet_is_none_until_it_is():
    raw = b"POST /sparql HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
    for cut in range(raw.index(b"\r\n\r\n") + 3):
        assert parse_head(raw[:cut]) is None
    head = parse_head(raw)
    assert head is not None and head.length == 3 and not head.chunked and head.path == "/sparql"


@pytest.mark.parametrize("raw, status", [
    (b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\n folded\r\n\r\n", 400),
    (b"GET /a b HTTP/1.1\r\n\r\n", 400),
    (b"GET /\x80 HTTP/1.1\r\n\r\n", 400),
    (b"GET / HTTP/2.0\r\n\r\n", 505),
    (b"GET / SPDY\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nContent-Length: 12x\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nContent-Length: 1, 2\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 411),
    (b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 101 + b"\r\n", 431),
    (b"GET /" + b"a" * 70_000, 431),
])
def test_a_request_that_cannot_be_framed_names_its_status(raw, status):
    with pytest.raises(RequestError) as caught:
        parse_head(raw)
    assert caught.value.status == status and caught.value.message


def test_expect_continue_is_seen_on_http_1_1_only():
    head = parse_head(b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
    assert head is not None and head.expect_continue
    head = parse_head(b"POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
    assert head is not None and not head.expect_continue
    assert CONTINUE == b"HTTP/1.1 100 Continue\r\n\r\n"


def test_a_chunked_body_is_joined_trailers_skipped_and_its_end_found():
    body = b"4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nTrailer: x\r\n\r\nNEXT"
    assert chunked_body(body, 0, 100) == (b"Wikipedia", len(body) - 4)
    for cut in range(len(body) - 4):
        assert chunked_body(body[:cut], 0, 100) is None
    with pytest.raises(RequestError) as caught:
        chunked_body(body, 0, 8)
    assert caught.value.status == 413
    with pytest.raises(RequestError):
        chunked_body(b"zz\r\n", 0, 100)
    with pytest.raises(RequestError):
        chunked_body(b"2\r\nabc\r\n0\r\n\r\n", 0, 100)


def test_a_response_carries_its_length_date_and_connection():
    raw = encode_response(503, [(b"retry-after", b"2")], b"{}", keep_alive=False)
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"HTTP/1.1 503 Service Unavailable" and body == b"{}"
    assert b"retry-after: 2" in lines and b"content-length: 2" in lines and b"connection: close" in lines
    assert any(line.startswith(b"date: ") and line.endswith(b" GMT") for line in lines)
    kept = encode_response(200, [], b"abc", keep_alive=True)
    assert b"connection" not in kept and kept.endswith(b"\r\n\r\nabc")
    assert encode_response(200, [], b"abc", keep_alive=True, head_only=True).endswith(b"\r\n\r\n")


# -- the query string -------------------------------------------------------------------------------------
def _reference(raw: bytes):
    try:
        return parse_qsl(raw.decode("latin-1"), keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        return UnicodeDecodeError


_PIECES = st.sampled_from(["a", "query", "=", "&", "+", "%", "%2", "%20", "%41", "%E2%82%AC", "%FF", "%zz", "%%",
                           "\\", "\\x41", "%5C", "SELECT", "%7B", "~", "-", "."])


@given(st.lists(_PIECES, max_size=12).map("".join))
def test_the_fast_query_string_reader_agrees_with_parse_qsl(text):
    raw = text.encode("ascii")
    reference = _reference(raw)
    try:
        fast = _parse_ascii_params(raw)
    except UnicodeDecodeError:
        fast = UnicodeDecodeError
    assert fast is None or fast == reference


def test_parse_params_gives_what_parse_qsl_gives_and_the_same_errors():
    assert parse_params(b"query=SELECT%20%2A%20%7B%7D&x", "the URL") == [("query", "SELECT * {}"), ("x", "")]
    assert parse_params(b"q=%zz", "the URL") == [("q", "%zz")]
    assert parse_params("q=é".encode(), "the URL") == _reference("q=é".encode())
    from semreg.errors import BadRequest
    with pytest.raises(BadRequest):
        parse_params(b"q=%FF", "the URL")
