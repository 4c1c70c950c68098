"""Consul's blocking queries over semreg's own watches: `?index=N&wait=D` blocks on the read's topic of the
registry's hub (`semreg.registry.watch`) until its result moves past N or the wait ends, and every read answers
with `X-Consul-Index` (the topic's index: never 0, and it moves only when that read's own result changes),
`X-Consul-KnownLeader` and `X-Consul-LastContact` (a node answers from its own state: always a leader, no lag).

Consul's wait defaults to five minutes and is capped; here the cap is the node's for every watch (300 s).
An `index` of 0, or none, answers at once, as in Consul.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request

from semreg.consul import durations
from semreg.errors import BadRequest
from semreg.http.state import app_state
from semreg.registry.watch import Topic

DEFAULT_WAIT_S = 300.0
MAX_INDEX = 2**63 - 1


def params(request: Request, cap_s: float) -> tuple[int, float]:
    """`index` (0: do not block) and `wait` (seconds, at most `cap_s`); a 400 in Consul's words otherwise."""
    raw_index = request.query_params.get("index") or "0"
    if not raw_index.isascii() or not raw_index.isdigit() or int(raw_index) > MAX_INDEX:
        raise BadRequest("Invalid index: give the X-Consul-Index of the last read, a whole number.")
    raw_wait = request.query_params.get("wait")
    wait = DEFAULT_WAIT_S
    if raw_wait:
        try:
            wait = durations.seconds(raw_wait)
        except ValueError:
            raise BadRequest("Invalid wait time: give a duration such as 10s, 500ms or 5m.") from None
    return int(raw_index), min(wait, cap_s)


async def read(request: Request, topic_of: Callable[[], Awaitable[Topic]]) -> Topic:
    """The read's topic, after blocking on it when the request gives the index it last saw."""
    state = app_state(request)
    index, wait = params(request, state.settings.watch_max_wait_s)
    topic = await topic_of()
    if index > 0:
        await state.coordinator.hub.wait(topic, index, wait)
        topic = await topic_of()
    return topic


def headers(index: int) -> dict[str, str]:
    return {"X-Consul-Index": str(index), "X-Consul-KnownLeader": "true", "X-Consul-LastContact": "0",
            "X-Consul-Effective-Consistency": "leader"}
