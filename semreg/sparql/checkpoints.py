"""The query replica on disk: one store the template writes, and checkpoints of it the workers read.

A copy of every visible graph in each query process's memory (`semreg.sparql.replica`) costs ~12 KiB an
instance on every member that serves SPARQL. On disk it costs none of that: the template
(`semreg.sparql.worker`) keeps the replica in a pyoxigraph store of its own under `root/live`, applies the
same snapshot and changes to it, and on the server's request cuts a checkpoint (`Store.backup`: RocksDB
flushes its memtables and hard-links the immutable files, milliseconds) under `root/checkpoints/{seq}`. A
worker opens a checkpoint read-only (`Store.read_only`; pyoxigraph offers no reader beside a writer in
another process, and a read-only open of a store being written is undefined), so what it answers from
never changes under a query.

Read-your-writes: a query waits for the ticket the page says was acknowledged before it arrived; a worker
behind it asks the server (`("flush", ticket)`), which has a checkpoint cut once the stream has reached
that ticket, one at a time, each for every worker waiting then (`Checkpoints`). Under writes and queries
together a checkpoint is cut per query at most, and per cut while one is being cut.

The server removes a checkpoint once it is not the newest and no worker holds it open or was sent it. The
directory is the replica's alone and rebuilt from a snapshot whenever a template starts; a node's start
removes what a previous run left.
"""
from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("semreg.sparql_checkpoints")

FLUSH_BYTES = 8 << 20  # changes applied between two flushes of the template's memtables (when no cut comes)


class Paths:
    """Where the replica and its checkpoints live under `root`."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.live = self.root / "live"
        self.checkpoints = self.root / "checkpoints"

    def checkpoint(self, seq: int) -> Path:
        return self.checkpoints / str(seq)


class Checkpoints:
    """Which checkpoints exist, which worker holds which, and which worker waits for a newer one.

    `cut(seq)` asks the template for a checkpoint (the caller sends what the template holds first);
    `send(worker_id, seq, path, ticket)` hands one to a worker; `remove(path)` deletes one (off the loop)."""

    def __init__(self, paths: Paths, cut: Callable[[int], None], send: Callable[[int, int, str, int], None],
                 remove: Callable[[Path], None]) -> None:
        self.paths = paths
        self._cut = cut
        self._send = send
        self._remove = remove
        self.newest: tuple[int, int] | None = None  # (seq, ticket)
        self.cutting: int | None = None  # the seq being cut
        self.published = 0  # the last ticket the stream carried to the template
        self.waiting: dict[int, int] = {}  # worker id → the ticket its query waits for
        self.held: dict[int, set[int]] = {}  # worker id → the checkpoints it has open or was sent
        self.cuts = 0
        self._next_seq = 1
        self._existing: set[int] = set()

    def reset(self) -> None:
        """A template starts anew (none yet, or its predecessor died with its workers): nothing is held, and
        what exists on disk goes once nothing holds it."""
        self.newest, self.cutting = None, None
        self.waiting.clear()
        self.held.clear()
        self.published = 0
        self._prune()

    def first(self) -> int:
        """The seq of the checkpoint a template cuts right after its snapshot (before it forks)."""
        seq = self._take()
        self.cutting = seq
        return seq

    def ticket(self, ticket: int) -> None:
        """The stream carried `ticket` to the template: a worker waiting for it can have a checkpoint now."""
        self.published = max(self.published, ticket)
        self._maybe_cut()

    def forked(self, worker_id: int) -> None:
        """A worker is forked: it opens the template's newest checkpoint, at most the one being cut."""
        held = {seq for seq in (self.newest[0] if self.newest else None, self.cutting) if seq is not None}
        self.held[worker_id] = held

    def want(self, worker_id: int, ticket: int) -> None:
        """A worker's query waits for every change up to `ticket`."""
        newest = self.newest
        if newest is not None and newest[1] >= ticket and newest[0] not in self.held.get(worker_id, ()):
            self._give(worker_id, *newest)
            return
        if newest is not None and newest[1] >= ticket:
            return  # it holds it already (sent, not yet opened)
        self.waiting[worker_id] = max(self.waiting.get(worker_id, 0), ticket)
        self._maybe_cut()

    def cut_done(self, seq: int, ticket: int) -> None:
        """The template cut checkpoint `seq`, holding every change up to `ticket`."""
        if seq != self.cutting:
            self._existing.add(seq)  # from a template since replaced: removed below
            self._prune()
            return
        self.cutting = None
        self.cuts += 1
        self._existing.add(seq)
        self.newest = (seq, ticket)
        for worker_id, wanted in list(self.waiting.items()):
            if wanted <= ticket:
                del self.waiting[worker_id]
                self._give(worker_id, seq, ticket)
        self._prune()
        self._maybe_cut()

    def opened(self, worker_id: int, seq: int) -> None:
        """A worker opened checkpoint `seq` (and closed the one it had)."""
        held = self.held.setdefault(worker_id, set())
        held.difference_update({s for s in held if s < seq})
        held.add(seq)
        self._prune()

    def gone(self, worker_id: int) -> None:
        self.waiting.pop(worker_id, None)
        self.held.pop(worker_id, None)
        self._prune()

    # -- inside ---------------------------------------------------------------------------------------
    def _take(self) -> int:
        seq = self._next_seq
        self._next_seq += 1
        return seq

    def _give(self, worker_id: int, seq: int, ticket: int) -> None:
        self.held.setdefault(worker_id, set()).add(seq)
        self._send(worker_id, seq, str(self.paths.checkpoint(seq)), ticket)

    def _maybe_cut(self) -> None:
        if self.cutting is not None or not self.waiting or self.newest is None:
            return  # one at a time; none before the template's first (which a fork needs anyway)
        if min(self.waiting.values()) > self.published:
            return  # the stream has not carried what they wait for yet
        self.cutting = self._take()
        self._cut(self.cutting)

    def _prune(self) -> None:
        keep = set().union(*self.held.values()) if self.held else set()
        if self.newest is not None:
            keep.add(self.newest[0])
        if self.cutting is not None:
            keep.add(self.cutting)
        for seq in sorted(self._existing - keep):
            self._existing.discard(seq)
            self._remove(self.paths.checkpoint(seq))

    def clear_disk(self) -> None:
        """Remove what a previous run left under the root (at the node's start, before any template)."""
        shutil.rmtree(self.paths.root, ignore_errors=True)
