"""A read barrier shared by the reads that wait on it at once.

Before a node of a ring answers a SPARQL query it must have read every other node's change log as far
as it went when the query arrived (`semreg.cluster.followers.Followers.read_barrier`): one round of small requests,
one to each member. Reads arriving together share a round, as etcd batches its ReadIndex requests:
a caller is covered by a round that started after it arrived, so it waits for the round in flight only
when that one started later than itself, and otherwise for the next one, which starts as soon as the
one in flight ends. A caller waits at most for the end of the round in flight and one more round, and
a thousand queries a second cost as many rounds as there are round trips in that second, not a
thousand.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("semreg.barrier")


class ReadBarrier:
    def __init__(self, round_: Callable[[], Awaitable[None]]) -> None:
        self._round_fn = round_
        self._arrivals = 0
        self._round: asyncio.Future[None] | None = None
        self._covers = 0  # the arrivals the round in flight covers (those before it started)
        self.rounds = 0

    async def wait(self) -> None:
        """Return once a round that started after this call has ended (a round that fails is logged and
        counts as ended)."""
        self._arrivals += 1
        ticket = self._arrivals
        while True:
            current = self._round
            if current is None or current.done():
                current = self._start()
            covered = self._covers >= ticket
            await asyncio.shield(current)
            if covered:
                return

    def _start(self) -> asyncio.Future[None]:
        self._covers = self._arrivals
        self.rounds += 1
        self._round = asyncio.ensure_future(self._run())
        return self._round

    async def _run(self) -> None:
        try:
            await self._round_fn()
        except Exception:  # a read goes on with what this node has: the round's failure is logged
            log.exception("a read barrier round failed")
