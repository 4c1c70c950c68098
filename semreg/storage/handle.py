"""The pyoxigraph store a `Store` works on, and opening it again to give RocksDB's block caches back.

pyoxigraph opens RocksDB with block caches a caller cannot size: 128 MiB (LRU) for the strings of the
store (`id2str`) and 32 MiB shared by the quad indexes. Every string read back from disk (a record replaced
or removed, the RDF writer's updates) leaves its block there, and the blocks of tables that compaction
has since deleted stay until evicted. Under steady churn (ten registrations and removals a second) a
node's C heap grew ~3.4 MiB a minute towards those 160 MiB; a script of pyoxigraph alone that writes
400,000 literals of 300 characters, flushes and reads them back goes from 7.9 to 155 MiB of heap in use,
and to 2.5 MiB once the store is closed. Closing is the only way to empty them, so the RDF writer opens
the store again from time to time (`AtRest`, after a flush).

Closing needs every user of the old store gone, or RocksDB keeps it open and refuses to open it twice.
Writers hold the `Store`'s lock, the RDF writer is the thread that reopens, and the other readers
(`reading()`) are counted: a reopen while one iterates does not wait for it; it is skipped and tried later.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import logging
import shutil
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pyoxigraph as ox

FREE_BYTES = 64 << 20  # free disk below which the store is not closed (opening writes a manifest, options, a log)
OPEN_RETRY_S = 0.05  # the first pause before opening again after a failure, doubled up to RETRY_MAX_S
RETRY_MAX_S = 30.0
QUIET_ATTEMPTS = 4  # failures before each is logged as an error (a collected iterator usually lets go first)
log = logging.getLogger("semreg.store")
_T = TypeVar("_T")


class Handle:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.ox = ox.Store() if path is None else ox.Store(str(path))
        self._gate = threading.Condition()
        self._readers = 0
        self._closing = False

    @contextlib.contextmanager
    def reading(self) -> Iterator[ox.Store]:
        """The store, not closed under the caller while it reads (for readers that hold no lock)."""
        with self._gate:
            self._gate.wait_for(lambda: not self._closing)
            self._readers += 1
        try:
            yield self.ox
        finally:
            with self._gate:
                self._readers -= 1

    def reopen(self, let_go: Callable[[], None] = lambda: None) -> bool:
        """Close the store and open it again; the caller holds writers off, and `let_go` drops the caller's
        own references once no reader is left. False when that cannot be done now: a store in memory
        (closing it would lose it), a reader iterating, too little free disk for RocksDB's new files, or
        the store referenced elsewhere (closing would then not happen)."""
        if self.path is None or shutil.disk_usage(self.path).free < FREE_BYTES:
            return False
        with self._gate:
            if self._readers:
                return False
            self._closing = True
        try:
            let_go()
            if sys.getrefcount(self.ox) > 2:  # this attribute and the call's argument
                return False
            # Closing flushes RocksDB's memtables inside the store's destructor, which runs with Python's lock
            # held: every thread of the process stood still meanwhile (4.5 s for 1.2 million quads written,
            # 10-15 s on a loaded ring member, whose membership lease lapsed). `flush` does the same work with
            # the lock let go, and the close that follows found nothing left to write (37 ms).
            self.ox.flush()
            self.ox = None  # type: ignore[assignment]  # the last reference: RocksDB closes here
            self.ox = _open_again(self.path)
            return True
        finally:
            with self._gate:
                self._closing = False
                self._gate.notify_all()


def _open_again(path: Path) -> ox.Store:
    """The store at `path`, opened again however long that takes: a closed store that cannot be opened
    leaves writers waiting (reads are served from memory) rather than failing them."""
    pause = threading.Event()
    attempt = 0
    while True:
        try:
            return ox.Store(str(path))
        except (OSError, RuntimeError, ValueError) as exc:  # what pyoxigraph raises on open (`Store.__init__`)
            attempt += 1
            if attempt >= QUIET_ATTEMPTS:
                log.error("the data directory's store could not be opened again; writes wait, retrying",
                          extra={"path": str(path), "error": str(exc), "attempt": attempt})
            gc.collect()  # an iterator in a reference cycle may still hold the closed store's files
            pause.wait(min(RETRY_MAX_S, OPEN_RETRY_S * 2 ** min(attempt, 10)))


def reads(method: Callable[..., _T]) -> Callable[..., _T]:
    """A method of an object keeping its `Handle` as `_handle` that reads the store without a lock: the
    store is not closed under it."""
    @functools.wraps(method)
    def reading(self: Any, *args: Any, **kwargs: Any) -> _T:
        with self._handle.reading():
            return method(self, *args, **kwargs)
    return reading
