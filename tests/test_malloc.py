"""Giving freed memory back: on glibc, memory freed in the middle of a thread's arena leaves the process
only through `release()`."""
from __future__ import annotations

import ctypes
import sys
import threading

import pytest

from semreg import malloc

pytestmark = pytest.mark.skipif(not malloc.supported(), reason="glibc's malloc only")

BLOCK = 4096
BLOCKS = 50_000  # about 200 MiB


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_memory_freed_inside_a_threads_arena_goes_back_only_when_released():
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    kept: list[int] = []

    def churn() -> None:  # in a thread of its own, as the node's writers: its arena, not the main heap
        blocks = [libc.malloc(BLOCK) for _ in range(BLOCKS)]
        for block in blocks:
            libc.memset(block, 1, BLOCK)  # touched: resident
        kept.append(blocks[-1])  # the last block stays, so the freed ones are not at the top of the heap
        for block in blocks[:-1]:
            libc.free(block)

    thread = threading.Thread(target=churn)
    thread.start()
    thread.join()
    held = rss_bytes()
    assert malloc.release()
    released = held - rss_bytes()
    libc.free(kept[0])
    assert released > BLOCK * BLOCKS // 2, f"only {released} bytes went back"


def test_capping_arenas_is_accepted_on_glibc():
    assert sys.platform.startswith("linux")
    assert malloc.cap_arenas(malloc.ARENAS)


def test_a_running_node_gives_freed_memory_back_at_every_interval(monkeypatch):
    import threading as _threading

    from support.inprocess import InProcess

    from semreg.node import RELEASE_EVERY_S

    calls: list[str] = []
    released = _threading.Event()

    def recorded() -> bool:
        calls.append(_threading.current_thread().name)
        released.set()
        return True

    server = InProcess().start()
    try:
        monkeypatch.setattr("semreg.malloc.release", recorded)
        server.call(lambda: server.clock.advance(RELEASE_EVERY_S - 1))
        assert calls == []  # not before its interval (the fake clock moves only when told)
        server.call(lambda: server.clock.advance(1))
        assert released.wait(10)
        assert calls and calls[0] != "in-process-app"  # on a worker thread, not the event loop
        released.clear()
        server.call(lambda: server.clock.advance(RELEASE_EVERY_S))
        assert released.wait(10) and len(calls) == 2
    finally:
        server.stop()


def test_the_heap_in_use_and_freed_but_kept_are_read_from_glibc():
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    before = malloc.usage()
    assert before is not None and before.in_use > 0
    blocks = [libc.malloc(BLOCK) for _ in range(5_000)]  # 20 MiB in small chunks, held
    during = malloc.usage()
    kept = blocks.pop()
    for block in blocks:
        libc.free(block)
    after = malloc.usage()
    libc.free(kept)
    assert during is not None and after is not None
    assert during.in_use - before.in_use >= BLOCK * 5_000
    assert during.in_use - after.in_use >= BLOCK * 4_000  # freed...
    assert after.free_kept - during.free_kept >= BLOCK * 4_000  # ...and kept below the last block


def test_metrics_say_where_a_nodes_memory_is(in_process):
    text = in_process().client().get("/metrics").text
    lines = {line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines() if line.startswith("semreg_")
             and " " in line}
    assert lines["semreg_python_allocated_blocks"] > 10_000
    assert not any(name.startswith("semreg_python_frozen") for name in lines)  # counting them walks them all
    assert lines['semreg_malloc_bytes{state="in_use"}'] > 1_000_000
    assert 'semreg_malloc_bytes{state="free_kept"}' in lines


def test_metrics_count_the_stores_reopenings(in_process, tmp_path):
    text = in_process(data_dir=tmp_path / "data").client().get("/metrics").text
    assert "semreg_store_reopens_total 0.0" in text.splitlines()


def test_the_heap_is_read_at_most_once_a_second_for_metrics():
    now = [0.0]
    readings: list[malloc.Usage] = []

    def read() -> malloc.Usage:
        readings.append(malloc.Usage(in_use=len(readings), free_kept=0))
        return readings[-1]

    recent = malloc.Recent(every_s=1.0, monotonic=lambda: now[0], read=read)
    assert recent.due() and recent.cached() is None and readings == []  # the cached reading never reads
    first = recent()
    now[0] = 0.9
    assert not recent.due() and recent.cached() is first
    assert recent() is first and len(readings) == 1
    now[0] = 1.0
    assert recent.due() and recent.cached() is first and len(readings) == 1
    assert recent().in_use == 1 and len(readings) == 2
    now[0] = 5.0
    assert recent().in_use == 2

