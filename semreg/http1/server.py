"""HTTP/1.1 requests framed on the server's side by llhttp (`httptools`, as uvicorn frames them), and a
response written.

The query processes serve `/sparql` connections themselves (`semreg.sparql.connections`); this is their
framing. Everything else a node answers goes through uvicorn. llhttp keeps RFC 9112's rules strictly: a
Content-Length beside a Transfer-Encoding, two Content-Lengths, a value with control characters or NUL,
a padded or overflowing Content-Length, bare LFs and obs-fold are all refused. On top of it:

- a head is at most `MAX_HEAD_BYTES` (counted from the read that began it) and `MAX_HEADER_LINES`
  fields; chunk trailers count against the same limits (431);
- a body is at most the caller's limit (413); the bytes around it (chunk sizes, extensions, trailers)
  are bounded too (431), so a request costs time and memory linear in what it may carry;
- `Transfer-Encoding` on HTTP/1.0 is refused (RFC 9112 6.1); only HTTP/1.0 and 1.1 are served (505);
- HTTP/1.1 connections stay open unless `Connection: close`; HTTP/1.0 ones only with `keep-alive`.

Every refusal closes the connection. The reader parses each byte once: bytes arriving a few at a time
cost nothing more than bytes arriving together.

    RequestError (ValueError)   the bytes are not a request this reader frames; `status` says which 4xx
"""
from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable
from email.utils import formatdate
from http import HTTPStatus
from typing import NamedTuple

import httptools

MAX_HEAD_BYTES = 64 * 1024
MAX_HEADER_LINES = 100
CHUNK_FRAMING_BYTES = 64  # allowed per chunk for its size line and extensions
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


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
    keep_alive: bool
    expect_continue: bool

    @property
    def path(self) -> str:
        return self.target.partition("?")[0]

    @property
    def query_string(self) -> bytes:
        return self.target.partition("?")[2].encode("latin-1")


class Request(NamedTuple):
    head: RequestHead
    body: bytes


class _Stop(Exception):
    """Raised inside a parser callback to stop llhttp where it is."""


class _Counter:
    """Counts the messages llhttp completes (finding where one ends in bytes already read)."""

    def __init__(self) -> None:
        self.done = 0

    def on_message_complete(self) -> None:
        self.done += 1


def message_end(data: bytes, messages: int) -> int:
    """Where the `messages`-th whole request in `data` ends (llhttp reports no offsets, so found by
    bisection over prefixes; only needed when a connection is given back with pipelined bytes)."""
    if messages == 0:
        return 0

    def complete(k: int) -> bool:
        counter = _Counter()
        with contextlib.suppress(httptools.HttpParserError):
            httptools.HttpRequestParser(counter).feed_data(data[:k])
        return counter.done >= messages

    low, high = 0, len(data)
    while low < high:
        middle = (low + high) // 2
        if complete(middle):
            high = middle
        else:
            low = middle + 1
    return low


