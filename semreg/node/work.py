"""The node's event loop and the request work kept from its liveness (`semreg.work`), wired from the flags: how
late the loop runs (`lag`, which also says when to shed new work), where it stalls (`stalls`, a thread of its own;
none with `--stall-log 0`), and the lane request work runs in. The first two watch the loop, so they are services:
started first, on the node's loop (which `post` then reaches from other threads), and stopped last.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable

from semreg.config import Settings
from semreg.node.services import Basic, Service
from semreg.work.budget import Limits
from semreg.work.lag import LoopLag
from semreg.work.lane import Lane
from semreg.work.stalls import StallWatch


class Work:
    def __init__(self, settings: Settings) -> None:
        self.lag = LoopLag(settings.shed_late_share)
        self.stalls = StallWatch(lambda: self.lag.last_beat, settings.stall_log_s) if settings.stall_log_s else None
        limits = Limits(scored=settings.max_scored, expanded=settings.max_expanded, walked=settings.max_walked,
                        instances=settings.max_matched)
        self.lane = Lane(limits, time_limit_s=settings.work_time_limit_s, waiting=settings.work_queue,
                         shed=self.lag.shed)
        self.loop: asyncio.AbstractEventLoop | None = None  # the node's, once its services start

    def services(self) -> list[Service]:
        """The loop's watches."""
        out: list[Service] = [Basic("loop lag", self._watch_lag, self.lag.stop)]
        stalls = self.stalls
        if stalls is not None:
            out.append(Basic("stall watch", stalls.start, lambda: asyncio.to_thread(stalls.stop)))
        return out

    def _watch_lag(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.lag.start(self.loop)

    def post(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the node's loop, from any thread (nothing before the loop is known, or once it closed)."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(fn)
