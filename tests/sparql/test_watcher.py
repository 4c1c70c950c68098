"""A query process's watcher of a long evaluation: it hands the process's other connections back once the
evaluation has run `HANDBACK_S`, whatever the clock reads between two looks at it (on a loaded machine the
time goes on between reading the clock and sleeping until the due time)."""
from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from semreg.sparql import connections


class SteppingTime:
    """`time` as the watcher sees it: every reading of the clock is `step` later than the one before."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step
        self.slept: list[float] = []

    def monotonic(self) -> float:
        self.now += self.step
        return self.now

    def sleep(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        self.slept.append(seconds)


def test_the_watcher_hands_the_other_connections_back_however_late_each_reading_of_the_clock(monkeypatch) -> None:
    clock = SteppingTime(step=connections.HANDBACK_S * 0.6)  # the second of two readings is past the due time
    monkeypatch.setattr(connections, "time", clock)
    current = (1, 7, 0.0, 10.0)  # (seq, connection, started, deadline)
    handed: list[int] = []
    sent: list[Any] = []
    watcher: Any = SimpleNamespace(cond=threading.Condition(), current=current, watcher_sleeping=False,
                                   served=SimpleNamespace(hand_back_others=handed.append), channel=None)

    def send(message: Any) -> None:
        sent.append(message)
        watcher.current = None  # the evaluation ended meanwhile: no priority to lower

    watcher.channel = SimpleNamespace(send=send)
    connections.ConnectionServer._watch(watcher)
    assert handed == [7] and sent == [("long", 7, 1, 10.0)]
    assert all(s >= 0 for s in clock.slept) and clock.slept[0] > 0
