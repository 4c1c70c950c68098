"""A data directory's tables read in order once at start-up, so that what start-up reads next comes from memory.

Start-up reads every instance record's document back: lookups spread over the store's tables. With those
out of the page cache (after a reboot, or once the system has reclaimed them) a million records took
47 s to read, against 14 s with them cached; reading the 1.8 GB of tables in order first took 2.1 s here
(~820 MB/s). `posix_fadvise(WILLNEED)` asks for the same without reading, but the kernel had brought in a
sixth of it five seconds later.

The tables are read only when they fit in half the memory the system says is available (the page cache
is the system's, and a store larger than memory would only push out what others use). Python's lock is
let go during each read, so the event loop and the restore of the ontologies go on meanwhile.
"""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path

log = logging.getLogger("semreg.store")

CHUNK = 8 << 20  # bytes a read


def available_memory(meminfo: str) -> int | None:
    """`MemAvailable` of /proc/meminfo's text, in bytes; None when it does not say."""
    for line in meminfo.splitlines():
        if line.startswith("MemAvailable:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isdigit():
                return int(fields[1]) * 1024
    return None


def _system_available() -> int | None:
    try:
        return available_memory(Path("/proc/meminfo").read_text())
    except OSError:
        return None


def files_of(directory: Path) -> list[tuple[Path, int]]:
    """The store's tables under `directory` (`*.sst`, what the records' lookups read) with their sizes,
    largest first.

    Never any other file: RocksDB holds its `LOCK` file with a POSIX lock, which the kernel lets go as soon
    as the process closes any descriptor of that file, so reading it once let a second server open the
    same directory."""
    found = []
    for root, _, names in os.walk(directory):
        for name in names:
            if not name.endswith(".sst"):
                continue
            path = Path(root, name)
            try:
                found.append((path, path.stat().st_size))
            except OSError:
                continue  # gone meanwhile (the store compacts)
    return sorted(found, key=lambda f: -f[1])


def warm(directory: Path, available: int | None = None) -> int:
    """Read every table of `directory` once if they fit in half of `available` bytes (default: the system's
    available memory); the bytes read (0 when they did not fit or nothing says how much memory there is)."""
    started = time.perf_counter()
    files = files_of(directory)
    total = sum(size for _, size in files)
    available = _system_available() if available is None else available
    if available is None or total > available // 2:
        log.info("store files left to be read as needed", extra={
            "bytes": total, "available": available, "why": "larger than half the available memory"
            if available is not None else "the available memory is unknown"})
        return 0
    buffer = bytearray(CHUNK)
    done = 0
    for path, _ in files:
        try:
            with open(path, "rb", buffering=0) as f:
                while n := f.readinto(buffer):
                    done += n
        except OSError:
            continue  # a file compacted away meanwhile: nothing of it to read
    log.info("store files read into memory", extra={"files": len(files), "bytes": done,
                                                     "ms": round((time.perf_counter() - started) * 1000)})
    return done
