"""Connections for `/sparql` handed to the query processes before uvicorn reads them.

`semreg serve` gives uvicorn this protocol in place of its own. It looks at each new connection's
first request line: a `GET` or `POST` of `/sparql` sends the connection, with the bytes read so far, to
the query pool (`QueryPool.adopt`), whose processes read, evaluate and answer its requests themselves,
so that SPARQL traffic costs the server's event loop nothing per request. Any other connection, or one
the pool cannot take now (its processes are starting, or the server is stopping), goes to uvicorn's own
protocol with the same bytes, and from then on this protocol is out of the way.

A connection a query process sends back ("other": its next request is for another route) comes in
through `readopt`, and uvicorn serves it from there. The server keeps the socket only through its own
duplicate of the descriptor: uvicorn's transport for it is closed without touching the connection.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable
from typing import Any, ClassVar

from semreg.sparql.pool import QueryPool

log = logging.getLogger("semreg.handoff")

PATH = b"/sparql"
METHODS = (b"GET", b"POST")
MAX_LINE = 8192  # a request line longer than this is uvicorn's to refuse


def is_sparql(request_line: bytes) -> bool:
    parts = request_line.split(b" ")
    return len(parts) == 3 and parts[0] in METHODS and parts[1].split(b"?", 1)[0] == PATH


class Handoff(asyncio.Protocol):
    """The first bytes of a connection decide who serves it (see the module's doc)."""

    inner: ClassVar[Callable[..., asyncio.Protocol]]  # uvicorn's HTTP protocol class
    pool: ClassVar[QueryPool]
    uvicorn_args: ClassVar[tuple | None] = None  # (config, server_state, app_state), for `readopt`

    @classmethod
    def bind(cls, inner: Callable[..., asyncio.Protocol], pool: QueryPool) -> type[Handoff]:
        """This protocol in front of `inner`, handing `/sparql` connections to `pool`."""
        bound: type[Handoff] = type("BoundHandoff", (cls,), {"inner": inner, "pool": pool})
        pool.on_other = bound.readopt
        return bound

    def __init__(self, config: Any, server_state: Any, app_state: Any, _loop: asyncio.AbstractEventLoop | None = None):
        self._args = (config, server_state, app_state, _loop)
        type(self).uvicorn_args = self._args[:3]
        self._buffer = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        buffer = self._buffer
        end = buffer.find(b"\n")
        if end < 0 and len(buffer) < MAX_LINE:
            return  # the request line is not all in yet
        if end >= 0 and is_sparql(buffer[:end].rstrip(b"\r")) and self._hand_over():
            return
        self._to_uvicorn()

    def eof_received(self) -> bool | None:
        if self._buffer and self._transport is not None:
            self._to_uvicorn()  # uvicorn answers the half request it got
            return None
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None

    def _hand_over(self) -> bool:
        transport = self._transport
        if transport is None or transport.get_extra_info("sslcontext") is not None:
            return False
        raw = transport.get_extra_info("socket")
        if raw is None:
            return False
        own = socket.socket(fileno=os.dup(raw.fileno()))
        try:
            taken = self.pool.adopt(own, self._buffer)
        except Exception:
            log.exception("handing a SPARQL connection to the query processes failed; the server answers it")
            taken = False
        if not taken:
            own.close()  # the duplicate only: uvicorn serves the connection
            return False
        transport.pause_reading()
        transport.abort()  # closes uvicorn's descriptor only: the pool's duplicate keeps the connection
        self._transport = None
        self._buffer = b""
        return True

    def _to_uvicorn(self) -> None:
        transport = self._transport
        assert transport is not None
        protocol = self.inner(*self._args[:3], _loop=self._args[3])
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        data, self._buffer = self._buffer, b""
        if data:
            protocol.data_received(data)

    @classmethod
    def readopt(cls, sock: socket.socket, data: bytes) -> None:
        """A connection sent back by a query process: uvicorn serves it, starting with `data`."""
        asyncio.get_running_loop().create_task(cls._readopt(sock, data))

    @classmethod
    async def _readopt(cls, sock: socket.socket, data: bytes) -> None:
        loop = asyncio.get_running_loop()
        args = cls.uvicorn_args
        if args is None:
            sock.close()
            return
        sock.setblocking(False)
        try:
            await loop.connect_accepted_socket(lambda: _Replay(cls.inner(*args, _loop=loop), data), sock)
        except OSError:
            sock.close()


class _Replay(asyncio.Protocol):
    """Gives the transport to `protocol` and replays what was read of the connection before."""

    def __init__(self, protocol: asyncio.Protocol, data: bytes) -> None:
        self.protocol = protocol
        self.data = data

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.set_protocol(self.protocol)
        self.protocol.connection_made(transport)
        if self.data:
            self.protocol.data_received(self.data)
