"""HTTP/1.1 over asyncio streams, framed by hand: a request written, a response head and body read.

Two clients use it where they send a thousand requests a second from a process that has other work:
the active health probes (`semreg.registry.probes`, inside the server) and the load the benchmark makes itself
(`semreg.bench.aio`). h11 frames the same messages and is what the rest of the stack uses (uvicorn,
httpx), but costs more CPU per exchange than these clients can spare on two shared cores. Measured
with the same probe, pool and bench code on each framing (medians of 5 interleaved runs; the target is
the bench's `HealthTarget` in another process):

                                                                      by hand               h11
    1,000 probes/s, 200 in flight, 3 s                                316 µs CPU a probe    431 µs
    as many probes as 200 in flight allow, 3 s                        1,426 probes/s        1,051/s
    `semreg bench --only health-checks --duration-s 5`: checks/s
    beside wrk; discovery p99 with checks / without (target ≤ 2)      822; 0.83             458; 2.35
    the bench's Heartbeater, 1,000 PUTs/s over 16 connections, 3 s   174 µs a heartbeat    367 µs

httpx's AsyncClient made 52 probes/s at 100 in flight and 71/s at 200.

Framing rules kept: a head of CRLF-ended lines (RFC 9112 lets a recipient accept a bare LF too; this
reader does not), read in one go up to its blank line, with at most `MAX_HEADER_LINES` fields;
`Transfer-Encoding: chunked` (extensions and trailers skipped) over `Content-Length`; no body for 1xx,
204 and 304; otherwise the body runs to the end of the connection. Interim 1xx responses (not 101) are
skipped. HTTP/1.1 connections stay open unless `Connection: close`; HTTP/1.0 ones only with
`Connection: keep-alive`.

    ResponseError (ValueError)     the answer is not an HTTP/1.1 response this reader can frame
    ├── ClosedEarly                the connection ended before the response did
    └── TooLarge                   the body is longer than the reader's limit
"""
from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Mapping
from typing import NamedTuple

MAX_HEADER_LINES = 100
MAX_INTERIM_RESPONSES = 8  # 1xx answers skipped before the final one
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")


class ResponseError(ValueError):
    """The answer is not an HTTP/1.1 response this reader can frame."""


class ClosedEarly(ResponseError):
    """The connection ended before the response did."""


class TooLarge(ResponseError):
    """The body is longer than the reader's limit."""


class Head(NamedTuple):
    """A response's status line and headers, and what they say about its body."""

    status: int
    headers: dict[str, str]  # lower-case names; a repeated header keeps its last value
    keep_alive: bool  # the connection may carry another request after this response
    length: int | None  # Content-Length, unless the body is chunked
    chunked: bool

    @property
    def has_body(self) -> bool:
        return not (100 <= self.status < 200 or self.status in (204, 304))

    @property
    def until_close(self) -> bool:
        """The body has no length and ends when the peer closes the connection."""
        return self.has_body and self.length is None and not self.chunked


