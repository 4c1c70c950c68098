"""`/sparql` on a member without the SPARQL replica (`--no-sparql`): the request goes to a member that serves it.

Members say in their membership key whether they serve `/sparql` (`semreg.cluster.membership`). A member that
does not sends each protocol request, as it came (method, query string, Content-Type, body, Accept, the
caller's `Authorization` and address, and its own endpoint URL, the base IRI of the query), to the internal
route `/internal/v1/sparql` of a member that does, over the node-to-node channel and its secret, and passes
the answer on as it arrives. The serving member checks the caller's token and scope and applies its limits
as it does for a request of its own (`semreg.http.internal`), so a forwarded query is trusted no more than a
direct one, and answers exactly what it would answer at this member's URL.

Which member: those serving SPARQL, in ring order from a turn that moves with every request (the queries
spread over them), the ones this node suspects last. A member that gives no answer (refused, reset, no
head within the time limit and a margin), or answers without saying it served the query (it does not
serve SPARQL, or runs an earlier version), is passed over for the next; the query is sent again only when
nothing of an answer came back. When none answers: 503 with `Retry-After`.
"""
from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson

from semreg.cluster.membership import View
from semreg.cluster.peerhttp import Unreachable
from semreg.cluster.placement import RingPlacement
from semreg.errors import Unavailable
from semreg.http1.client import Head

log = logging.getLogger("semreg.sparql_forward")

PATH = "/sparql"  # under the internal API's prefix
SERVED_HEADER = "x-semreg-sparql-member"  # on every answer of a member that served the request, its id
MAX_ANSWER_BYTES = 1024 * 1024 * 1024  # a forwarded answer longer than this is cut (the result cap comes first)
IDLE_TIMEOUT_S = 30.0  # the longest a forwarded answer may stall between two pieces
MARGIN_S = 5.0  # beyond the time limit: the serving member's read barrier, the round trip


@dataclass(frozen=True)
class Forwarded:
    """What a member that serves SPARQL answered: its status and headers, and the body as it arrives."""

    member: str
    head: Head
    body: AsyncIterator[bytes]


def serving_order(view: View, me: str, suspects: frozenset[str], turn: int) -> list[str]:
    """The members to ask, in order: those serving SPARQL but this node, rotated by `turn`, suspects last."""
    serving = [m for m in view.serving_sparql() if m != me]
    if not serving:
        return []
    start = turn % len(serving)
    rotated = serving[start:] + serving[:start]
    return [m for m in rotated if m not in suspects] + [m for m in rotated if m in suspects]


class SparqlForward:
    def __init__(self, placement: RingPlacement, time_limit_s: float) -> None:
        self.placement = placement
        self.head_timeout_s = time_limit_s + MARGIN_S
        self._turn = 0
        self.forwarded = 0
        self.passed_over = 0

    def members(self) -> list[str]:
        self._turn += 1
        return serving_order(self.placement.view, self.placement.node_id, self.placement.suspects, self._turn)

    async def forward(self, request: dict[str, Any]) -> Forwarded:
        """`request` (`semreg.http.internal`'s fields) answered by a member that serves SPARQL; `Unavailable`
        when none answers."""
        payload = orjson.dumps(request)
        tried: list[str] = []
        for member in self.members():
            peer = self.placement.peers.get(member)
            if peer is None:
                continue
            tried.append(member)
            try:
                head, body = await peer.http.stream("POST", PATH, payload, timeout_s=self.head_timeout_s,
                                                    idle_timeout_s=IDLE_TIMEOUT_S, limit=MAX_ANSWER_BYTES)
            except Unreachable as exc:
                self.placement.failed(member)
                self._passed_over(member, str(exc))
                continue
            if SERVED_HEADER not in head.headers:
                await body.aclose()  # type: ignore[attr-defined]
                self._passed_over(member, f"HTTP {head.status} without serving the query")
                continue
            self.forwarded += 1
            return Forwarded(member, head, body)
        if not tried:
            raise Unavailable("no member of the ring serves SPARQL now (this node was started with --no-sparql); "
                              "try again, or ask a member started with --sparql.", retry_after_s=5)
        raise Unavailable(f"no member serving SPARQL answered (tried {', '.join(tried)}); try again.",
                          retry_after_s=1)

    def _passed_over(self, member: str, why: str) -> None:
        self.passed_over += 1
        log.warning("a member serving SPARQL did not take a forwarded query; trying the next",
                    extra={"member": member, "why": why[:200]})
