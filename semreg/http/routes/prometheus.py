"""Prometheus's HTTP service discovery (`http_sd_configs`): `GET /v1/prometheus/targets` answers a saved query
(`?query=NAME`) or an inline one (`s`, `p`, `o`, `match`, `environment`, `meta.KEY=VALUE`, as `GET /v1/discover`
takes them) as Prometheus reads it: a list of target groups, one per routable instance, each with its
`__meta_semreg_*` labels for relabelling. Prometheus's `authorization` block sends the token as
`Authorization: Bearer`, which the access gate reads as it reads every request's."""
from __future__ import annotations

import dataclasses
import re

from starlette.requests import Request
from starlette.responses import Response

from semreg.access.tokens import READ
from semreg.errors import BadRequest
from semreg.http.endpoints import Endpoints, Param, Reply
from semreg.http.responses import JSONResponse
from semreg.http.routes.common import SELECTOR, coordinator_of, knowledge_of, principal_of
from semreg.http.routes.discovery import PATTERN
from semreg.http.routes.queries import NAME, visible
from semreg.http.state import app_state
from semreg.registry.query_params import META, discover_query
from semreg.registry.questions import Question
from semreg.registry.targets import Target, targets_of

API = Endpoints()
LABEL = "__meta_semreg_"
_NOT_LABEL = re.compile(r"[^a-zA-Z0-9_]")
INLINE = ("s", "p", "o", "match", "environment", "limit")

GROUPS = {"type": "array", "items": {"type": "object", "properties": {
    "targets": {"type": "array", "items": {"type": "string"}},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}


def label_name(key: str) -> str:
    """A `meta.` key as the end of a Prometheus label name (`[a-zA-Z0-9_]`: anything else becomes `_`)."""
    return _NOT_LABEL.sub("_", key)


def group(t: Target) -> dict:
    labels = {LABEL + "instance_id": t.id, LABEL + "service": t.service, LABEL + "environment": t.environment,
              LABEL + "degree": t.degree, LABEL + "scheme": t.scheme, LABEL + "weight": str(t.weight)}
    for key, value in t.meta:
        labels.setdefault(LABEL + "meta_" + label_name(key), value)
    return {"targets": [t.host_port], "labels": labels}


def question(request: Request) -> Question:
    """The saved query named by `query`, or the inline one; never both (a 400)."""
    params = request.query_params
    name = params.get("query")
    knowledge = knowledge_of(request)
    if name is None:
        q = discover_query(params, knowledge.prefixes)
        principal_of(request).require_environment(q.selector.environment)
        return q
    given = sorted(k for k in params if k in INLINE or k.startswith(META))
    if given:
        raise BadRequest(f"query names a saved query, which asks its own question; {', '.join(given)} cannot be "
                         f"given with it.", field=given[0])
    return app_state(request).questions.of(visible(request, name))


@API.route("GET", "/v1/prometheus/targets", scope=READ, summary="Prometheus HTTP service discovery targets",
           params=(Param("query", schema=NAME.schema, description="a saved query's name (or give s, p, o)"),
                   *[dataclasses.replace(p, required=False) for p in PATTERN],
                   Param("limit", schema={"type": "integer", "minimum": 1}), *SELECTOR),
           replies=[Reply(200, GROUPS)], errors=(404,))
async def targets(request: Request) -> Response:
    q = question(request)
    if q.any_status:
        raise BadRequest("Prometheus's targets are routable instances only; status cannot be given.", field="status")
    topic = await coordinator_of(request).discover(q)
    return JSONResponse([group(t) for t in targets_of(topic.payload)])
