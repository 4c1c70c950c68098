"""What the replica feed last published of each instance, kept packed for its snapshots.

The feed keeps every shown instance's view so that a starting query template can be given a whole snapshot
between two passes (`semreg.sparql.feed`). A ring member serving SPARQL shows every instance of the ring, so
this is ~0.75 KB of JSON for each of them. Views are alike (the same keys, the same IRIs' namespaces, the same
kinds of values), which deflate's preset dictionary turns to account: each view is deflated on its own
against a dictionary made of the first views seen (`zlib`, level 6), ~85 bytes for a view of 3 tags, ~8 µs to
pack and ~2 µs to unpack (a snapshot of a million unpacks in ~2 s, beside writing its N-Quads). The
dictionary is chosen once: a view unlike the first ones still packs, less well, and comes back exact.

Until `SAMPLE` views were seen they are kept as their JSON (`{` first, where a deflate stream starts with
`x`), then packed with the rest. Used from one thread (the feed's).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import orjson

SAMPLE = 4  # views the dictionary is made of (more packs ~10 % smaller, and slower: it is read for each view)
LEVEL = 6


class PackedViews:
    def __init__(self) -> None:
        self._views: dict[str, bytes] = {}
        self._dictionary: bytes | None = None

    def __len__(self) -> int:
        return len(self._views)

    def __contains__(self, instance_id: object) -> bool:
        return instance_id in self._views

    def put(self, instance_id: str, view: dict[str, Any]) -> None:
        text = orjson.dumps(view)
        if self._dictionary is None:
            self._views[instance_id] = text
            if len(self._views) >= SAMPLE:
                self._dictionary = b"".join(list(self._views.values())[:SAMPLE])
                for iid, raw in self._views.items():
                    self._views[iid] = self._pack(raw)
            return
        self._views[instance_id] = self._pack(text)

    def pop(self, instance_id: str) -> None:
        self._views.pop(instance_id, None)

    def get(self, instance_id: str) -> dict[str, Any] | None:
        packed = self._views.get(instance_id)
        return None if packed is None else self._unpack(packed)

    def values(self) -> Iterator[dict[str, Any]]:
        """Every view, unpacked one at a time."""
        for packed in list(self._views.values()):
            yield self._unpack(packed)

    def _pack(self, text: bytes) -> bytes:
        packer = zlib.compressobj(LEVEL, zdict=self._dictionary or b"")
        return packer.compress(text) + packer.flush()

    def _unpack(self, packed: bytes) -> dict[str, Any]:
        if packed[:1] == b"{":
            return orjson.loads(packed)
        unpacker = zlib.decompressobj(zdict=self._dictionary or b"")
        view: dict[str, Any] = orjson.loads(unpacker.decompress(packed) + unpacker.flush())
        return view
