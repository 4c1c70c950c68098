"""Where the DNS listeners bind: UDP and TCP on one port, whatever other sockets already hold."""
from __future__ import annotations

import asyncio
import socket

import dns.name
import pytest

from semreg.dns.answers import Zone
from semreg.dns.server import BIND_TRIES, DnsServer


def held_tcp_port() -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_with_port_0_a_udp_port_whose_number_tcp_holds_is_given_up_for_another():
    held = held_tcp_port()
    taken = held.getsockname()[1]

    async def run() -> tuple[int, int, int]:
        loop = asyncio.get_running_loop()
        real = loop.create_datagram_endpoint
        asked: list[tuple] = []

        async def first_on_the_taken_port(factory, local_addr, **kw):
            asked.append(local_addr)
            if len(asked) == 1:  # the system might have given this one: a TCP socket has its number
                local_addr = (local_addr[0], taken)
            return await real(factory, local_addr=local_addr, **kw)

        loop.create_datagram_endpoint = first_on_the_taken_port  # type: ignore[method-assign]
        server = DnsServer(None, Zone(dns.name.from_text("semreg.")), "127.0.0.1:0")  # type: ignore[arg-type]
        await server.start()
        try:
            port = server.port
            socket.create_connection(("127.0.0.1", port), timeout=2).close()  # raises unless TCP listens
            udp = server._udp.get_extra_info("sockname")[1]  # type: ignore[union-attr]
            return port, udp, len(asked)
        finally:
            await server.stop()

    try:
        port, udp, tries = asyncio.run(run())
    finally:
        held.close()
    # two tries, or more when the system's next pick was held for TCP too (other tests bind beside this one)
    assert 2 <= tries <= BIND_TRIES and port != taken and udp == port
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # the first UDP socket was closed, not kept
    probe.bind(("127.0.0.1", taken))
    probe.close()


def test_a_port_given_whose_tcp_is_taken_fails_and_leaves_nothing_bound():
    held = held_tcp_port()
    taken = held.getsockname()[1]

    async def run() -> None:
        await DnsServer(None, Zone(dns.name.from_text("semreg.")), f"127.0.0.1:{taken}").start()  # type: ignore[arg-type]

    try:
        with pytest.raises(OSError):
            asyncio.run(run())
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        probe.bind(("127.0.0.1", taken))
        probe.close()
    finally:
        held.close()


def test_a_node_whose_dns_port_is_taken_fails_to_start_and_closes_what_it_opened(tmp_path):
    from support.inprocess import InProcess

    held = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    held.bind(("127.0.0.1", 0))
    try:
        srv = InProcess(dns=f"127.0.0.1:{held.getsockname()[1]}", data_dir=tmp_path / "data")
        with pytest.raises(OSError):
            srv.start()
        assert not srv._thread.is_alive()  # and the node's threads ended: the suite's fixture checks none is left
    finally:
        held.close()
