"""HTTP/1.1 requests framed by hand on the server's side: a request head and body cut out of the bytes a
connection has delivered so far, and a response written.

The query processes serve `/sparql` connections themselves (`semreg.sparql.connections`); this is their
framing. Everything else a node answers goes through uvicorn. The rules kept (RFC 9112):

- a head is a request line and CRLF-ended fields up to a blank line, at most `MAX_HEAD_BYTES` and
  `MAX_HEADER_LINES` fields; a bare LF ends a line too, as a recipient may accept;
- a field name is a token, with no space before its colon; obs-fold is refused;
- `Transfer-Encoding: chunked` (extensions and trailers skipped) frames the body, else `Content-Length`
  (digits only; two that differ are refused); a request with neither has no body; a transfer coding
  other than chunked is refused (411), as it cannot be framed;
- HTTP/1.1 connections stay open unless `Connection: close`; HTTP/1.0 ones only with `keep-alive`;
- `Expect: 100-continue` is answered with `100 Continue` before the body is read.

    RequestError (ValueError)   the bytes are not a request this reader frames; `status` says which 4xx
"""
from __future__ import annotations

import contextlib
import re
import socket
import time
from email.utils import formatdate
from http import HTTPStatus
from typing import NamedTuple

MAX_HEAD_BYTES = 64 * 1024
MAX_HEADER_LINES = 100
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_TOKEN_TEXT = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TARGET_TEXT = re.compile(r"[\x21-\x7e]+")  # visible ASCII: what a URL may carry unencoded


