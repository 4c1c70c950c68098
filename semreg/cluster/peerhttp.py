"""The connections one node keeps to another: HTTP/1.1 framed by `semreg.http1.client`, kept alive in a pool.

A node asks the others something on every gathered read, so the cost of one exchange bounds what a
ring answers: httpx's AsyncClient spent ~1 ms of CPU an exchange here, as much as answering the
question, and a new question through a node of three cost twenty times one node's; this client writes
one request and reads one response per exchange (see `semreg.bench` scenario `ring` for the figures).

A request gets no answer (refused, reset, cut, or past its timeout) → `Unreachable`; the caller decides
whether the peer is down. A pooled connection the peer closed meanwhile gets one fresh try; a request
is retried that way only when nothing of the response was read, so no request is applied twice by
this client (the internal API's writes are idempotent by revision anyway).

`stream` passes a body on as it arrives instead of reading it whole (a SPARQL answer forwarded to the
caller, `semreg.cluster.sparql_forward`): the head within `timeout_s`, then each piece within
`idle_timeout_s`; the connection goes back to the pool once the body was read to its end.
"""
from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar
from urllib.parse import urlencode, urlsplit

from semreg.http1.client import ClosedEarly, Head, ResponseError, encode_request, iter_body, read_body, read_head

T = TypeVar("T")

MAX_IDLE = 32  # kept-alive connections per peer
MAX_BODY_BYTES = 512 * 1024 * 1024


class Unreachable(Exception):
    """The peer gave no (complete) answer."""


class PeerConnections:
    """Requests to one base URL (`http://host:port`), over a pool of kept-alive connections."""

    def __init__(self, base_url: str, headers: dict[str, str], prefix: str = "", tls: ssl.SSLContext | None = None
                 ) -> None:
        """`tls`: the context an `https` URL is reached with (default: the system's CAs)."""
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.host = parts.hostname
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        self.authority = parts.netloc
        self.prefix = prefix
        self.headers = headers
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self._ssl: ssl.SSLContext | None = (tls or ssl.create_default_context()) if self.tls else None
        self._closed = False

    async def request(self, method: str, path: str, body: bytes | None = None,
                      params: dict[str, object] | None = None, timeout_s: float = 5.0) -> tuple[Head, bytes]:
        target = self.prefix + path
        if params:
            target += "?" + urlencode({k: v for k, v in params.items() if v is not None})
        raw = encode_request(method, target, self.authority, body, self.headers)
        try:
            return await asyncio.wait_for(self._exchange(raw), timeout_s)
        except TimeoutError:
            raise Unreachable(f"no answer within {timeout_s:g} s") from None
        except (OSError, ResponseError) as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}"[:200]) from None

    async def stream(self, method: str, path: str, body: bytes | None = None, timeout_s: float = 5.0,
                     idle_timeout_s: float = 30.0, limit: int = MAX_BODY_BYTES) -> tuple[Head, AsyncIterator[bytes]]:
        """The response's head, and its body as an iterator of pieces (`Unreachable` from either when the peer
        gives no complete answer in time). Close the iterator (`aclose`) if it is not read to its end."""
        raw = encode_request(method, self.prefix + path, self.authority, body, self.headers)
        try:
            reader, writer, head = await asyncio.wait_for(self._sent(raw), timeout_s)
        except TimeoutError:
            raise Unreachable(f"no answer within {timeout_s:g} s") from None
        except (OSError, ResponseError) as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}"[:200]) from None
        return head, self._pieces(reader, writer, head, idle_timeout_s, limit)

    async def _sent(self, raw: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, Head]:
        """`raw` written on a kept-alive connection or a new one (`_reusing`), and the response's head read."""
        async def head(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       raw: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, Head]:
            return reader, writer, await self._head(reader, writer, raw)
        return await self._reusing(raw, head)

    async def _reusing(self, raw: bytes, attempt: Callable[[asyncio.StreamReader, asyncio.StreamWriter, bytes],
                                                           Awaitable[T]]) -> T:
        """`attempt` on a kept-alive connection (one the peer closed while idle: the next) or a new one."""
        while self._idle:
            reader, writer = self._idle.pop()
            if writer.is_closing() or reader.at_eof():
                writer.close()
                continue
            try:
                return await attempt(reader, writer, raw)
            except ClosedEarly as exc:
                if exc.args and "before a response" in str(exc):
                    continue  # closed by the peer while idle: nothing was read, try another
                raise
            except ConnectionError:
                continue
        reader, writer = await asyncio.open_connection(self.host, self.port, ssl=self._ssl, limit=4 * 1024 * 1024)
        return await attempt(reader, writer, raw)

    @staticmethod
    async def _head(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, raw: bytes) -> Head:
        try:
            writer.write(raw)
            await writer.drain()
            return await read_head(reader)
        except BaseException:
            writer.close()
            raise

    async def _pieces(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: Head,
                      idle_timeout_s: float, limit: int) -> AsyncIterator[bytes]:
        whole = False
        try:
            pieces = aiter(iter_body(reader, head, limit))
            while True:
                try:
                    piece = await asyncio.wait_for(anext(pieces), idle_timeout_s)
                except StopAsyncIteration:
                    break
                yield piece
            whole = True
        except TimeoutError:
            raise Unreachable(f"the answer stalled for {idle_timeout_s:g} s") from None
        except (OSError, ResponseError) as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}"[:200]) from None
        finally:
            if whole and head.keep_alive and not head.until_close and not self._closed and len(self._idle) < MAX_IDLE:
                self._idle.append((reader, writer))
            else:
                writer.close()

    async def _exchange(self, raw: bytes) -> tuple[Head, bytes]:
        return await self._reusing(raw, self._once)

    async def _once(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    raw: bytes) -> tuple[Head, bytes]:
        reusable = False
        try:
            writer.write(raw)
            await writer.drain()
            head = await read_head(reader)
            body = await read_body(reader, head, MAX_BODY_BYTES)
            if body is None:
                raise ResponseError(f"a response of more than {MAX_BODY_BYTES} bytes")
            reusable = head.keep_alive and not head.until_close
            return head, body
        finally:
            if reusable and not self._closed and len(self._idle) < MAX_IDLE:
                self._idle.append((reader, writer))
            else:
                writer.close()

    async def aclose(self) -> None:
        self._closed = True
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()