class RequestReader:
    """One connection's requests: `feed(data)` returns those `data` completed, in order.

    `wanted(method, path)` says whether this reader's owner serves a request; the first one it does not
    stops the reader (`other` set), and `unread()` is then every byte from that request on.
    """

    def __init__(self, max_body_bytes: int, wanted: Callable[[str, str], bool]) -> None:
        self.max_body_bytes = max_body_bytes
        self.wanted = wanted
        self._parser = httptools.HttpRequestParser(self)
        self._raw = bytearray()  # the bytes since the reader was last between messages
        self._done_in_raw = 0  # whole requests in `_raw`
        self._ready: list[Request] = []
        self._reset()
        self.other = False
        self.between = True  # no request begun and not finished
        self.head: RequestHead | None = None  # the head of a request whose body is still coming

    def _reset(self) -> None:
        self._url = bytearray()
        self._headers: dict[str, str] = {}
        self._fields = 0
        self._field_bytes = 0
        self._body: list[bytes] = []
        self._body_bytes = 0
        self._chunks = 0
        self.head = None

    def feed(self, data: bytes) -> list[Request]:
        if self.other:
            self._raw += data
            return []
        self._raw += data
        self._ready = []
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__
            if isinstance(cause, RequestError):
                raise cause from None
            if not isinstance(cause, _Stop):
                raise RequestError(400, "the request could not be framed.") from exc
        except httptools.HttpParserInvalidURLError as exc:
            raise RequestError(400, "the request target has characters a URL cannot carry; percent-encode them.") from exc
        except httptools.HttpParserError as exc:
            if "invalid `Transfer-Encoding`" in str(exc):  # a coding other than chunked: it cannot be framed
                raise RequestError(411, "only a chunked Transfer-Encoding is served here; send the body with "
                                        "Content-Length or chunked.") from exc
            raise RequestError(400, f"the request is malformed: {exc}.") from exc
        if self.between:
            self._raw.clear()
            self._done_in_raw = 0
        elif not self.other:
            if self._done_in_raw:  # keep only the request still coming
                del self._raw[:message_end(bytes(self._raw), self._done_in_raw)]
                self._done_in_raw = 0
            self._check_size(len(self._raw))
        return self._ready

    def read_before_error(self) -> list[Request]:
        """The requests whole before the bytes `feed` refused (they are answered before the refusal)."""
        ready, self._ready = self._ready, []
        return ready

    def unread(self) -> bytes:
        """Every byte read from the first request not yet returned by `feed` on."""
        raw = bytes(self._raw)
        return raw[message_end(raw, self._done_in_raw):]

    def _check_size(self, size: int) -> None:
        """`size`: the bytes of the request still coming, read so far."""
        if self.head is None and size > MAX_HEAD_BYTES:
            raise RequestError(431, f"the request head is longer than {MAX_HEAD_BYTES} bytes.")
        if size - self._body_bytes > 2 * MAX_HEAD_BYTES + CHUNK_FRAMING_BYTES * self._chunks:
            raise RequestError(431, "the request's chunk extensions or trailers are too long.")

    # -- llhttp's callbacks ------------------------------------------------------------------------------
    def on_message_begin(self) -> None:
        self.between = False
        self._reset()

    def on_url(self, url: bytes) -> None:
        self._url += url
        if len(self._url) > MAX_HEAD_BYTES:
            raise RequestError(431, f"the request head is longer than {MAX_HEAD_BYTES} bytes.")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._fields += 1
        self._field_bytes += len(name) + len(value) + 4
        if self._fields > MAX_HEADER_LINES:
            raise RequestError(431, f"the request has more than {MAX_HEADER_LINES} header fields or trailers.")
        if self._field_bytes > MAX_HEAD_BYTES:
            raise RequestError(431, f"the request's fields are longer than {MAX_HEAD_BYTES} bytes.")
        if self.head is not None:
            return  # a trailer field: counted, not kept
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1").strip(" \t")
        self._headers[key] = f"{self._headers[key]}, {text}" if key in self._headers else text

    def on_headers_complete(self) -> None:
        parser = self._parser
        version = f"HTTP/{parser.get_http_version()}"
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            raise RequestError(505, f"{version} is not served here; speak HTTP/1.1.")
        headers = self._headers
        if version == "HTTP/1.0" and "transfer-encoding" in headers:
            raise RequestError(400, "Transfer-Encoding is not allowed on an HTTP/1.0 request.")
        method = parser.get_method().decode("latin-1")
        target = self._url.decode("latin-1")
        if not self.wanted(method, target.partition("?")[0]):
            self.other = True
            raise _Stop
        length = headers.get("content-length")
        if length is not None and int(length) > self.max_body_bytes:
            raise RequestError(413, f"the request body is {int(length)} bytes; the limit is {self.max_body_bytes} bytes.")
        expect = version == "HTTP/1.1" and headers.get("expect", "").lower() == "100-continue"
        self.head = RequestHead(method, target, version, headers, parser.should_keep_alive(), expect)

    def on_chunk_header(self) -> None:
        self._chunks += 1

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        if self._body_bytes > self.max_body_bytes:
            raise RequestError(413, f"the request body is larger than the limit of {self.max_body_bytes} bytes.")
        self._body.append(body)

    def on_message_complete(self) -> None:
        assert self.head is not None
        self._ready.append(Request(self.head, b"".join(self._body)))
        self._done_in_raw += 1
        self._reset()
        self.between = True


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
