"""One keep-alive HTTP/1.1 connection over asyncio streams, framed by `semreg.http1.client`.

A `Connection` sends requests one after another and reads each whole `Response`; the load drivers of
this package hold thousands of them, which is why it is not httpx (see the package's docstring).
"""
from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from semreg.http1.client import encode_request, read_body, read_head


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes
    keep_alive: bool


async def read_response(reader: asyncio.StreamReader) -> Response:
    head = await read_head(reader)
    body = await read_body(reader, head)
    assert body is not None  # None only past a limit, and there is none
    return Response(head.status, head.headers, body, head.keep_alive and not head.until_close)


class Connection:
    """One keep-alive connection; requests one after another."""

    def __init__(self, url: str, headers: Mapping[str, str] | None = None) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.authority = parts.netloc
        self.headers = dict(headers or {})
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, target: str, body: bytes | None = None,
                      headers: Mapping[str, str] | None = None) -> Response:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port, limit=1 << 22)
        assert self.reader is not None
        try:
            self.writer.write(encode_request(method, target, self.authority, body, {**self.headers, **(headers or {})}))
            response = await read_response(self.reader)
        except BaseException:
            self.close()
            raise
        if not response.keep_alive:
            self.close()
        return response

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


TRANSPORT_ERRORS = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError)
