"""DNS over a raw TCP socket, for tests of what the DNS listener does with a connection: a message framed by
its two-byte length (RFC 1035 4.2.2), sent, and its answer read whole."""
from __future__ import annotations

import socket
import struct


def read_exactly(s: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = s.recv(size - len(data))
        assert chunk, "the server closed the connection"
        data += chunk
    return data


def exchange(s: socket.socket, query: bytes) -> bytes:
    """The answer's bytes to `query`'s, over the connection `s`."""
    s.sendall(struct.pack("!H", len(query)) + query)
    (size,) = struct.unpack("!H", read_exactly(s, 2))
    return read_exactly(s, size)
