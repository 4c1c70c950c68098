"""Writers for the fault test: each registers fresh ids, drains about 10 % of its own acknowledged ones (a
heartbeat saying `draining`, an admin status written down and sent to every owner) and deregisters about
30 %, through a random live node, a new connection per request; every outcome is kept in a `Ledger`, so that
after the run each id is known to be acknowledged, drained, removed, or ambiguous.

The timeout is longer than a node's own wait for a peer (5 s to read, 10 s to write), so that what the
node answers is recorded, not the writer's impatience: a write a node acknowledges late, after giving up
on an owner that hangs, is acknowledged and held to every invariant.

Outcomes: a 2xx is acknowledged. A 503, a refused or reset connection or a timeout is ambiguous: the
registration may or may not exist, the removal may or may not have happened. Any other 5xx is a failure
of its own, and so is a 404 to the removal of an acknowledged registration (the registry said it was not
there). Ambiguous ids are left out of the strict invariants; acknowledged ones never are.
"""
from __future__ import annotations

import http.client
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from semreg.bench.localcluster import ClusterNode
from support.ring import body

Status = int | str  # an HTTP status, or the name of the exception (ConnectionRefusedError, TimeoutError, ...)
REMOVE_SHARE = 0.3
DRAIN_SHARE = 0.1


def call(node: ClusterNode, method: str, path: str, payload: Any = None, timeout_s: float = 16.0) -> tuple[Status, str]:
    """One request on a connection of its own, closed after it (no keep-alive)."""
    conn = http.client.HTTPConnection("127.0.0.1", node.port, timeout=timeout_s)
    try:
        content = orjson.dumps(payload) if payload is not None else None
        conn.request(method, path, body=content, headers={"Content-Type": "application/json", "Connection": "close"})
        r = conn.getresponse()
        return r.status, r.read(400).decode(errors="replace")
    except (OSError, http.client.HTTPException) as exc:
        return type(exc).__name__, str(exc)
    finally:
        conn.close()


@dataclass
class Event:
    t: float
    op: str  # register, remove
    node: str
    status: Status
    took_s: float

    def __str__(self) -> str:
        return f"+{self.t:5.1f}s {self.op} via {self.node}: {self.status} ({self.took_s:.2f}s)"


@dataclass
class Ledger:
    events: dict[str, list[Event]] = field(default_factory=dict)
    bad: list[tuple[str, Event, str]] = field(default_factory=list)  # statuses neither expected nor 503
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, iid: str, event: Event, text: str) -> None:
        with self._lock:
            self.events.setdefault(iid, []).append(event)
            expected = {"register": (200, 201), "drain": (200,), "remove": (204,)}[event.op]
            if isinstance(event.status, int) and event.status not in expected and event.status != 503:
                self.bad.append((iid, event, text[:200]))

    def ids(self, op: str, outcome: Callable[[Status], bool]) -> set[str]:
        with self._lock:
            return {iid for iid, evs in self.events.items() if any(e.op == op and outcome(e.status) for e in evs)}

    def sets(self) -> dict[str, set[str]]:
        """The strict sets: `present` (acknowledged, no removal tried) must be everywhere, `removed`
        (removal acknowledged) nowhere, `drained` (present, its drain acknowledged) `draining` everywhere and
        `up` (present, no drain tried) up everywhere; the rest is reported, never held against the registry."""
        registered = self.ids("register", acked)
        tried = self.ids("remove", lambda s: True)
        removed = self.ids("remove", acked)
        present = registered - tried
        return {"registered": registered, "present": present, "removed": removed,
                "drained": present & self.ids("drain", acked), "up": present - self.ids("drain", lambda s: True),
                "ambiguous registrations": self.ids("register", lambda s: not acked(s)),
                "ambiguous removals": self.ids("remove", lambda s: s == 503 or isinstance(s, str)),
                "removals answered 404": self.ids("remove", lambda s: s == 404)}

    def slowest(self, n: int = 5, over_s: float = 2.0) -> list[str]:
        """How many requests took longer than `over_s`, and the longest (a write that waits for an owner
        that hangs shows here)."""
        with self._lock:
            events = sorted(((e, iid) for iid, evs in self.events.items() for e in evs), key=lambda x: -x[0].took_s)
        slow = [(e, iid) for e, iid in events if e.took_s > over_s]
        return [f"{len(slow)} requests took over {over_s:.0f}s; the longest:"] + [f"{iid}: {e}" for e, iid in events[:n]]

    def statuses(self) -> dict[str, int]:
        out: dict[str, int] = {}
        with self._lock:
            for evs in self.events.values():
                for e in evs:
                    key = f"{e.op} {e.status}"
                    out[key] = out.get(key, 0) + 1
        return dict(sorted(out.items()))


def acked(status: Status) -> bool:
    return isinstance(status, int) and 200 <= status < 300


class Churn:
    """`writers` threads writing until the context ends."""

    def __init__(self, seed: int, live: Callable[[], list[ClusterNode]], now: Callable[[], float],
                 writers: int = 4, timeout_s: float = 16.0) -> None:
        self.ledger = Ledger()
        self.live, self.now, self.timeout_s = live, now, timeout_s
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._write, args=(seed, w), name=f"writer-{w}", daemon=True)
                         for w in range(writers)]

    def __enter__(self) -> Churn:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        """No new requests; those under way finish (`__exit__` waits for them)."""
        self._stop.set()

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(self.timeout_s + 5)

    def _write(self, seed: int, writer: int) -> None:
        rng = random.Random(seed * 100 + writer)
        mine: list[str] = []  # acknowledged, not yet chosen for a drain or a removal
        drained: list[str] = []  # a drain tried, not yet chosen for removal
        registered = drains = removals = n = 0
        while not self._stop.is_set():
            node = rng.choice(self.live())
            if mine and drains < DRAIN_SHARE * registered and rng.random() < 0.5:
                iid = mine.pop(rng.randrange(len(mine)))  # drained once; it may still be removed later
                drains += 1
                self._request(iid, "drain", node, "PUT", f"/v1/instances/{iid}/heartbeat", {"status": "draining"})
                drained.append(iid)
                continue
            if (mine or drained) and removals < REMOVE_SHARE * registered and rng.random() < 0.5:
                pool = mine if mine and (not drained or rng.random() < 0.8) else drained
                iid = pool.pop(rng.randrange(len(pool)))
                removals += 1
                self._request(iid, "remove", node, "DELETE", f"/v1/instances/{iid}", None)
                continue
            n += 1
            iid = f"s{seed}w{writer}-{n:05d}"
            if acked(self._request(iid, "register", node, "PUT", f"/v1/instances/{iid}", {**body(n), "id": iid})):
                mine.append(iid)
                registered += 1

    def _request(self, iid: str, op: str, node: ClusterNode, method: str, path: str, payload: Any) -> Status:
        started, t = time.monotonic(), self.now()
        status, text = call(node, method, path, payload, self.timeout_s)
        self.ledger.add(iid, Event(t, op, node.name, status, time.monotonic() - started), text)
        return status
