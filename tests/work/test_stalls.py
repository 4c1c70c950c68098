"""Where the loop got stuck (`semreg.work.stalls`): one look at a time with the test's own times, and the
thread on a real loop held by a callback."""
from __future__ import annotations

import asyncio
import gc
import logging
import sys
import threading
import time
import weakref

from semreg.work.lag import LoopLag
from semreg.work.stalls import StallWatch


def test_a_stall_is_counted_once_it_ends_and_logged_with_where(caplog):
    beat = [0.0]
    watch = StallWatch(lambda: beat[0], threshold_s=0.1)
    watch.start()  # only to know the loop's thread: this one
    watch.stop()
    watch.look(0.05)
    assert watch.stalls == 0
    with caplog.at_level(logging.WARNING, "semreg.stalls"):
        watch.look(0.2)  # stuck since 0.0: the stack is taken now
        watch.look(0.3)
        assert watch.stalls == 0
        beat[0] = 0.35  # it turned again
        watch.look(0.36)
    assert watch.stalls == 1 and abs(watch.longest_s - 0.35) < 1e-9
    [record] = [r for r in caplog.records if r.name == "semreg.stalls"]
    assert record.ms == 350
    assert any("test_stalls.py" in frame for frame in record.where)


def test_stalls_close_together_are_logged_once_a_second_and_counted(caplog):
    beat = [0.0]
    watch = StallWatch(lambda: beat[0], threshold_s=0.1)
    with caplog.at_level(logging.WARNING, "semreg.stalls"):
        for k in range(5):
            start = k * 0.3
            beat[0] = start
            watch.look(start + 0.15)
            beat[0] = start + 0.2
            watch.look(start + 0.21)
    # ended at 0.21 (logged), 0.51, 0.81, 1.11 (counted), 1.41 (logged, saying 3 were not)
    assert watch.stalls == 5
    records = [r for r in caplog.records if r.name == "semreg.stalls"]
    assert len(records) == 2 and records[1].stalls_not_logged == 3


def test_on_a_real_loop_the_thread_finds_the_callback_that_held_it(caplog):
    def stuck_here() -> None:
        time.sleep(0.4)  # the point: a callback that holds the loop

    async def go() -> StallWatch:
        lag = LoopLag(beat_s=0.01)
        lag.start()
        watch = StallWatch(lambda: lag.last_beat, threshold_s=0.1, poll_s=0.01)
        watch.start()
        await asyncio.sleep(0.05)
        stuck_here()
        ended = threading.Event()
        while watch.stalls == 0:
            await asyncio.sleep(0.01)
        ended.set()
        watch.stop()
        lag.stop()
        return watch
    with caplog.at_level(logging.WARNING, "semreg.stalls"):
        watch = asyncio.run(go())
    assert watch.longest_s >= 0.3
    [record] = [r for r in caplog.records if r.name == "semreg.stalls"]
    assert any("stuck_here" in frame for frame in record.where)


def test_a_loop_in_its_own_frames_is_not_in_semregs_code_though_semreg_started_it():
    from semreg.work.stalls import _in_semreg
    started_by = ["semreg/node/process.py:33 run", "semreg/cli/serve.py:271 run", "semreg/__main__.py:3 <module>"]
    # uvloop waiting for Python's lock, or in its C: only the frames that started it
    assert not _in_semreg(["runners.py:118 run", *started_by])
    # asyncio's own loop, polling
    assert not _in_semreg(["selectors.py:468 select", "base_events.py:1898 _run_once", *started_by])
    # a callback of a library's, called by the loop
    assert not _in_semreg(["httptools_impl.py:173 data_received", "events.py:80 _run", "base_events.py:1 x"])
    # semreg's code, directly or below a library it called
    assert _in_semreg(["semreg/registry/backups.py:98 <listcomp>", "events.py:80 _run", *started_by])
    assert _in_semreg(["json/encoder.py:200 encode", "semreg/http/metrics.py:239 _memory", "events.py:80 _run"])


def test_a_stall_says_what_the_loops_thread_did_meanwhile(caplog):
    beat = [0.0]
    sched = [(1.0, 2.0)]  # seconds the loop's thread ran, and waited for a core
    collected = [5.0]  # seconds the collector ran
    watch = StallWatch(lambda: beat[0], threshold_s=0.1, sched=lambda: sched[0], collector=lambda: collected[0])
    with caplog.at_level(logging.WARNING, "semreg.stalls"):
        watch.look(0.01)  # it turned at 0.0: counted from here
        sched[0], collected[0] = (1.05, 2.2), 5.03
        watch.look(0.2)  # stuck
        sched[0], collected[0] = (1.06, 2.3), 5.04
        beat[0] = 0.4
        watch.look(0.41)
    [record] = [r for r in caplog.records if r.name == "semreg.stalls"]
    assert (record.ms, record.cpu_ms, record.runqueue_ms, record.gc_ms) == (400, 60, 300, 40)


def test_where_the_thread_cannot_be_read_the_line_says_none(caplog):
    beat = [0.0]
    watch = StallWatch(lambda: beat[0], threshold_s=0.1, sched=lambda: None, collector=lambda: 0.0)
    with caplog.at_level(logging.WARNING, "semreg.stalls"):
        watch.look(0.01)
        watch.look(0.2)
        beat[0] = 0.3
        watch.look(0.31)
    [record] = [r for r in caplog.records if r.name == "semreg.stalls"]
    assert record.cpu_ms is None and record.runqueue_ms is None and record.gc_ms == 0


def test_on_this_machine_the_loops_thread_and_the_collector_are_read():
    import gc

    watch = StallWatch(lambda: 0.0)
    watch.start()
    try:
        ran, waited = watch._readings()[0] or (None, None)
        before = watch._readings()[1]
        gc.collect()
        after = watch._readings()[1]
    finally:
        watch.stop()
    assert watch._timed not in gc.callbacks
    linux = sys.platform.startswith("linux")  # schedstat is Linux's: elsewhere the line says None
    assert (ran is not None and ran > 0 and waited is not None and waited >= 0) == linux
    assert after is not None and before is not None and after > before


def test_a_stacks_capture_keeps_no_threads_frames_alive():
    """What a stall's capture looked at goes with the threads that held it, without waiting for the collector
    (which a registration batch pauses, then freezes what survived: a kept frame was kept for good)."""

    class Held:
        pass

    ready, release = threading.Event(), threading.Event()
    seen: list[weakref.ref] = []

    def worker() -> None:
        held = Held()  # a local of a frame the capture sees
        seen.append(weakref.ref(held))
        ready.set()
        release.wait(10)

    watch = StallWatch(lambda: 0.0, threshold_s=0.1)
    watch._loop_thread = -1  # no loop thread: every thread's stack is looked at
    thread = threading.Thread(target=worker)
    gc.disable()
    try:
        thread.start()
        assert ready.wait(10)
        watch._stacks()  # sees the worker's frame, with `held` in it
        release.set()
        thread.join(10)
        assert seen[0]() is None, "the worker's frame outlived its thread: the capture kept it"
    finally:
        gc.enable()
