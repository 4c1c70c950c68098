"""What the route modules share: the declarations of the parameters and headers several routes take, and
the helpers of their handlers (the node's parts, from `semreg.http.state.app_state`, the caller, the read's selector,
a watchable answer, the warnings added to one, the cluster a change must reach)."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request

from semreg.access.tokens import OPEN, Principal
from semreg.errors import Unavailable
from semreg.http.endpoints import Param
from semreg.http.requests import watch_params
from semreg.http.responses import JSONResponse
from semreg.http.state import app_state
from semreg.knowledge.knowledge import Knowledge
from semreg.registry.coordinator import Coordinator
from semreg.registry.query_params import selector_from
from semreg.registry.selector import Selector
from semreg.registry.watch import Topic
from semreg.work.lane import Lane

if TYPE_CHECKING:
    from semreg.cluster.cluster import Cluster

# -- shared parameters and replies -----------------------------------------------------------------
WATCH = (Param("index", schema={"type": "integer", "minimum": 0}, description="X-Semreg-Index of the last read"),
         Param("wait", description="how long to block, e.g. 30s (cap 300 s)"))
ENVIRONMENT = Param("environment", description="the environment read: default 'default'; '*' reads every environment")
META = Param("meta.", prefix=True, description="meta.KEY=VALUE: only instances whose meta has KEY set to VALUE "
                                             "(repeatable: all must hold)")
SELECTOR = (ENVIRONMENT, META)  # every read of instances and its watch takes them
INDEX_HEADER = {"X-Semreg-Index": {"schema": {"type": "integer", "minimum": 1}}}
TAGS_FLAG = {"type": "boolean"}


# -- the node's parts and the caller ---------------------------------------------------------------
def coordinator_of(request: Request) -> Coordinator:
    return app_state(request).coordinator


def lane_of(request: Request) -> Lane:
    """Where a request's work runs, in slices within its budgets (`semreg.work.lane`)."""
    return app_state(request).lane


def knowledge_of(request: Request) -> Knowledge:
    return app_state(request).knowledge


def principal_of(request: Request) -> Principal:
    return getattr(request.state, "principal", None) or OPEN


def selector_of(request: Request) -> Selector:
    """The read's `environment=` and `meta.KEY=VALUE` filters, in an environment the token may read."""
    selector = selector_from(request.query_params)
    principal_of(request).require_environment(selector.environment)
    return selector




def cluster_of(request: Request) -> Cluster | None:
    """The cluster this node is in, refusing a change every node must make while etcd is away."""
    cluster = app_state(request).cluster
    if cluster is not None and cluster.degraded:
        raise Unavailable("the cluster's etcd cannot be reached: ontologies and prefixes change on every node "
                          "at once, which waits until it answers again.", retry_after_s=5)
    return cluster


async def term_warnings(request: Request, named: Iterable[tuple[str, str]], what: str = "this request"
                        ) -> list[dict[str, Any]]:
    """The warnings about the terms no ontology knows among `(field, iri)` pairs: at once when there are none,
    else as request work, the close known terms looked for on a worker thread (`Knowledge.term_warnings`)."""
    knowledge = knowledge_of(request)
    named = list(named)
    if knowledge.knows_all(named):
        return []
    return await lane_of(request).run(knowledge.term_warnings, named, what=what)


# -- answers ---------------------------------------------------------------------------------------
def warned(warnings: list[dict[str, Any]]) -> bytes:
    """The `"warnings"` member to add at the end of a JSON object answer (`b""` for none)."""
    return b',"warnings":' + orjson.dumps(warnings) if warnings else b""


def with_members(body: bytes, members: bytes) -> bytes:
    """A JSON object's encoding with `members` (`,"name":value...`) added at its end."""
    return body[:-1] + members + b"}" if members else body


async def watched(request: Request, topic: Topic, refresh: Any, members: bytes = b"",
                  more: Callable[[Topic], dict[str, str]] | None = None) -> JSONResponse:
    """A watchable read: the topic's body (with `members` added) and index; with `?index=N&wait=`, after its
    result changes. `more` gives headers of the answered topic to add."""
    index, wait = watch_params(request, app_state(request).settings.watch_max_wait_s)
    if index is not None:
        await coordinator_of(request).hub.wait(topic, index, wait)
        topic = await refresh()
    headers = {"X-Semreg-Index": str(topic.index), **(more(topic) if more is not None else {})}
    missing = getattr(topic.payload, "missing", ())
    if missing:
        headers["X-Semreg-Partial"] = ",".join(missing)
    return JSONResponse(with_members(topic.body or b"", members) if members else topic.body, headers=headers)
