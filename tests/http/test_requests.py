"""The one request-body reader: 413 as soon as the limit is known to be passed, 400 for a bad Content-Length."""
from __future__ import annotations

import asyncio

import pytest
from starlette.requests import Request

from semreg.errors import BadRequest, PayloadTooLarge
from semreg.http.requests import read_body


def read(chunks: list[bytes], limit_bytes: int, content_length: str | None = None):
    """read_body over an ASGI request fed `chunks`: (the body or the error, how many chunks were pulled)."""
    pulled = 0

    async def receive():
        nonlocal pulled
        pulled += 1
        chunk = chunks[pulled - 1] if pulled <= len(chunks) else b""
        return {"type": "http.request", "body": chunk, "more_body": pulled < len(chunks)}

    headers = [] if content_length is None else [(b"content-length", content_length.encode())]
    request = Request({"type": "http", "method": "POST", "path": "/", "headers": headers, "query_string": b""}, receive)
    try:
        result: bytes | Exception = asyncio.run(read_body(request, limit_bytes, "the body"))
    except (BadRequest, PayloadTooLarge) as exc:
        result = exc
    return result, pulled


@pytest.mark.parametrize(("chunks", "limit", "content_length", "body", "pulled"), [
    ([b"ab", b"cd"], 4, None, b"abcd", 2),
    ([b"abcd"], 4, "4", b"abcd", 1),
    ([b""], 4, "0", b"", 1),
    ([b"ab", b"", b"c"], 4, None, b"abc", 3),
])
def test_bodies_within_the_limit(chunks, limit, content_length, body, pulled):
    assert read(chunks, limit, content_length) == (body, pulled)


@pytest.mark.parametrize(("chunks", "content_length", "error", "message", "pulled"), [
    # declared too large: refused before reading anything
    ([b"x" * 10], "10", PayloadTooLarge, "the body is 10 bytes; the limit is 4 bytes.", 0),
    # undeclared (or understated): refused at the chunk that passes the limit, the rest never read
    ([b"abc", b"de", b"never read"], None, PayloadTooLarge, "the body is larger than the limit of 4 bytes.", 2),
    ([b"abc", b"de", b"never read"], "3", PayloadTooLarge, "the body is larger than the limit of 4 bytes.", 2),
    # a Content-Length that is not digits
    ([b"ab"], "two", BadRequest, "the Content-Length header is not a number.", 0),
    ([b"ab"], "-2", BadRequest, "the Content-Length header is not a number.", 0),
    ([b"ab"], "1_0", BadRequest, "the Content-Length header is not a number.", 0),
    ([b"ab"], "", BadRequest, "the Content-Length header is not a number.", 0),
])
def test_bodies_refused(chunks, content_length, error, message, pulled):
    result, reads = read(chunks, 4, content_length)
    assert isinstance(result, error) and result.message == message and reads == pulled
    assert result.body() == ({"error": message, "limit_bytes": 4} if error is PayloadTooLarge else {"error": message})
