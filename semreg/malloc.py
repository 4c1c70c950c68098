"""Giving freed memory back to the system (glibc's malloc; elsewhere these do nothing).

glibc keeps what a process frees in its arenas, one or more per thread that ever allocated under
contention, and returns it to the system only from the top of each heap. A node's threads (the event
loop, its workers, the store's writer, the RDF writer, the replica feed, RocksDB's own) free in the middle
of long-lived data, so freed memory stayed resident: a node that had registered 100,000 instances and
written their RDF held 3.09 GB RSS, of which `malloc_trim(0)` gave back 1.67 GB at once. So:

- `cap_arenas()` at start, before threads start: fewer arenas, less memory stranded in them;
- `release()` after large passes and at a steady interval: `malloc_trim(0)` returns every free page of
  every arena (it runs without Python's lock, through ctypes);
- `usage()` for `/metrics`: what malloc has handed out and what it keeps free (`mallinfo2`), so that a
  node's growth can be told apart: Python's own objects (`sys.getallocatedblocks`, in pymalloc's arenas,
  which malloc does not see below 512 bytes) against the rest (the store's RocksDB, large buffers).
  `mallinfo2` walks every free chunk of every arena, each arena locked: a `/metrics` read cost the event
  loop ~7.5 ms of CPU, most of it `mallinfo2`, in a node just past 60,000 registrations of 3 tags (its RDF
  at rest and its SPARQL replica on disk), and the at-rest bench reads `/metrics` up to ten times a second
  for as long as the RDF lags; so `/metrics` reads it through `Recent`, at most once a second, and on a worker
  thread: in the noisy-neighbour bench (100,000 instances restored, batches made and removed) the event loop was
  found inside `mallinfo2` by 5 stalls of 90-150 ms in two runs, each a `/metrics` scrape.
"""
from __future__ import annotations

import ctypes
import functools
import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("semreg.malloc")

M_ARENA_MAX = -8  # mallopt's parameter (glibc malloc.h)
ARENAS = 4  # per process; glibc's default is 8 per core


@functools.cache
def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        # the symbols the process already has (its libc among them): `find_library` would run `ldconfig -p` in a
        # child process, from whichever thread first asks
        libc = ctypes.CDLL(None)
        libc.malloc_trim  # noqa: B018  (musl has no malloc_trim: nothing to do there)
        libc.mallopt  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


def supported() -> bool:
    """Whether this process's malloc is glibc's (elsewhere `cap_arenas` and `release` do nothing)."""
    return _libc() is not None


def cap_arenas(arenas: int = ARENAS) -> bool:
    """At most `arenas` malloc arenas in this process (call before starting threads); False where unsupported."""
    libc = _libc()
    return bool(libc is not None and libc.mallopt(M_ARENA_MAX, arenas) == 1)


def release() -> bool:
    """Return every free page of the heap to the system; True when some memory was returned."""
    libc = _libc()
    return bool(libc is not None and libc.malloc_trim(0) == 1)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                      "fsmblks", "uordblks", "fordblks", "keepcost")]


@dataclass(frozen=True)
class Usage:
    in_use: int  # bytes handed out by malloc and not freed (mapped chunks included)
    free_kept: int  # bytes freed but kept in its arenas


def usage() -> Usage | None:
    """glibc's account of the heap (`mallinfo2`, glibc 2.33 on), or None elsewhere."""
    libc = _libc()
    info = getattr(libc, "mallinfo2", None) if libc is not None else None
    if info is None:
        return None
    info.restype = _MallInfo2
    got = info()
    return Usage(in_use=got.uordblks + got.hblkhd, free_kept=got.fordblks)


class Recent:
    """`usage()` read at most once every `every_s`: a caller within that of the last reading gets it again."""

    def __init__(self, every_s: float = 1.0, monotonic: Callable[[], float] = time.monotonic,
                 read: Callable[[], Usage | None] = usage) -> None:
        self.every_s = every_s
        self._monotonic = monotonic
        self._read = read
        self._last: tuple[float, Usage | None] | None = None
        self._lock = threading.Lock()

    def __call__(self) -> Usage | None:
        now = self._monotonic()
        with self._lock:
            if self._last is None or now - self._last[0] >= self.every_s:
                self._last = (now, self._read())
            return self._last[1]

    def due(self) -> bool:
        """Whether a call would read the heap again (nothing read yet, or the last reading `every_s` old)."""
        last = self._last
        return last is None or self._monotonic() - last[0] >= self.every_s

    def cached(self) -> Usage | None:
        """The last reading, never a new one (None before the first)."""
        last = self._last
        return last[1] if last is not None else None
