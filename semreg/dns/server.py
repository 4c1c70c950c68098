"""The DNS listeners of a node (`--dns ADDR:PORT`): UDP and TCP on the same port, on the node's event loop,
started and stopped with the app. Each client address has a token bucket (`--dns-rate` queries a second,
as many at once): past it a query is answered REFUSED, cheaply, without being looked at. Bytes never stop
a listener: whatever a packet holds gets FORMERR, and an error inside an answer gets SERVFAIL and a log line.
Over TCP (RFC 7766) each message is framed by a two-byte length; a connection may send several, one after
another, and is held within the limits of `connections` (per address, in all, a deadline for each message
and for each answer); one that sends a frame that cannot be read is closed."""
from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
from typing import Any

import dns.rcode

from semreg.access.ratelimit import RateLimiter
from semreg.clock import Clock, LoopClock
from semreg.dns.answers import Resolver, Zone, answer, bare
from semreg.dns.connections import Connections, Limits

log = logging.getLogger("semreg.dns")

BIND_TRIES = 20  # with port 0: UDP ports whose number TCP could not also have
MAX_PENDING = 4096  # queries being answered at once; past it a datagram is dropped (the client asks again)


def parse_listen(value: str) -> tuple[str, int]:
    """`--dns HOST:PORT` → (host, port); ValueError says why not."""
    host, sep, port = value.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"--dns {value}: give ADDRESS:PORT, such as 127.0.0.1:5353.")
    return host.strip("[]"), int(port)


class DnsServer:
    def __init__(self, resolver: Resolver, zone: Zone, listen: str, rate_per_s: float = 0.0,
                 clock: Clock | None = None, tcp: Limits = Limits()) -> None:
        self.resolver = resolver
        self.zone = zone
        self.host, self.port = parse_listen(listen)
        self.limiter = RateLimiter(rate_per_s, rate_per_s)
        self.clock = clock or LoopClock()
        self.connections = Connections(self.clock, tcp)
        self.answered = self.refused = self.failed = 0
        self._udp: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    @property
    def address(self) -> tuple[str, int]:
        """Where it listens (the port the system gave, with port 0)."""
        return self.host, self.port

    async def start(self) -> None:
        """UDP and TCP on one port. With port 0 the system picks the UDP port, which some TCP socket may
        already hold: then both are given up and another port tried, `BIND_TRIES` times."""
        loop = asyncio.get_running_loop()
        for attempt in range(1, BIND_TRIES + 1):
            transport, _ = await loop.create_datagram_endpoint(lambda: _Datagrams(self),
                                                               local_addr=(self.host, self.port))
            port = transport.get_extra_info("sockname")[1]
            try:
                self._tcp = await asyncio.start_server(self._serve_tcp, self.host, port)
            except OSError as e:
                transport.close()
                if self.port != 0 or e.errno != errno.EADDRINUSE or attempt == BIND_TRIES:
                    raise
                log.info("dns port taken for TCP; trying another", extra={"port": port, "attempt": attempt})
                continue
            self._udp, self.port = transport, port
            break
        log.info("dns listening", extra={"host": self.host, "port": self.port, "domain": self.zone.domain.to_text()})

    async def stop(self) -> None:
        if self._udp is not None:
            self._udp.close()
        if self._tcp is not None:
            self._tcp.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._tcp.wait_closed(), 2)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=2)

    # -- one query ---------------------------------------------------------------------------------
    async def respond(self, wire: bytes, client: str, tcp: bool) -> bytes | None:
        if self.limiter.take(client, self.clock.monotonic()) > 0:
            self.refused += 1
            return bare(wire, dns.rcode.REFUSED)
        try:
            out = await answer(wire, self.resolver, self.zone, tcp=tcp)
        except Exception:
            self.failed += 1
            log.exception("a DNS answer failed; it was answered SERVFAIL", extra={"client": client})
            return bare(wire, dns.rcode.SERVFAIL)
        self.answered += 1
        return out

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reply_udp(self, wire: bytes, addr: tuple) -> None:
        out = await self.respond(wire, addr[0], tcp=False)
        if out is not None and self._udp is not None and not self._udp.is_closing():
            self._udp.sendto(out, addr)

    async def _serve_tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("?",)
        conn = self.connections.open(peer[0], writer.transport.abort)
        if conn is None:
            writer.transport.abort()
            return
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            while not conn.closed:  # each step within its deadline: the connection is aborted when one passes
                head = await reader.readexactly(2)
                wire = await reader.readexactly(int.from_bytes(head, "big"))
                self.connections.answering(conn)
                out = await self.respond(wire, peer[0], tcp=True)
                if out is None or conn.closed:
                    return
                self.connections.writing(conn)
                writer.write(len(out).to_bytes(2, "big") + out)
                await writer.drain()
                self.connections.waiting(conn)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass  # the client hung up or cut a message short, or its connection was closed: it just ends
        finally:
            self.connections.close(conn)
            if task is not None:
                self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, server: DnsServer) -> None:
        self.server = server

    def datagram_received(self, data: bytes, addr: tuple) -> None:
        if len(self.server._tasks) < MAX_PENDING:
            self.server._spawn(self.server._reply_udp(data, addr))

    def error_received(self, exc: Exception) -> None:  # an ICMP error for an earlier answer: nothing to do
        pass
