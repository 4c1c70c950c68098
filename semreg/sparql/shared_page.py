"""The page the server shares with its query processes: what a query must have seen, and what each
process is evaluating.

A file in the pool's private directory, mapped by the server and by the template (its forks inherit the
mapping). The server writes the header synchronously, before it acknowledges the write that moved it;
a process compares it with what it has taken in before every query, so a write acknowledged before a
query is visible to it without asking the server. Each process writes its own slot, which the server
reads to count running queries and to know, when a process is gone, whether it died evaluating.

    header   requested  q   the replica feed's last ticket: every change acknowledged is at or below it
             prefixes   q   the prefix map's version
    slot i   seq        q   odd while a query is evaluated (each query moves it by two)
             conn       q   the connection it answers (0: a query the server sent)
             deadline   d   on time.monotonic(), which every process on the machine shares
"""
from __future__ import annotations

import mmap
import os
import struct
from typing import NamedTuple

HEADER = struct.Struct("<qq")
SLOT = struct.Struct("<qqd")
SLOTS_AT = 64
SLOT_BYTES = 32


class Evaluating(NamedTuple):
    seq: int
    conn: int
    deadline: float


class SharedPage:
    def __init__(self, path: str, slots: int, create: bool = False) -> None:
        size = SLOTS_AT + SLOT_BYTES * slots
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, size)
            self.map = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        self.slots = slots

    # -- the header (written by the server) ---------------------------------------------------------
    def publish(self, requested: int | None = None, prefixes: int | None = None) -> None:
        old_requested, old_prefixes = HEADER.unpack_from(self.map, 0)
        HEADER.pack_into(self.map, 0, old_requested if requested is None else requested,
                         old_prefixes if prefixes is None else prefixes)

    def wanted(self) -> tuple[int, int]:
        """(requested ticket, prefix version): what the next query must have taken in."""
        requested, prefixes = HEADER.unpack_from(self.map, 0)
        return requested, prefixes

    # -- the slots (each written by its process) ----------------------------------------------------
    def begin(self, slot: int, conn: int, deadline: float) -> int:
        at = SLOTS_AT + SLOT_BYTES * slot
        seq = SLOT.unpack_from(self.map, at)[0]
        seq += 2 if seq % 2 else 1
        SLOT.pack_into(self.map, at, seq, conn, deadline)
        return seq

    def end(self, slot: int) -> None:
        at = SLOTS_AT + SLOT_BYTES * slot
        seq, conn, deadline = SLOT.unpack_from(self.map, at)
        if seq % 2:
            SLOT.pack_into(self.map, at, seq + 1, conn, deadline)

    def evaluating(self, slot: int) -> Evaluating | None:
        seq, conn, deadline = SLOT.unpack_from(self.map, SLOTS_AT + SLOT_BYTES * slot)
        return Evaluating(seq, conn, deadline) if seq % 2 else None

    def clear(self, slot: int) -> None:
        SLOT.pack_into(self.map, SLOTS_AT + SLOT_BYTES * slot, 0, 0, 0.0)

    def close(self) -> None:
        self.map.close()
