"""The membership lease refreshed from a thread of its own, so that a busy event loop does not lose it.

A member's event loop can be held for seconds by its own work on a loaded machine: batches of 1,000
instances, a follower's page of changes, a peer's records. A ring of three on two cores, at ~300,000 records
a member, answered `/healthz` in 2-5 s, and the lease's keep-alive, a task on that loop, came late enough
for 10 s leases to lapse. The ring then moved records, which made more work and more lapses. Mimir and
Loki beat their ring's heart from a goroutine of its own; here a thread with its own event loop and its own
etcd client refreshes the lease the membership holds every third of its TTL, beside the loop's keep-alive,
which still decides what a lapse means (`semreg.cluster.membership`).

It refreshes only while the event loop shows signs of life: the loop's keep-alive marks each of its rounds
(`loop_alive`), and past `grace_s` (three leases) without one the pacemaker stops, so that a wedged process
still leaves the ring, three leases later instead of one. A paused process (SIGSTOP) or one cut off from
etcd lapses as before: the thread is paused or cut off with it.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from semreg.cluster.kv import EtcdKV

log = logging.getLogger("semreg.membership")

Refresh = Callable[[int], bool]  # refresh this lease: whether etcd still holds it


class Pacemaker:
    def __init__(self, refresh: Refresh, ttl_s: float, *, grace_s: float | None = None,
                 monotonic: Callable[[], float] = time.monotonic, close: Callable[[], None] = lambda: None) -> None:
        self.refresh = refresh
        self.interval_s = ttl_s / 3
        self.grace_s = grace_s if grace_s is not None else 3 * ttl_s
        self.monotonic = monotonic
        self.lease: int | None = None  # the lease to keep alive (None: not a member now)
        self.beats = 0  # refreshes etcd answered
        self._close = close
        self._held = threading.Lock()  # the lease is let go only if it is still the one refreshed
        self._loop_seen = monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def hold(self, lease: int | None) -> None:
        """Keep this lease alive from now on (None: none)."""
        with self._held:
            self.lease = lease

    def loop_alive(self) -> None:
        """The event loop ran a round of its own keep-alive."""
        self._loop_seen = self.monotonic()

    def beat(self) -> bool:
        """One round: refresh the lease held, if the event loop was seen within the grace; whether etcd still
        holds the lease. A lapsed one is let go: the loop's keep-alive finds out too, and joins again."""
        lease = self.lease
        if lease is None or self.monotonic() - self._loop_seen > self.grace_s:
            return False
        try:
            alive = self.refresh(lease)
        except Exception as exc:  # etcd unreachable: the loop's keep-alive says so, and tries on its own
            log.debug("the lease's refresh from the pacemaker failed", extra={"error": str(exc)[:200]})
            return False
        self.beats += 1
        if not alive:
            with self._held:
                if self.lease == lease:
                    self.lease = None
        return alive

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="semreg-pacemaker", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self.hold(None)
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval_s):
                self.beat()
        finally:
            self._close()


def for_etcd(endpoints: list[tuple[str, int]], client: Callable[[str, int, float], Any], ttl_s: float) -> Pacemaker:
    """A pacemaker refreshing leases through an etcd client of its own, on an event loop of its own (a gRPC
    channel belongs to the loop it was made on, and the member's loop is the one that may be busy). Both are
    made at the thread's first refresh and closed when it ends, so a membership stopped and started again
    gets new ones."""
    own: dict[str, Any] = {}

    def refresh(lease: int) -> bool:
        if not own:
            own["loop"] = asyncio.new_event_loop()
            own["kv"] = EtcdKV(endpoints, timeout_s=max(1.0, ttl_s / 3), client=client)
        return bool(own["loop"].run_until_complete(own["kv"].keepalive(lease)))

    def close() -> None:
        if not own:
            return
        loop, kv = own.pop("loop"), own.pop("kv")
        try:
            loop.run_until_complete(kv.close())
        finally:
            loop.close()

    return Pacemaker(refresh, ttl_s, close=close)
