"""One node's connection to a shared `MemoryKV`, with failures of its own.

`cut()` cuts this node off from etcd while the others still reach it (its calls fail and its watches
end; its lease lapses for everyone else); `raises[call]` makes the next such call raise what etcd's
client never should; `hold(call)` makes such calls wait until `release(call)`; `end_watches(exc)` ends the
watches with `exc` (a compacted revision, a cancelled watch); `mute_watches()` makes them go quiet without
an error, as a stream on a dead connection can.
"""
from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator

from semreg.cluster.kv import Event, KVUnavailable, MemoryKV


class FaultyKV:
    def __init__(self, kv: MemoryKV) -> None:
        self.kv = kv
        self.is_cut = False
        self.raises: dict[str, BaseException] = {}
        self.calls: Counter[str] = Counter()
        self._held: dict[str, asyncio.Event] = {}
        self._end = asyncio.Event()
        self._end_with: BaseException | None = None
        self.muted = False

    # -- failure modes -------------------------------------------------------------------------------
    def cut(self) -> None:
        self.is_cut = True
        self.end_watches(KVUnavailable("cut off from etcd"))

    def mend(self) -> None:
        self.is_cut = False

    def hold(self, call: str) -> None:
        self._held[call] = asyncio.Event()

    def release(self, call: str) -> None:
        self._held.pop(call).set()

    def end_watches(self, exc: BaseException) -> None:
        self._end_with = exc
        self._end.set()
        self._end = asyncio.Event()

    def mute_watches(self) -> None:
        self.muted = True

    async def _enter(self, call: str) -> None:
        self.calls[call] += 1
        if self.is_cut:
            raise KVUnavailable("cut off from etcd")
        if call in self.raises:
            raise self.raises.pop(call)
        if call in self._held:
            await self._held[call].wait()

    # -- the KV protocol -----------------------------------------------------------------------------
    async def grant(self, ttl_s: int) -> int:
        await self._enter("grant")
        return await self.kv.grant(ttl_s)

    async def keepalive(self, lease: int) -> bool:
        await self._enter("keepalive")
        return await self.kv.keepalive(lease)

    async def revoke(self, lease: int) -> None:
        await self._enter("revoke")
        await self.kv.revoke(lease)

    async def put(self, key: str, value: bytes, lease: int | None = None) -> int:
        await self._enter("put")
        return await self.kv.put(key, value, lease)

    async def create(self, key: str, value: bytes, lease: int | None = None) -> bool:
        await self._enter("create")
        return await self.kv.create(key, value, lease)

    async def delete(self, key: str) -> int:
        await self._enter("delete")
        return await self.kv.delete(key)

    async def get_prefix(self, prefix: str) -> tuple[int, list[tuple[str, bytes]]]:
        await self._enter("get_prefix")
        return await self.kv.get_prefix(prefix)

    async def watch_prefix(self, prefix: str, start_revision: int) -> AsyncIterator[Event]:
        await self._enter("watch_prefix")
        end = self._end
        inner = self.kv.watch_prefix(prefix, start_revision).__aiter__()
        try:
            while True:
                following = asyncio.ensure_future(inner.__anext__())
                await first_of(following, end)
                if following.cancelled():
                    assert self._end_with is not None
                    raise self._end_with
                event = following.result()
                if not self.muted:
                    yield event
        finally:
            await inner.aclose()

    async def close(self) -> None:
        return None



async def first_of(following: asyncio.Future, end: asyncio.Event) -> None:
    """Wait for `following` or `end`, whichever comes first; `following` is cancelled (and done) if `end`
    came first, or if the caller was cancelled."""
    ending = asyncio.ensure_future(end.wait())
    try:
        await asyncio.wait((following, ending), return_when=asyncio.FIRST_COMPLETED)
    finally:
        ending.cancel()
        if not following.done():
            following.cancel()
            await asyncio.wait((following,))
