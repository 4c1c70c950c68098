"""What a view of a few of many instances reads besides its page (`GET /v1/instances?limit=`): the
overview's counts (`GET /v1/summary`) and the changes since its last read (`GET /v1/changes`), a blocking
read whose answer names the instances that changed, not the list they are in. Both read every
environment the token sees unless `environment=` names one."""
from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from semreg.access.tokens import READ
from semreg.http import console_schemas as cs
from semreg.http.endpoints import Endpoints, Param, Reply
from semreg.http.requests import watch_params
from semreg.http.responses import JSONResponse
from semreg.http.routes.common import INDEX_HEADER, WATCH, coordinator_of, principal_of
from semreg.http.state import app_state
from semreg.registry import listing
from semreg.registry.registry import Change
from semreg.registry.selector import ALL, parse_selector

API = Endpoints()
ENVIRONMENTS = Param("environment", description="one environment; omitted: every environment the token sees "
                                                "('*' too, for a token not bound to environments)")


def environments_read(request: Request) -> frozenset[str] | None:
    """The environments a summary or the changes cover: the one named (403 if the token may not read it),
    else every one the token sees; None for all."""
    raw = request.query_params.get(ENVIRONMENTS.name)
    principal = principal_of(request)
    if raw:
        environment = parse_selector(raw).environment
        principal.require_environment(environment)
        return None if environment == ALL else frozenset((environment,))
    return principal.environments if principal.bound else None


@API.route("GET", "/v1/summary", scope=READ, summary="counts of instances by status, service and environment, "
           "with the ontologies, concepts and tags", params=(ENVIRONMENTS,), replies=[Reply(200, cs.SummaryView)])
async def summary(request: Request) -> Response:
    topic = await listing.summary(coordinator_of(request), environments_read(request))
    return JSONResponse(topic.body)


@API.route("GET", "/v1/changes", scope=READ, summary="the changes of instances since an index; watchable",
           params=(ENVIRONMENTS, *WATCH), replies=[Reply(200, cs.ChangesView, headers=INDEX_HEADER)])
async def changes(request: Request) -> Response:
    """Without `index`, none (the index to start from); with `index=N`, the changes after it the token may
    see, waiting for one up to `wait`; `reset` when they are no longer all known. The index is numbered by
    the changes of the environments read (`semreg.registry.feed`)."""
    environments = environments_read(request)
    index, wait = watch_params(request, app_state(request).settings.watch_max_wait_s)
    feed = coordinator_of(request).feed
    reset, found = (False, []) if index is None else await feed.wait(index, environments, wait)
    return JSONResponse({"changes": [entry(c, environments) for c in found], "reset": reset},
                        headers={"X-Semreg-Index": str(feed.index(environments))})


def entry(change: Change, environments: frozenset[str] | None) -> dict[str, Any]:
    seen = change.environments if environments is None else change.environments & environments
    out: dict[str, Any] = {"id": change.id, "reason": change.reason, "status": change.status}
    if seen == change.environments:  # a service named elsewhere is not this reader's to learn
        out["services"] = sorted(change.services)
    out["environments"] = sorted(seen)
    return out
