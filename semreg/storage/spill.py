"""Items put aside as they come and read back later, in order: in memory up to a few MiB, then in a
temporary file, so what a restore holds while it reads a backup does not grow with the backup.

Each item is one JSON line (orjson). `Spill` is written, then read (`iter`), as many times as needed, by one
thread at a time; `close()` removes the file.
"""
from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import orjson

T = TypeVar("T")
MEMORY_BYTES = 4 * 1024 * 1024  # kept in memory up to this, then on disk


class Spill(Generic[T]):
    """JSON-able items, written with `add`, read back with `iter` as `decode(item)`."""

    def __init__(self, decode: Callable[[Any], T], memory_bytes: int = MEMORY_BYTES) -> None:
        self._decode = decode
        self._file = tempfile.SpooledTemporaryFile(memory_bytes)
        self._count = 0
        self._reading = False

    def add(self, item: Any) -> None:
        if self._reading:
            self._file.seek(0, 2)
            self._reading = False
        self._file.write(orjson.dumps(item) + b"\n")
        self._count += 1

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[T]:
        self._reading = True
        self._file.seek(0)
        decode = self._decode
        for line in self._file:
            yield decode(orjson.loads(line))

    def close(self) -> None:
        self._file.close()