def encode_request(method: str, target: str, host: str, body: bytes | None = None,
                   headers: Mapping[str, str] | None = None) -> bytes:
    """One HTTP/1.1 request; `Content-Length` when there is a body. Characters outside Latin-1 become `?`."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace") + (body or b"")


def parse_head(raw: bytes) -> Head:
    """A `Head` from a status line and its header fields, CRLF-separated, without the blank line."""
    lines = raw.decode("latin-1").split("\n")
    if len(lines) > MAX_HEADER_LINES + 1:
        raise ResponseError(f"more than {MAX_HEADER_LINES} header lines")
    parts = lines[0].split(None, 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise ResponseError(f"the answer is not HTTP: {lines[0][:80]!r}")
    if not (len(parts[1]) == 3 and parts[1].isdigit()):
        raise ResponseError(f"the status of {lines[0].strip()[:80]!r} is not three digits")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        name = name.strip()
        if not colon or not name:
            raise ResponseError(f"malformed header line {line.strip()[:80]!r}")
        headers[name.lower()] = value.strip()
    chunked = "chunked" in headers.get("transfer-encoding", "").lower()
    length = None
    if not chunked and "content-length" in headers:
        declared = headers["content-length"]
        if not (declared.isascii() and declared.isdigit()):
            raise ResponseError(f"Content-Length {declared[:40]!r} is not a number")
        length = int(declared)
    connection = headers.get("connection", "").lower()
    keep_alive = connection == "keep-alive" if parts[0] == "HTTP/1.0" else connection != "close"
    return Head(int(parts[1]), headers, keep_alive, length, chunked)


async def read_head(reader: asyncio.StreamReader) -> Head:
    """The head of the next final response (interim 1xx ones skipped).

    The first five bytes are checked as soon as they arrive, so a peer that speaks something else
    fails at once instead of at a timeout; then the head is read in one go, up to its blank line.
    """
    for _ in range(MAX_INTERIM_RESPONSES + 1):
        prefix = b""
        try:
            prefix = await reader.readexactly(5)
            if prefix != b"HTTP/":
                raise ResponseError(f"the answer is not HTTP: {prefix!r}")
            raw = await reader.readuntil(b"\n\r\n")  # the status line's LF or the last field's, then CRLF
        except asyncio.IncompleteReadError as exc:
            raise _cut_off(prefix + exc.partial) from None
        except asyncio.LimitOverrunError:
            raise ResponseError("the response head is longer than the read buffer") from None
        head = parse_head(prefix + raw[:-3])
        if not (100 <= head.status < 200) or head.status == 101:
            return head
    raise ResponseError(f"more than {MAX_INTERIM_RESPONSES} interim responses")


def _cut_off(received: bytes) -> ResponseError:
    """The error for a connection that ended after `received`, the start of a response head."""
    if not received:
        return ClosedEarly("the connection closed before a response arrived")
    if received[:5] != b"HTTP/"[:len(received)]:
        return ResponseError(f"the answer is not HTTP: {received[:80]!r}")
    return ClosedEarly("the connection closed in the middle of the response head")


async def read_body(reader: asyncio.StreamReader, head: Head, limit: int | None = None) -> bytes | None:
    """The body `head` announces, or None once it is known to pass `limit` bytes (reading stops there,
    leaving the connection unusable for another request)."""
    if not head.has_body:
        return b""
    try:
        if head.chunked:
            return await _read_chunks(reader, limit)
        if head.length is not None:
            if limit is not None and head.length > limit:
                return None
            return await reader.readexactly(head.length)
    except asyncio.IncompleteReadError:
        raise ClosedEarly("the connection closed in the middle of the response body") from None
    chunks: list[bytes] = []
    size = 0
    while chunk := await reader.read(1 << 16):
        size += len(chunk)
        if limit is not None and size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def _read_chunks(reader: asyncio.StreamReader, limit: int | None) -> bytes | None:
    chunks: list[bytes] = []
    try:
        async for data in _iter_chunks(reader, limit if limit is not None else 1 << 62, 1 << 20):
            chunks.append(data)
    except TooLarge:
        return None
    return b"".join(chunks)


async def iter_body(reader: asyncio.StreamReader, head: Head, limit: int, piece: int = 1 << 16
                    ) -> AsyncIterator[bytes]:
    """The body `head` announces, piece by piece as it arrives (at most `piece` bytes each): what `read_body`
    reads whole, for a body passed on while it is read. Past `limit` bytes, `ResponseError`."""
    if not head.has_body:
        return
    if head.length is not None and head.length > limit:
        raise TooLarge(f"a response of more than {limit} bytes")
    try:
        if head.chunked:
            async for data in _iter_chunks(reader, limit, piece):
                yield data
            return
        left = head.length
        size = 0
        while left is None or left > 0:
            data = await reader.read(piece if left is None else min(piece, left))
            if not data:
                if left is None:
                    return
                raise ClosedEarly("the connection closed in the middle of the response body")
            size += len(data)
            if size > limit:
                raise TooLarge(f"a response of more than {limit} bytes")
            if left is not None:
                left -= len(data)
            yield data
    except asyncio.IncompleteReadError:
        raise ClosedEarly("the connection closed in the middle of the response body") from None


async def _iter_chunks(reader: asyncio.StreamReader, limit: int, piece: int) -> AsyncIterator[bytes]:
    size = 0
    while True:
        line = await reader.readline()
        if not line.endswith(b"\n"):
            raise asyncio.IncompleteReadError(line, None)
        digits = line.split(b";", 1)[0].strip()
        if not _HEX.fullmatch(digits):
            raise ResponseError(f"malformed chunk size line {line[:40]!r}")
        left = int(digits, 16)
        if left == 0:
            for _ in range(MAX_HEADER_LINES + 1):  # trailer fields, then a blank line
                trailer = await reader.readline()
                if trailer in (b"\r\n", b"\n"):
                    return
                if not trailer.endswith(b"\n"):
                    raise asyncio.IncompleteReadError(trailer, None)
            raise ResponseError(f"more than {MAX_HEADER_LINES} trailer lines")
        size += left
        if size > limit:
            raise TooLarge(f"a response of more than {limit} bytes")
        while left > 0:
            data = await reader.readexactly(min(piece, left))
            left -= len(data)
            yield data
        if (await reader.readline()).rstrip(b"\r\n"):
            raise ResponseError("a chunk is longer than its size line says")
