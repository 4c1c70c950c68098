"""The query processes' own HTTP/1.1 request framing (llhttp, with limits), and the query-string reader
they share with the route."""
from __future__ import annotations

from urllib.parse import parse_qsl

import pytest
from hypothesis import given
from hypothesis import strategies as st

from semreg.http1.server import CONTINUE, RequestError, RequestReader, encode_response
from semreg.sparql.protocol import _parse_ascii_params, parse_params


def read(raw: bytes, limit: int = 1000, wanted=lambda method, path: True):
    reader = RequestReader(limit, wanted)
    return reader, reader.feed(raw)


@pytest.mark.parametrize("raw, method, target, headers, keep_alive", [
    (b"GET /sparql?query=x HTTP/1.1\r\nHost: a\r\nAccept: b\r\n\r\n", "GET", "/sparql?query=x",
     {"host": "a", "accept": "b"}, True),
    (b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n", "GET", "/", {"connection": "close"}, False),
    (b"GET / HTTP/1.0\r\n\r\n", "GET", "/", {}, False),
    (b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", "GET", "/", {"connection": "Keep-Alive"}, True),
    (b"\r\n\r\nGET / HTTP/1.1\r\n\r\n", "GET", "/", {}, True),  # blank lines before a request are skipped
    (b"GET / HTTP/1.1\r\nAccept: a\r\nAccept: b\r\n\r\n", "GET", "/", {"accept": "a, b"}, True),
    (b"GET / HTTP/1.1\r\nX:  spaced \t\r\n\r\n", "GET", "/", {"x": "spaced"}, True),
])
def test_a_head_is_read_as_the_rfc_frames_it(raw, method, target, headers, keep_alive):
    reader, requests = read(raw)
    [(head, body)] = requests
    assert (head.method, head.target, head.headers, head.keep_alive, body) == (method, target, headers, keep_alive, b"")
    assert reader.between


def test_a_request_not_all_in_yet_comes_out_when_its_last_byte_does():
    raw = b"POST /sparql HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
    reader = RequestReader(100, lambda method, path: True)
    for byte in range(len(raw) - 1):
        assert reader.feed(raw[byte:byte + 1]) == []
    [(head, body)] = reader.feed(raw[-1:])
    assert head.path == "/sparql" and body == b"abc"


@pytest.mark.parametrize("raw, status", [
    (b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\n folded\r\n\r\n", 400),
    (b"GET /a b HTTP/1.1\r\n\r\n", 400),
    (b"GET /\x80 HTTP/1.1\r\n\r\n", 400),
    (b"GET / HTTP/2.0\r\n\r\n", 505),
    (b"GET / SPDY\r\n\r\n", 400),
    (b"GET / HTTP/1.1\nHost: a\n\n", 400),  # bare LF
    (b"POST / HTTP/1.1\r\nContent-Length: 12x\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nContent-Length: 1, 2\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nab", 400),
    (b"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: \x0bchunked\r\n\r\n0\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nContent-Length: \x0c5\r\n\r\nabcde", 400),
    (b"GET / HTTP/1.1\r\nX: a\x00b\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nX: a\x01b\r\n\r\n", 400),
    (b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nContent-Length: " + b"9" * 4400 + b"\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 411),
    (b"POST / HTTP/1.1\r\nContent-Length: 1001\r\n\r\n", 413),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3e9\r\n" + b"a" * 1001, 413),
    (b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 101 + b"\r\n", 431),
    (b"GET /" + b"a" * 70_000, 431),
    (b"GET / HTTP/1.1\r\nX: " + b"a" * 70_000, 431),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + b"T: x\r\n" * 101 + b"\r\n", 431),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: " + b"x" * 140_000, 431),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;" + b"e" * 200_000, 431),  # endless extension
])
def test_a_request_that_cannot_be_framed_names_its_status(raw, status):
    for step in (len(raw), 4096):  # at once, and as a socket would deliver it
        reader = RequestReader(1000, lambda method, path: True)
        with pytest.raises(RequestError) as caught:
            for at in range(0, len(raw), step):
                reader.feed(raw[at:at + step])
        assert caught.value.status == status and caught.value.message


def test_expect_continue_is_seen_on_http_1_1_only():
    reader = RequestReader(100, lambda method, path: True)
    assert reader.feed(b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n") == []
    assert reader.head is not None and reader.head.expect_continue
    reader = RequestReader(100, lambda method, path: True)
    reader.feed(b"POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
    assert reader.head is not None and not reader.head.expect_continue
    assert CONTINUE == b"HTTP/1.1 100 Continue\r\n\r\n"


def test_a_chunked_body_is_joined_and_its_trailers_skipped():
    raw = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nTrailer: x\r\n\r\n"
    reader, [(head, body)] = read(raw)
    assert body == b"Wikipedia" and "trailer" not in head.headers and reader.between


def test_a_request_not_wanted_stops_the_reader_and_leaves_its_bytes_unread():
    mine = b"GET /sparql HTTP/1.1\r\n\r\nPOST /sparql HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
    other = b"PUT /v1/x HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"
    reader, requests = read(mine + other, wanted=lambda method, path: path == "/sparql")
    assert [body for _, body in requests] == [b"", b"abc"] and reader.other and reader.unread() == other


def test_requests_whole_before_a_refused_one_are_kept_for_their_answers():
    reader = RequestReader(100, lambda method, path: True)
    with pytest.raises(RequestError):
        reader.feed(b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nBad Header: x\r\n\r\n")
    assert [head.target for head, _ in reader.read_before_error()] == ["/a"]


_REQUESTS = st.sampled_from([
    b"GET /sparql?q=1 HTTP/1.1\r\nHost: a\r\n\r\n",
    b"POST /sparql HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcd",
    b"POST /sparql HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n1;x\r\nc\r\n0\r\nT: 1\r\n\r\n",
    b"\r\nGET /sparql HTTP/1.1\r\n\r\n",
])


@given(st.lists(_REQUESTS, min_size=1, max_size=5), st.lists(st.integers(1, 40), min_size=1, max_size=10),
       st.binary(max_size=30))
def test_requests_come_out_the_same_however_the_bytes_are_cut(requests, cuts, tail):
    """Any split of a pipelined stream gives the same requests; an unwanted request after them gets back
    exactly its own bytes."""
    other = b"PUT /other HTTP/1.1\r\n\r\n" + tail
    raw = b"".join(requests) + other
    whole, expected = read(raw, wanted=lambda method, path: path == "/sparql")
    reader = RequestReader(1000, lambda method, path: path == "/sparql")
    got, at, index = [], 0, 0
    while at < len(raw):
        step = cuts[index % len(cuts)]
        got += reader.feed(raw[at:at + step])
        at, index = at + step, index + 1
    assert got == expected and len(got) == len(requests)
    assert reader.unread() == whole.unread() == other


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
