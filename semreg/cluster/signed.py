"""Records in etcd that only a holder of the cluster secret can write: `SignedKV` wraps the cluster's `KV`.

Every value a node puts is stored as `MAC \\n value`, where MAC is the hex HMAC-SHA256 of the key and the value
under a key derived from the cluster secret (HMAC of a fixed label, so the secret itself is never the MAC
key). The key is part of what is signed, so a record cannot be moved to another key (a member's record under
another id, an ontology's under another name). Reads and watches pass on only what verifies; anything else
(unsigned, signed with another secret, truncated) is dropped and logged with its key, so write access to
etcd alone cannot add a member, publish or delete an ontology, or set a prefix.

What signing cannot cover: a deletion carries no value (etcd deletes a key, or a lease takes it), and an
older signed value can be written back under its own key. See docs/how-to/tokens-and-tls.md, Security.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import AsyncIterator

from semreg.cluster.kv import DELETE, KV, Event

log = logging.getLogger("semreg.cluster")

LABEL = b"semreg etcd record signature v1"
MAC_CHARS = 64


def record_key(secret: str) -> bytes:
    """The MAC key for etcd records, derived from the cluster secret."""
    return hmac.new(secret.encode(), LABEL, hashlib.sha256).digest()


def _mac(key: bytes, name: str, value: bytes) -> bytes:
    return hmac.new(key, name.encode() + b"\0" + value, hashlib.sha256).hexdigest().encode()


def sign(key: bytes, name: str, value: bytes) -> bytes:
    return _mac(key, name, value) + b"\n" + value


def verify(key: bytes, name: str, stored: bytes) -> bytes | None:
    """The value `stored` under `name` carries, if its MAC holds; else None."""
    if len(stored) <= MAC_CHARS or stored[MAC_CHARS:MAC_CHARS + 1] != b"\n":
        return None
    value = stored[MAC_CHARS + 1:]
    return value if hmac.compare_digest(stored[:MAC_CHARS], _mac(key, name, value)) else None


class SignedKV:
    """`inner` with every value signed on the way in and checked on the way out."""

    def __init__(self, inner: KV, secret: str) -> None:
        self.inner = inner
        self._key = record_key(secret)
        self.refused = 0

    def _checked(self, name: str, stored: bytes) -> bytes | None:
        value = verify(self._key, name, stored)
        if value is None:
            self.refused += 1
            log.warning("ignored an etcd record that is not signed with the cluster secret",
                        extra={"key": name, "bytes": len(stored)})
        return value

    async def grant(self, ttl_s: int) -> int:
        return await self.inner.grant(ttl_s)

    async def keepalive(self, lease: int) -> bool:
        return await self.inner.keepalive(lease)

    async def revoke(self, lease: int) -> None:
        await self.inner.revoke(lease)

    async def put(self, key: str, value: bytes, lease: int | None = None) -> int:
        return await self.inner.put(key, sign(self._key, key, value), lease)

    async def create(self, key: str, value: bytes, lease: int | None = None) -> bool:
        return await self.inner.create(key, sign(self._key, key, value), lease)

    async def delete(self, key: str) -> int:
        return await self.inner.delete(key)

    async def get_prefix(self, prefix: str) -> tuple[int, list[tuple[str, bytes]]]:
        revision, kvs = await self.inner.get_prefix(prefix)
        out = []
        for key, stored in kvs:
            value = self._checked(key, stored)
            if value is not None:
                out.append((key, value))
        return revision, out

    async def watch_prefix(self, prefix: str, start_revision: int) -> AsyncIterator[Event]:
        events = self.inner.watch_prefix(prefix, start_revision)
        try:
            async for event in events:
                if event.kind == DELETE:
                    yield event
                    continue
                value = self._checked(event.key, event.value)
                if value is not None:
                    yield Event(event.kind, event.key, value, event.revision)
        finally:  # the inner watch ends with this one, now (its etcd watch cancelled), not when collected
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()

    async def close(self) -> None:
        await self.inner.close()
