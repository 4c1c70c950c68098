"""A query process's end of its socket to the server (`semreg.sparql.connections`): pickled frames
(`semreg.sparql.frames`) both ways, and the descriptors of handed-over connections coming in.

Messages from the server: `("conn", id, data)` with the connection's descriptor; `("changes", ...)` and
`("ticket", n)` (a copy in memory) or `("checkpoint", seq, path, ticket)` (on disk), `("prefixes", version, map)`,
`("gate", Gate)`, `("query", qid, job)`, `("answer", seq, error)`, `("retire",)`, `("exit",)`. To the server:
`("back", [(id, data)], reason)`, `("closed", [id])`, `("long", conn, seq, deadline)`, `("flush", ticket)`,
`("opened", seq)`, `("ask", seq, key)`,
`("failed", seq, (client, fingerprint, reason, route))`, `("metrics", [...])`, `("result" | "error", qid, ...)`.
"""
from __future__ import annotations

import array
import collections
import select
import socket
import threading
from typing import Any

from semreg.sparql.frames import FrameBuffer, encode

MAX_FDS = 64


class Channel:
    """The process's end of its socket to the server: pickled frames both ways, descriptors inward."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.frames = FrameBuffer()
        self.fds: collections.deque[int] = collections.deque()
        self.inbox: collections.deque[Any] = collections.deque()
        self.lock = threading.Lock()  # two threads send

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: Any) -> None:
        with self.lock:
            self.sock.sendall(encode(message))

    def receive(self, timeout: float | None = None) -> bool:
        """Read what the server sent (waiting up to `timeout`); False once it has gone."""
        if timeout is not None:
            ready, _, _ = select.select([self.sock], [], [], max(0.0, timeout))
            if not ready:
                return True
        try:
            data, ancillary, _, _ = self.sock.recvmsg(1 << 18, socket.CMSG_SPACE(MAX_FDS * 4))
        except (ConnectionError, OSError):
            return False
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
                self.fds.extend(fds)
        if not data:
            return False
        self.inbox.extend(self.frames.feed(data))
        return True
