"""A server's /metrics sampled in the background while other load runs: what it counted meanwhile
(e.g. instances gone critical under a heartbeat load), not only at the end."""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping

from semreg.bench.aio.connection import TRANSPORT_ERRORS, Connection
from semreg.bench.readings import parse_metrics


async def sample_metrics(url: str, every_s: float, into: list[tuple[float, dict[str, float]]],
                         headers: Mapping[str, str] | None = None) -> None:
    """GET /metrics every `every_s` until cancelled; (perf_counter, series) appended to `into`."""
    conn = Connection(url, headers)
    try:
        while True:
            with contextlib.suppress(*TRANSPORT_ERRORS):
                response = await conn.request("GET", "/metrics")
                if response.status == 200:
                    into.append((time.perf_counter(), parse_metrics(response.body.decode())))
            await asyncio.sleep(every_s)
    finally:
        conn.close()
