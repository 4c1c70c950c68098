"""The loopback ports the local peers and clusters are given: free, and never the same number twice."""
from __future__ import annotations

import socket

from semreg.bench.peers import free_port, free_ports


def test_ports_asked_for_together_are_distinct_and_free():
    ports = free_ports(40)
    assert len(set(ports)) == 40
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # raises if something holds it


def test_a_process_never_gets_a_port_it_was_given_before():
    """The system may offer a closed probe's number again at once; a node given one number for its public
    and its cluster listener fails to start, so a number given out is never given again."""
    given = [free_port() for _ in range(300)] + free_ports(2)
    assert len(set(given)) == len(given)
