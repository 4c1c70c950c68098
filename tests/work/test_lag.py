"""How far behind the loop runs, and when new request work is shed because of it (`semreg.work.lag`)."""
from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from semreg.work.lag import LoopLag


def test_the_lag_is_the_largest_stall_of_the_window_and_the_share_their_sum():
    lag = LoopLag(window_s=2.0, now=lambda: 0.0)
    lag.observe(0.01, at=10.0)  # a busy machine's few milliseconds: not a stall
    lag.observe(0.30, at=10.2)
    lag.observe(0.08, at=10.4)
    assert lag.lag_s(at=10.5) == pytest.approx(0.30)
    assert lag.late_share(at=10.5) == pytest.approx(0.38 / 2)
    assert lag.lag_s(at=12.3) == pytest.approx(0.08)  # the 0.30 is more than a window old
    assert lag.lag_s(at=13.0) == 0.0 and lag.late_share(at=13.0) == 0.0
    assert lag.max_lag_s == pytest.approx(0.30) and lag.beats == 3


def test_a_loop_a_little_late_at_every_beat_is_not_behind():
    lag = LoopLag(shed_share=0.5, window_s=2.0, now=lambda: 1.8)
    for k in range(80):
        lag.observe(0.04, at=k * 0.0225)
    assert lag.late_share() == 0.0 and lag.shed() is None


def test_one_stall_does_not_shed_but_a_loop_that_keeps_falling_behind_does():
    now = [100.0]
    lag = LoopLag(shed_share=0.5, window_s=2.0, now=lambda: now[0])
    lag.observe(0.6, at=100.0)  # one stall of 0.6 s: 30 % of the window
    assert lag.shed() is None
    for k in range(5):  # then late at every beat
        lag.observe(0.2, at=100.1 + 0.2 * k)
    now[0] = 101.0
    assert lag.late_share() == pytest.approx(0.8)
    assert lag.shed() == 1.0  # Retry-After: the largest lateness, rounded up, at least a second
    assert lag.behind_beats >= 1
    now[0] = 103.5  # it kept up since: the window holds nothing late
    assert lag.shed() is None


def test_a_process_paused_whole_comes_back_to_clients_served():
    now = [0.0]
    lag = LoopLag(shed_share=0.5, window_s=2.0, now=lambda: now[0])
    lag.observe(25.0, at=5.0)  # SIGSTOP for 25 s, then SIGCONT: one stall, over when seen
    now[0] = 5.1
    assert lag.lag_s() == 25.0 and lag.late_share() == 0.5
    assert lag.shed() is None


def test_a_long_stall_then_another_sheds_for_at_most_the_window():
    now = [0.0]
    lag = LoopLag(shed_share=0.5, window_s=2.0, now=lambda: now[0])
    lag.observe(25.0, at=5.0)
    lag.observe(0.3, at=5.4)  # and the loop stalls again: it is behind
    now[0] = 5.5
    assert lag.shed() == 2.0  # Retry-After: the largest stall, at most the window
    now[0] = 7.5  # the long stall left the window; the short one alone is not behind
    assert lag.shed() is None


def test_a_zero_share_never_sheds():
    lag = LoopLag(shed_share=0, now=lambda: 0.0)
    lag.observe(30.0, at=0.0)
    assert lag.shed() is None and lag.behind_beats == 0


@given(st.lists(st.tuples(st.floats(0, 5), st.floats(0, 3)), max_size=60), st.floats(0, 5))
def test_the_window_keeps_what_a_scan_of_every_beat_would_find(beats, ahead):
    lag = LoopLag(window_s=2.0, now=lambda: 0.0)
    at, seen = 0.0, []
    for gap, lateness in beats:
        at += gap
        lag.observe(lateness, at)
        seen.append((at, lateness))
    when = at + ahead
    window = [late for t, late in seen if t >= when - 2.0 and late > 0.05]
    assert lag.lag_s(at=when) == max(window, default=0.0)
    counted = sum(min(late, lag.shed_share * 2.0) for late in window)
    assert lag.late_share(at=when) == pytest.approx(min(1.0, counted / 2.0), abs=1e-9)


def test_on_a_real_loop_a_blocked_loop_is_seen_late():
    async def go() -> float:
        lag = LoopLag(beat_s=0.01)
        lag.start()
        await asyncio.sleep(0.05)
        time.sleep(0.3)  # the point: a callback that holds the loop
        await asyncio.sleep(0.05)
        lag.stop()
        return lag.max_lag_s
    assert asyncio.run(go()) >= 0.25
