"""JSON bytes that are kept (an instance's rendered view, a copy from another member): exactly their size.

orjson (3.13) returns a bytes object that keeps the whole buffer it serialised into: a 730-byte instance
view holds ~4-8 KB of memory for as long as it lives. 100,000 kept outputs of 260 bytes took 393 MiB RSS;
copied once, 29 MiB. A copy costs well under a microsecond, paid once per kept object; answers made of many
pieces are joined (`b"".join`), which sizes them exactly already.
"""
from __future__ import annotations

from typing import Any

import orjson


def dumps(value: Any) -> bytes:
    """`orjson.dumps(value)`, in a bytes object of exactly its length."""
    return bytes(memoryview(orjson.dumps(value)))
