"""Raw HTTP/1.1 over TCP for tests of what the server does with bytes: requests written as bytes,
responses read by the client framing, and the case study's instances loaded."""
from __future__ import annotations

import socket

import httpx

from semreg.http1.client import Head, parse_head


def load(url: str) -> None:
    batch = [{"id": f"svc-{k}", "service": "svc", "address": "127.0.0.1", "port": 9000 + k, "ttl": 0,
              "tags": [f"ex:Livro ex:temUmGenero ex:Terror{t}" for t in range(3)]} for k in range(20)]
    with httpx.Client(base_url=url, timeout=30) as http:
        assert http.post("/v1/instances/batch", json={"instances": batch}).status_code == 200


class Raw:
    """One TCP connection, requests written as bytes and responses read by the client framing."""

    def __init__(self, port: int, timeout_s: float = 30.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self.buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> bool:
        chunk = self.sock.recv(1 << 16)
        self.buffer += chunk
        return bool(chunk)

    def response(self) -> tuple[Head, bytes]:
        while b"\r\n\r\n" not in self.buffer:
            if not self._fill():
                raise ConnectionError(f"closed before a response; got {self.buffer[:200]!r}")
        raw, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        head = parse_head(raw)
        length = head.length or 0
        while len(self.buffer) < length:
            if not self._fill():
                raise ConnectionError("closed in the middle of a body")
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return head, body

    def closed(self, timeout_s: float = 10.0) -> bool:
        """Whether the server ends the connection within `timeout_s`: end of input (or a reset) after
        whatever it still sends; False if it keeps the connection open that long."""
        self.sock.settimeout(timeout_s)
        try:
            while self._fill():
                pass  # a response still on its way; the end follows it
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
        return True

    def close(self) -> None:
        self.sock.close()


def get(path: str, *headers: str) -> bytes:
    return ("\r\n".join([f"GET {path} HTTP/1.1", "Host: test", *headers]) + "\r\n\r\n").encode()


def post(path: str, body: bytes, content_type: str | None, *headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: test", f"Content-Length: {len(body)}", *headers]
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def q(query: str) -> str:
    return "/sparql?" + httpx.QueryParams({"query": query}).__str__()
