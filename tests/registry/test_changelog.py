"""The change log other nodes follow: changes after a cursor, a reset when the log no longer holds what
came after it, each change encoded once, and waits that end on a change or at their timeout."""
from __future__ import annotations

import asyncio

from semreg.registry.changelog import ChangeLog
from semreg.registry.registry import Change


def change(n: int) -> Change:
    return Change(f"i{n}", "registered", n, "up", True, frozenset(), frozenset({"svc"}), frozenset({"default"}))


def test_a_follower_gets_what_came_after_its_cursor_and_a_reset_when_that_is_gone():
    log = ChangeLog(epoch=7, keep=5)
    log.append([change(n) for n in range(1, 4)])
    assert log.since(0) == (False, [change(1), change(2), change(3)])
    assert log.since(2) == (False, [change(3)])
    assert log.since(3) == (False, [])
    assert log.since(9) == (True, [])  # a cursor from the future: another life of this node
    log.append([change(n) for n in range(4, 9)])  # only the last five are kept
    assert log.since(3) == (False, [change(n) for n in range(4, 9)])
    assert log.since(2) == (True, [])  # change 3 is gone: the follower must recompute everything


def test_each_change_is_encoded_once_however_many_follow():
    log = ChangeLog(epoch=1)
    log.append([change(1), change(2)])
    encoded: list[str] = []

    def encode(c: Change) -> bytes:
        encoded.append(c.id)
        return c.id.encode()

    assert log.since_encoded(0, encode) == (False, [b"i1", b"i2"], 2)
    assert log.since_encoded(1, encode) == (False, [b"i2"], 2)
    assert encoded == ["i1", "i2"]
    assert log.since_encoded(2, encode) == (False, [], 2)
    assert log.since_encoded(5, encode) == (True, [], 2)


def test_a_follower_far_behind_reads_the_log_a_page_at_a_time_oldest_first():
    log = ChangeLog(epoch=1, keep=100)
    log.append([change(n) for n in range(1, 26)])
    read: list[bytes] = []
    cursor, pages = 0, 0
    while True:
        reset, found, cursor = log.since_encoded(cursor, lambda c: c.id.encode(), limit=10)
        assert not reset and len(found) <= 10
        if not found:
            break
        read += found
        pages += 1
    assert read == [f"i{n}".encode() for n in range(1, 26)] and pages == 3 and cursor == 25


def test_a_wait_ends_at_the_next_change_or_at_once_when_behind():
    async def main() -> None:
        log = ChangeLog(epoch=1)
        log.append([change(1)])
        await asyncio.wait_for(log.wait(0, 60), 1)  # behind: at once
        waiting = asyncio.ensure_future(log.wait(1, 60))
        await asyncio.sleep(0)
        assert not waiting.done()
        log.append([change(2)])
        await asyncio.wait_for(waiting, 1)
        stopped = asyncio.ensure_future(log.wait(2, 60))
        await asyncio.sleep(0)
        log.release()
        await asyncio.wait_for(stopped, 1)
    asyncio.run(main())
