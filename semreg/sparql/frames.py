"""Messages between the server and its query processes: pickled values, each behind an 8-byte length.

Both ends are semreg's own processes, connected through a Unix socket in a directory only the server's
user can open, and the first message of every connection carries a secret the server handed out: the
pickle stream never comes from anyone else.

- `encode(message)` makes one frame;
- `FrameBuffer` cuts frames out of a byte stream (the asyncio side, in the server);
- `read_message` / `write_message` are the blocking ends (the query processes, one thread each).
"""
from __future__ import annotations

import pickle
import socket
import struct
from typing import Any

HEADER = struct.Struct("!Q")


def encode(message: Any) -> bytes:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(payload)) + payload


class FrameBuffer:
    """Bytes in, whole messages out: `feed(data)` returns the messages `data` completed."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        buffer = self._buffer
        buffer += data
        out = []
        start = 0
        size = len(buffer)
        while size - start >= HEADER.size:
            (length,) = HEADER.unpack_from(buffer, start)
            end = start + HEADER.size + length
            if end > size:
                break
            out.append(pickle.loads(memoryview(buffer)[start + HEADER.size:end]))
            start = end
        if start:
            del buffer[:start]
        return out


def read_message(sock: socket.socket) -> Any:
    """The next message, or `EOFError` when the other end has gone."""
    (length,) = HEADER.unpack(_read_exactly(sock, HEADER.size))
    return pickle.loads(_read_exactly(sock, length))


def write_message(sock: socket.socket, message: Any) -> None:
    sock.sendall(encode(message))


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(min(n - len(chunks), 1 << 20))
        if not chunk:
            raise EOFError("the connection closed")
        chunks += chunk
    return bytes(chunks)
