"""The probes of active health checks: HTTP GET (any 2xx or 3xx passes) and TCP connect.

HTTP probes keep connections alive per target and frame HTTP/1.1 by hand (`semreg.http1.client`, which says
why, with the measurements against h11 and httpx), so a thousand checks a second cost a write and a read
each, not a new connection and a general client's machinery: httpx's async client managed ~70 probes a
second at 200 in flight, which made healthy instances time out under load. Bodies are read and
discarded up to a bound; a response without a length, or a larger one, closes the connection instead
of being pooled. A kept-alive connection the target closed meanwhile gets one fresh try.
"""
from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from semreg.http1.client import ResponseError, encode_request, read_body, read_head

MAX_BODY_BYTES = 64 * 1024
POOL_PER_TARGET = 64  # idle connections kept per target (host, port)

Probe = Callable[[dict[str, Any]], Awaitable[tuple[bool, str]]]


@dataclass(frozen=True)
class HttpTarget:
    host: str
    port: int
    tls: bool
    request: bytes


@lru_cache(maxsize=16384)
def http_target(url: str) -> HttpTarget:
    parts = urlsplit(url)
    tls = parts.scheme == "https"
    host = parts.hostname or "localhost"
    port = parts.port or (443 if tls else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host_header = parts.netloc.rpartition("@")[2]
    request = encode_request("GET", path, host_header,
                             headers={"User-Agent": "semreg-health", "Accept": "*/*", "Connection": "keep-alive"})
    return HttpTarget(host, port, tls, request)


class HttpTcpProbe:
    """Real probes, with a small pool of kept-alive connections per HTTP target."""

    def __init__(self) -> None:
        self._pools: dict[tuple[str, int, bool], list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]] = {}
        self._tls: ssl.SSLContext | None = None

    async def __call__(self, check: dict[str, Any]) -> tuple[bool, str]:
        timeout = float(check.get("timeout", 2.0))
        try:
            if check.get("http"):
                status = await asyncio.wait_for(self._http(http_target(check["http"])), timeout)
                return 200 <= status < 400, f"HTTP {status}"
            host, _, port = check["tcp"].rpartition(":")
            _, writer = await asyncio.wait_for(asyncio.open_connection(host.strip("[]"), int(port)), timeout)
            writer.close()
            return True, "TCP connect ok"
        except TimeoutError:
            return False, f"no answer within {timeout:g} s"
        except (OSError, ValueError) as exc:
            return False, f"{type(exc).__name__}: {exc}"[:200]

    async def _http(self, target: HttpTarget) -> int:
        key = (target.host, target.port, target.tls)
        pool = self._pools.setdefault(key, [])
        reused = bool(pool)
        reader, writer = pool.pop() if pool else await self._connect(target)
        try:
            status, reusable = await self._exchange(reader, writer, target)
        except (OSError, ResponseError):
            writer.close()
            if not reused:
                raise
            # a kept-alive connection the target closed meanwhile: one fresh try
            reader, writer = await self._connect(target)
            try:
                status, reusable = await self._exchange(reader, writer, target)
            except BaseException:
                writer.close()
                raise
        except BaseException:
            writer.close()
            raise
        if reusable and len(pool) < POOL_PER_TARGET:
            pool.append((reader, writer))
        else:
            writer.close()
        return status

    async def _connect(self, target: HttpTarget) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        context = None
        if target.tls:
            if self._tls is None:
                # health endpoints commonly present internal or self-signed certificates
                self._tls = ssl.create_default_context()
                self._tls.check_hostname = False
                self._tls.verify_mode = ssl.CERT_NONE
            context = self._tls
        return await asyncio.open_connection(target.host, target.port, ssl=context)

    @staticmethod
    async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                        target: HttpTarget) -> tuple[int, bool]:
        """Send the request, read the response: (status, whether the connection can be pooled)."""
        writer.write(target.request)
        await writer.drain()
        head = await read_head(reader)
        if head.until_close:
            return head.status, False  # a body delimited by closing: nothing to pool
        body = await read_body(reader, head, MAX_BODY_BYTES)
        return head.status, head.keep_alive and body is not None

    async def aclose(self) -> None:
        for pool in self._pools.values():
            for _, writer in pool:
                writer.close()
        self._pools.clear()
