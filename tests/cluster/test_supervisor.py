"""Supervised tasks on a fake clock: started again whatever ends them, with a backoff that doubles, the
trouble said meanwhile; only `stop` ends them."""
from __future__ import annotations

import asyncio

from semreg.clock import FakeClock
from semreg.cluster.supervisor import Supervisor


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_a_task_that_keeps_failing_is_started_again_later_each_time_and_said_to_be_in_trouble():
    async def go():
        clock = FakeClock()
        tasks = Supervisor(clock, owner="n1", min_s=0.5, max_s=4.0)
        starts: list[float] = []
        failures = iter([ValueError("one"), asyncio.CancelledError(), KeyError("three"), ValueError("four")])

        async def body() -> None:
            starts.append(clock.monotonic() - 1000.0)
            try:
                failure = next(failures)
            except StopIteration:
                tasks.healthy("loop")
                await asyncio.Event().wait()  # runs well from now on
            raise failure

        tasks.start("loop", "test loop", body)
        await settle()
        assert tasks.trouble == {"loop": "its test loop failed (ValueError: one); starting it again"}
        for _ in range(40):  # ten seconds
            clock.advance(0.25)
            await settle()
        assert starts == [0.0, 0.5, 1.5, 3.5, 7.5]  # 0.5, 1, 2, then 4 (the cap) between starts
        assert tasks.restarts == 4 and tasks.trouble == {} and tasks.running("loop")
        await tasks.stop()
        assert not tasks.running("loop")
    asyncio.run(asyncio.wait_for(go(), 10))
