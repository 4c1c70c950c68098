"""What the handlers of both apps (the public one and the cluster listener's) find of the node: one typed object,
made when the node is wired, on `app.state.semreg`, read through `app_state(request)`. The node's parts
(registry, knowledge, ring, clock, settings) and the edge's own (tokens, router, metrics, the SPARQL route),
nothing else: the HTTP room knows no node.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from starlette.requests import HTTPConnection, Request
from starlette.responses import Response

if TYPE_CHECKING:
    from semreg.access.failures import FailureThrottle
    from semreg.access.ratelimit import RateLimiter
    from semreg.access.tokens import Tokens
    from semreg.clock import Clock
    from semreg.cluster.cluster import Cluster
    from semreg.config import Settings
    from semreg.http.endpoints import Endpoints, ScopeTable
    from semreg.http.fastpath import KnownQueries
    from semreg.http.metrics import Metrics
    from semreg.knowledge.knowledge import Knowledge
    from semreg.registry.changelog import ChangeLog
    from semreg.registry.coordinator import Coordinator
    from semreg.registry.local_shard import LocalShard
    from semreg.registry.routing import Router
    from semreg.registry.saved import Questions
    from semreg.work.lane import Lane


class SparqlRoute(Protocol):
    """What answers `/sparql` here: the endpoint over the query processes (`semreg.http.sparql`), or, on a node
    started with `--no-sparql`, a forward to a member that serves it or a 501 (`semreg.http.sparql_forward`)."""

    async def handle(self, request: Request) -> Response: ...


@dataclass
class AppState:
    settings: Settings
    clock: Clock
    knowledge: Knowledge
    coordinator: Coordinator
    questions: Questions  # what each saved query asks
    lane: Lane  # where request work runs (`semreg.work.lane`)
    shard: LocalShard  # this node's shard, which the internal routes serve
    changelog: ChangeLog  # what other members follow
    cluster: Cluster | None  # None on a node alone
    router: Router
    metrics: Metrics
    tokens: Tokens
    scopes: ScopeTable  # the scope each route needs (a forwarded SPARQL request's caller is checked by it too)
    limiter: RateLimiter
    auth_failures: FailureThrottle  # failed authentications on the public port
    secret_failures: FailureThrottle  # wrong cluster secrets on the cluster listener
    known_queries: KnownQueries  # the discovery short path's parsed queries
    sparql: SparqlRoute
    endpoints: Endpoints  # the API's table, which `/openapi.json` describes
    ready: Callable[[], bool]
    starting: Callable[[], str]  # why the node is not ready yet
    readiness: Callable[[], dict[str, int]]  # the counts `/readyz` adds once it is
    restore_lock: asyncio.Lock = field(default_factory=asyncio.Lock)  # one restore at a time

    @property
    def cluster_secret(self) -> str:
        return self.cluster.secret if self.cluster is not None else ""


def app_state(conn: HTTPConnection) -> AppState:
    """The app's state, as a handler finds it."""
    state: AppState = conn.app.state.semreg
    return state
