"""The replica stream to the query processes (`semreg.sparql.pool`): what the node publishes, handed to
the template and the workers, changes held back until they are needed.

`publish(item)` takes, from any thread and in order, `("snapshot", bytes)` (loaded by a new template;
everything published before it is contained in it), `("changes", [...])`, `("ticket", n)` (every change
the feed was asked for up to `n` is in the stream before it), `("prefixes", version, map)` and
`("gate", Gate)`. `drain()` hands them to the processes on the event loop. Changes and tickets wait: the
template's until writes pause (`QUIET_S`), before it forks, or every `DEFER_LIMIT_BYTES`; a worker's
until a query needs them (a query sent to it, or a worker asking with `("flush", ticket)`). A worker that
falls `DEFER_LIMIT_BYTES` behind while nobody queries it is replaced by a fresh fork. A registry with no
SPARQL traffic pays for one copy, not one per process, and not during a burst of writes. A worker that has
taken in changes worth half the snapshot (`replica.Wear`: pyoxigraph's store keeps what replaced quads
took) is replaced by a fresh fork too, as the template rebuilds its own copy at the same wear.
`note_requested(n)` and `note_prefixes(...)` write the shared page (`semreg.sparql.shared_page`) before a
write is acknowledged, so a process knows what a query must have seen without asking.

The stream reaches the processes through their life cycle (`semreg.sparql.pool_lifecycle.Processes`): it
loads the template, sends to the workers, and has a worn one replaced by a fresh fork.
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import shutil
import threading
from pathlib import Path

from semreg.sparql import replica
from semreg.sparql.checkpoints import Checkpoints, Paths
from semreg.sparql.frames import encode
from semreg.sparql.pool_lifecycle import MiB, Processes
from semreg.sparql.pool_process import Process
from semreg.sparql.service import Gate

DEFER_LIMIT_BYTES = 16 * MiB  # changes held for the template before it applies them anyway
QUIET_S = 0.5  # the template applies the changes held for it once no change came for this long


class ReplicaStream:
    """What the node publishes, on its way to the query processes; with `on_disk`, to the template alone, and
    checkpoints of its copy to the workers (`semreg.sparql.checkpoints`)."""

    def __init__(self, processes: Processes, on_disk: Paths | None = None) -> None:
        self.processes = processes
        self.checkpoints = None if on_disk is None else Checkpoints(on_disk, self._cut, self._give, self._remove)
        self.generation = 0  # bumped by every published change: the result cache's key
        self.requested = 0
        self.prefix_version = 0
        self.prefix_map: dict[str, str] = {}
        self.gate: Gate | None = None
        self._inbox: collections.deque[tuple] = collections.deque()
        self._inbox_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None  # set by `open`: the stream flows from then on
        self._snapshot_bytes = 0  # the size of the last snapshot a template loaded
        self._quiet: asyncio.TimerHandle | None = None

    @property
    def time_limit_s(self) -> float:
        return self.gate.time_limit_s if self.gate is not None else 10.0

    def open(self, loop: asyncio.AbstractEventLoop) -> None:
        """Take items from now on (drained on `loop`); the page says what was requested so far."""
        self._loop = loop
        page = self.processes.page
        if page is not None:
            page.publish(self.requested, self.prefix_version)

    def stop(self) -> None:
        if self._quiet is not None:
            self._quiet.cancel()

    def publish(self, item: tuple) -> None:
        """A stream item (see the module's doc), from any thread, in order.

        Before the pool starts changes are dropped: the snapshot it asks for at its start contains them."""
        loop = self._loop
        if loop is None:
            return
        with self._inbox_lock:
            self._inbox.append(item)
        if not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self.drain)

    def note_requested(self, ticket: int) -> None:
        """The replica feed was asked for change `ticket` (before the write is acknowledged): a query
        from now on waits for the stream to reach it."""
        self.requested = ticket
        page = self.processes.page
        if page is not None:
            page.publish(requested=ticket)

    def note_prefixes(self, version: int, prefixes: dict[str, str]) -> None:
        """The prefix map changed: the page says so at once, and the stream carries the new map."""
        self.prefix_version = version
        self.prefix_map = prefixes
        page = self.processes.page
        if page is not None:
            page.publish(prefixes=version)
        self.publish(("prefixes", version, prefixes))

    def set_gate(self, gate: Gate) -> None:
        """What the workers check of callers on their own connections."""
        self.gate = gate
        self.publish(("gate", gate))

    def drain(self) -> None:
        """Hand what was published to the processes (on the event loop)."""
        while self._inbox:
            with self._inbox_lock:
                if not self._inbox:
                    return
                item = self._inbox.popleft()
            kind = item[0]
            if kind == "snapshot":
                self._load(item[1])
                continue
            if kind == "changes":
                self.generation += 1
            frame = encode(item)
            template = self.processes.template
            if template is not None and template.state == "live":
                self._defer_to_template(template, frame)
                if kind == "ticket" and self.checkpoints is not None:
                    self.checkpoints.ticket(item[1])
            self._to_workers(item, frame)

    def flush(self, worker: Process, ticket: int) -> None:
        """A worker's query waits for the changes up to `ticket`: they go to it now, and what follows at once
        (on disk: a checkpoint holding them, once there is one)."""
        if self.checkpoints is not None:
            self.checkpoints.want(worker.id, ticket)
            return
        worker.wants = max(worker.wants, ticket)
        worker.send_deferred()

    # -- the replica on disk ----------------------------------------------------------------------------
    def checkpointed(self, seq: int, ticket: int) -> None:
        if self.checkpoints is not None:
            self.checkpoints.cut_done(seq, ticket)

    def opened(self, worker: Process, seq: int) -> None:
        if self.checkpoints is not None:
            self.checkpoints.opened(worker.id, seq)

    def forked(self, worker: Process) -> None:
        if self.checkpoints is not None:
            self.checkpoints.forked(worker.id)

    def gone(self, worker: Process) -> None:
        if self.checkpoints is not None:
            self.checkpoints.gone(worker.id)

    def _cut(self, seq: int) -> None:
        """Have the template cut checkpoint `seq` of everything the stream carried."""
        template = self.processes.template
        if template is None or template.state != "live":
            return
        template.send_deferred()
        template.send(encode(("checkpoint", seq)))

    def _give(self, worker_id: int, seq: int, path: str, ticket: int) -> None:
        worker = self.processes.worker(worker_id)
        if worker is not None and worker.state != "dead":
            worker.send(encode(("checkpoint", seq, path, ticket)))

    def _remove(self, path: Path) -> None:
        """Delete a checkpoint off the event loop (its files are hard links: the live store keeps its own)."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.run_in_executor(None, functools.partial(shutil.rmtree, path, ignore_errors=True))
        else:
            shutil.rmtree(path, ignore_errors=True)

    def _load(self, snapshot: bytes) -> None:
        """The snapshot a starting template waits for; then the prefixes and the gate as they are now."""
        self._snapshot_bytes = len(snapshot)
        template = self.processes.template
        if template is None or template.state != "waiting":
            return
        frames = [encode(("load", snapshot)), encode(("prefixes", self.prefix_version, self.prefix_map))]
        if self.gate is not None:
            frames.append(encode(("gate", self.gate)))
        if self.checkpoints is not None:
            self.checkpoints.reset()
            frames.append(encode(("checkpoint", self.checkpoints.first())))  # what its first forks open
        self.processes.load_template(frames)

    def _to_workers(self, item: tuple, frame: bytes) -> None:
        """Prefixes and the gate go at once; changes and tickets wait until a query needs them."""
        kind = item[0]
        held = kind in ("changes", "ticket")
        if held and self.checkpoints is not None:
            return  # the workers read checkpoints; the template alone takes changes
        stale: list[Process] = []
        for worker in self.processes.workers:
            if worker.state == "dead":
                continue
            if not held:
                worker.send(frame)  # prefixes and the gate go at once
                continue
            worker.deferred.append(frame)
            worker.deferred_bytes += len(frame)
            worker.changed_bytes += len(frame)
            if worker.wants:
                worker.send_deferred()
            elif worker.deferred_bytes > DEFER_LIMIT_BYTES and not worker.retiring:
                stale.append(worker)
            if kind == "ticket" and item[1] >= worker.wants:
                worker.wants = 0
        for worker in stale:
            self._replace(worker)
        if held:
            self.replace_worn()

    def _worn(self, worker: Process) -> bool:
        """Whether a worker took in changes worth its share of the snapshot, and may leave now: one at a time,
        while no other is starting or leaving (the workers take the same changes and wear out together; all
        leaving at once left /sparql with none while the template forked)."""
        if worker.state == "starting" or worker.changed_bytes <= max(replica.WEAR_FLOOR_BYTES,
                                                                      self._snapshot_bytes * replica.WEAR_RATIO):
            return False
        return not any(w.retiring or w.state == "starting" for w in self.processes.workers
                       if w is not worker and w.state != "dead")

    def template_rebuilt(self, size: int) -> None:
        """The template made its copy anew (`size` bytes of snapshot): the workers forked from the old one
        hold its pages alone now, so each is worn and leaves in turn for a fork of the new one."""
        self._snapshot_bytes = size
        for worker in self.processes.workers:
            worker.changed_bytes = max(worker.changed_bytes, size + replica.WEAR_FLOOR_BYTES + 1)
        self.replace_worn()

    def replace_worn(self) -> None:
        """Replace the first worn worker not waiting for changes (after a bulk load the changes stop coming,
        and a worker worn by them would otherwise keep its copy: 100,000 registrations left two of 587 MB)."""
        if self.processes.stopped:
            return
        for worker in list(self.processes.workers):
            if worker.state != "dead" and not worker.retiring and not worker.wants and self._worn(worker):
                self._replace(worker)
                return

    def _replace(self, worker: Process) -> None:
        """A worker that fell `DEFER_LIMIT_BYTES` behind while nobody queried it, or is worn: a fresh fork of
        the template (which applies changes once for all) is cheaper than every worker catching up. One
        evaluating takes them instead; one that is not leaves, sending its connections back."""
        if worker.state == "busy" or self.processes.evaluating(worker) is not None:
            worker.send_deferred()
            return
        worker.retiring = True
        if worker.state == "starting" or worker.channel is None:
            worker.deferred.clear()
            worker.deferred_bytes = 0
            self.processes.retire(worker, kill=True)
        else:
            # It may be taking in a connection's request at this moment: the changes held for it stay, so the
            # query it answers before it leaves still gets every change it asks for.
            worker.send(encode(("retire",)))
        self.processes.grow()

    def _defer_to_template(self, template: Process, frame: bytes) -> None:
        """The template applies changes once the registry has been quiet for `QUIET_S`, before it forks
        a worker, or when `DEFER_LIMIT_BYTES` have waited: a burst of writes does not share the CPU with
        keeping a copy nobody queries yet."""
        template.deferred.append(frame)
        template.deferred_bytes += len(frame)
        if template.deferred_bytes > DEFER_LIMIT_BYTES:
            template.send_deferred()
            return
        if self._quiet is not None:
            self._quiet.cancel()
        assert self._loop is not None
        self._quiet = self._loop.call_later(QUIET_S, self._flush_template)

    def _flush_template(self) -> None:
        self._quiet = None
        template = self.processes.template
        if template is not None and template.state == "live":
            template.send_deferred()