class RequestError(ValueError):
    """Not a request this reader can frame; answer `status` and close the connection."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class RequestHead(NamedTuple):
    method: str
    target: str  # as sent: path and query string
    version: str  # "HTTP/1.1" or "HTTP/1.0"
    headers: dict[str, str]  # lower-case names; repeated fields joined with ", " (RFC 9110 5.3)
    size: int  # bytes of the head, blank line included
    length: int  # body bytes, when not chunked
    chunked: bool
    keep_alive: bool
    expect_continue: bool

    @property
    def path(self) -> str:
        return self.target.partition("?")[0]

    @property
    def query_string(self) -> bytes:
        return self.target.partition("?")[2].encode("latin-1")


def parse_head(buffer: bytes | bytearray) -> RequestHead | None:
    """The head at the start of `buffer`, or None while it is incomplete. Blank lines before a request
    line are skipped, as RFC 9112 2.2 allows; their bytes count in `size`."""
    start = 0
    if buffer[:1] in (b"\r", b"\n"):
        while buffer[start:start + 2] == b"\r\n" or buffer[start:start + 1] == b"\n":
            start += 2 if buffer[start:start + 1] == b"\r" else 1
    end = buffer.find(b"\r\n\r\n", start)
    blank = 4
    if end < 0 or (buffer.find(b"\n\n", start, end) >= 0):
        end, blank = _bare_lf_end(buffer, start)
        if end < 0:
            if len(buffer) - start > MAX_HEAD_BYTES:
                raise RequestError(431, f"the request head is longer than {MAX_HEAD_BYTES} bytes.")
            return None
    if end - start > MAX_HEAD_BYTES:
        raise RequestError(431, f"the request head is longer than {MAX_HEAD_BYTES} bytes.")
    text = bytes(buffer[start:end]).decode("latin-1")
    lines = text.split("\r\n")
    if "\n" in text and any("\n" in line for line in lines):  # bare LFs somewhere
        lines = [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]
    if len(lines) > MAX_HEADER_LINES + 1:
        raise RequestError(431, f"the request has more than {MAX_HEADER_LINES} header fields.")
    method, target, version = _request_line(lines[0])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not _TOKEN_TEXT.fullmatch(name):
            raise RequestError(400, f"malformed header line {line[:80]!r}.")
        key = name.lower()
        value = value.strip(" \t")
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    chunked, length = _framing(headers) if ("transfer-encoding" in headers or "content-length" in headers) else (
        False, 0)
    connection = headers.get("connection")
    if connection is None:
        keep_alive = version == "HTTP/1.1"
    else:
        tokens = {token.strip().lower() for token in connection.split(",")}
        keep_alive = "keep-alive" in tokens if version == "HTTP/1.0" else "close" not in tokens
    expect = "expect" in headers and headers["expect"].lower() == "100-continue" and version == "HTTP/1.1"
    return RequestHead(method, target, version, headers, end + blank, length, chunked, keep_alive, expect)


def _bare_lf_end(buffer: bytes | bytearray, start: int) -> tuple[int, int]:
    """Where a head that uses bare LFs somewhere ends (before its blank line), and the blank line's
    length; (-1, 0) while absent."""
    crlf = buffer.find(b"\r\n\r\n", start)
    lf = buffer.find(b"\n\n", start)
    if crlf >= 0 and (lf < 0 or crlf + 1 <= lf):
        return crlf, 4
    if lf >= 0:
        if lf > start and buffer[lf - 1:lf] == b"\r":  # "...\r\n\n": a CRLF line, then a bare LF
            return lf - 1, 3
        return lf, 2
    return -1, 0


def _request_line(line: str) -> tuple[str, str, str]:
    parts = line.split(" ")
    if len(parts) != 3 or not _TOKEN_TEXT.fullmatch(parts[0]) or not parts[1]:
        raise RequestError(400, f"malformed request line {line[:80].encode('latin-1')!r}.")
    method, target, version = parts
    if version != "HTTP/1.1" and version != "HTTP/1.0":
        if version.startswith("HTTP/"):
            raise RequestError(505, f"{version} is not served here; speak HTTP/1.1.")
        raise RequestError(400, f"malformed request line {line[:80].encode('latin-1')!r}.")
    if not _TARGET_TEXT.fullmatch(target):
        raise RequestError(400, "the request target has characters a URL cannot carry; percent-encode them.")
    return method, target, version


def _framing(headers: dict[str, str]) -> tuple[bool, int]:
    coding = headers.get("transfer-encoding")
    if coding is not None:
        codings = [c.strip().lower() for c in coding.split(",") if c.strip()]
        if codings != ["chunked"]:
            raise RequestError(411, f"the transfer coding '{coding}' is not served here; send the body with "
                                    f"Content-Length or chunked.")
        return True, 0
    declared = headers.get("content-length")
    if declared is None:
        return False, 0
    values = {value.strip() for value in declared.split(",")}
    if len(values) != 1 or not all(v.isascii() and v.isdigit() for v in values):
        raise RequestError(400, "the Content-Length header is not a number.")
    return False, int(values.pop())


def chunked_body(buffer: bytes | bytearray, start: int, limit: int) -> tuple[bytes, int] | None:
    """A chunked body starting at `start`: (body, end), or None while incomplete. `RequestError(413)`
    as soon as it is known to pass `limit` bytes."""
    chunks: list[bytes] = []
    size = 0
    at = start
    while True:
        eol = buffer.find(b"\n", at)
        if eol < 0:
            if len(buffer) - at > 1024:
                raise RequestError(400, "malformed chunk size line.")
            return None
        digits = bytes(buffer[at:eol]).split(b";", 1)[0].strip()
        if not _HEX.fullmatch(digits):
            raise RequestError(400, f"malformed chunk size line {bytes(buffer[at:eol])[:40]!r}.")
        chunk_size = int(digits, 16)
        at = eol + 1
        if chunk_size == 0:
            while True:  # trailer fields, skipped, then the blank line
                eol = buffer.find(b"\n", at)
                if eol < 0:
                    return None
                line = buffer[at:eol]
                at = eol + 1
                if line in (b"", b"\r"):
                    return b"".join(chunks), at
        size += chunk_size
        if size > limit:
            raise RequestError(413, f"the request body is larger than the limit of {limit} bytes.")
        if len(buffer) < at + chunk_size + 1:
            return None
        chunks.append(bytes(buffer[at:at + chunk_size]))
        at += chunk_size
        if buffer[at:at + 2] == b"\r\n":
            at += 2
        elif buffer[at:at + 1] == b"\n":
            at += 1
        elif len(buffer) - at < 2:
            return None
        else:
            raise RequestError(400, "a chunk is longer than its size line says.")


class _Date:
    """The Date header's value, formatted once a second."""

    def __init__(self) -> None:
        self.second = -1
        self.value = b""

    def __call__(self) -> bytes:
        now = int(time.time())
        if now != self.second:
            self.second = now
            self.value = formatdate(now, usegmt=True).encode("ascii")
        return self.value


date = _Date()


_REASONS: dict[int, bytes] = {}


def _status_line(status: int) -> bytes:
    line = _REASONS.get(status)
    if line is None:
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = ""
        line = _REASONS[status] = f"HTTP/1.1 {status} {reason}\r\n".encode("ascii")
    return line


def encode_response(status: int, headers: list[tuple[bytes, bytes]], body: bytes, *, keep_alive: bool,
                    head_only: bool = False) -> bytes:
    """A whole response: status line, `headers` (lower-case names), Content-Length, Date, Connection."""
    out = [_status_line(status)]
    for name, value in headers:
        out += (name, b": ", value, b"\r\n")
    out.append(b"content-length: %d\r\ndate: %s\r\n%s\r\n" % (len(body), date(),
                                                            b"" if keep_alive else b"connection: close\r\n"))
    if not head_only:
        out.append(body)
    return b"".join(out)


def end_connection(sock: socket.socket) -> None:
    """End the connection for every process holding a descriptor of it (`shutdown`), then close this one.
    A peer that has already gone makes `shutdown` fail, which changes nothing."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
