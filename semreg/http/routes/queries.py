"""Saved queries: a discovery question kept under a DNS-safe name (`PUT`, `GET`, `DELETE /v1/queries/{name}`,
the list), and its answers through the handlers of `GET /v1/discover` and `GET /v1/route`
(`/v1/queries/{name}/discover`, `/route`), watches included. On every member of a cluster, like prefixes.

Saving takes the `write` scope, and a query is its saver's: only that token or an admin token replaces or
removes it (another token: 403). Reading one, the list and its answers take `read`; a token bound to
environments sees only the queries of its environments (another's: 404, as a server holding only its
environments would answer), and saving one warns it that no registered tag matches as such a server
would: only its environments' tags count.
"""
from __future__ import annotations

import dataclasses
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response

from semreg.access.tokens import READ, WRITE, Principal
from semreg.errors import BadRequest, Forbidden, NotFound
from semreg.http.conjunctive_schemas import ConjunctiveView
from semreg.http.endpoints import REF, Endpoints, Param, Reply
from semreg.http.requests import bool_param, read_json
from semreg.http.responses import JSONResponse
from semreg.http.routes.common import (
    INDEX_HEADER,
    TAGS_FLAG,
    WATCH,
    cluster_of,
    coordinator_of,
    knowledge_of,
    lane_of,
    principal_of,
    term_warnings,
)
from semreg.http.routes.discovery import discover_warnings, discovered, question_terms, routed
from semreg.http.schemas import DiscoverView, TagInput, TagView, validate
from semreg.http.state import app_state
from semreg.knowledge.queries import NAME_PATTERN, SavedQuery, check_name
from semreg.registry import saved as saving
from semreg.registry.discovery import DiscoverQuery
from semreg.registry.query_params import META

API = Endpoints()
NAME = Param("name", "path", True, {"type": "string", "pattern": NAME_PATTERN}, "the query's name, a DNS label")
# what a saved query's answers take of the request: the rest is the query's own
OWN = frozenset(("s", "p", "o", "match", "environment", "limit", "service", "status"))


class SavedQueryBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    s: str | None = Field(default=None, max_length=4096, description="subject term (required)")
    p: str | None = Field(default=None, max_length=4096, description="predicate term (omitted: any)")
    o: str | None = Field(default=None, max_length=4096, description="object term (omitted: any)")
    match: str | list[str] | None = Field(default=None, description="degrees, as GET /v1/discover's match")
    min_similarity: float | None = Field(default=None, description="with similar in match: the floor of a similar "
                                                                   "match's similarity, in [0, 1]")
    environment: str | None = Field(default=None, max_length=256, description="default 'default'; '*' for all")
    meta: dict[str, str] = Field(default_factory=dict, description="meta.KEY=VALUE filters, all of which must hold")
    limit: int | None = Field(default=None, description="at most this many instances")
    all: list[TagInput] | None = Field(default=None, description="the conjunctive form, instead of s, p, o: 1-64 "
                                       "patterns, each of which an instance must match (as POST /v1/discover)")
    provided: list[TagInput] | None = Field(default=None, description="with all: the tags the caller can supply "
                                            "(as POST /v1/discover)")
    rank: Literal["degree", "score"] | None = Field(default=None, description="with all and similar: degree (the "
                                                    "default) or score (as POST /v1/discover)")


class SavedQueryView(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    s: str | None = Field(default=None, description="one pattern's subject (a conjunctive query has all instead)")
    p: str | None = None
    o: str | None = None
    all: list[TagView] | None = Field(default=None, description="a conjunctive query's patterns")
    provided: list[TagView] | None = Field(default=None, description="a conjunctive query's provided tags")
    match: str
    min_similarity: float | None = Field(default=None, description="the floor of the similar degree, when given")
    rank: str | None = Field(default=None, description="score when a conjunctive query ranks by the matchmaker's "
                                                       "score alone")
    environment: str
    meta: dict[str, str]
    limit: int | None = None
    owner: str | None = None


# -- who may see and change a saved query ----------------------------------------------------------
def visible(request: Request, name: str) -> SavedQuery:
    """The saved query `name` as the caller may see it: 404 when there is none, or when it reads an
    environment the token is not bound to."""
    saved = knowledge_of(request).queries.get(check_name(name))
    if not principal_of(request).sees(saved.environment):  # a bound token never sees '*'
        raise NotFound(f"no query is saved as '{name}'.", query=name)
    return saved


def require_owner(principal: Principal, saved: SavedQuery) -> None:
    if principal.admin or saved.owner == principal.name:
        return
    raise Forbidden(f"the query '{saved.name}' was saved by another token; only its owner or an admin token may "
                    f"change it.", query=saved.name)


def owner_of(request: Request) -> str | None:
    return principal_of(request).name if app_state(request).tokens.enabled else None


def no_own_parameters(request: Request) -> None:
    """A 400 for a request that asks a saved query with parameters of its own question (they would conflict)."""
    given = sorted(k for k in request.query_params if k in OWN or k.startswith(META))
    if given:
        raise BadRequest(f"a saved query asks its own question; {', '.join(given)} cannot be given with it (ask "
                         f"GET /v1/discover for another question).", field=given[0])


# -- the queries -----------------------------------------------------------------------------------
@API.route("GET", "/v1/queries", scope=READ, summary="the saved queries",
           replies=[Reply(200, {"type": "array", "items": SavedQueryView.model_json_schema()})])
async def list_queries(request: Request) -> Response:
    principal = principal_of(request)
    return JSONResponse([q.as_json() for q in knowledge_of(request).queries.all()
                         if principal.sees(q.environment)])


@API.route("GET", "/v1/queries/{name}", scope=READ, summary="a saved query", params=(NAME,),
           replies=[Reply(200, SavedQueryView)], errors=(404,))
async def get_query(request: Request) -> Response:
    return JSONResponse(visible(request, request.path_params["name"]).as_json())


@API.route("PUT", "/v1/queries/{name}", scope=WRITE, summary="save a discovery query under a name", params=(NAME,),
           body=SavedQueryBody, replies=[Reply(200, SavedQueryView), Reply(201, SavedQueryView)],
           errors=(403, 413, 415))
async def put_query(request: Request) -> Response:
    name = check_name(request.path_params["name"])
    body = validate(SavedQueryBody, await read_json(request, app_state(request).settings.json_body_limit_bytes))
    fields = body.model_dump()
    if isinstance(fields["match"], list):
        fields["match"] = ",".join(fields["match"])
    knowledge = knowledge_of(request)
    stored, q = saving.checked(fields, knowledge.prefixes)
    principal = principal_of(request)
    principal.require_environment(q.selector.environment)
    previous = knowledge.queries.by_name.get(name)
    if previous is not None:
        require_owner(principal, previous)
    warnings = await term_warnings(request, question_terms(q), "this query")
    coordinator = coordinator_of(request)
    # a bound token hears of the tags of its environments' instances only, as a server holding only those
    visible = await coordinator.tags_in(principal.environments or ()) if principal.bound else None
    for n, pattern in enumerate(q.patterns):
        matched = await coordinator.matching_tags(pattern, q.match)
        if not any(visible is None or m[0] in visible for m in matched):
            where, what = ("query", "this query") if isinstance(q, DiscoverQuery) else (f"all[{n}]", "this pattern")
            warnings.append({"field": where, "message": f"no registered tag matches {what} under the ontologies of "
                             f"now: it answers nothing until an instance registers a tag it matches."})
    cluster = cluster_of(request)
    saved = SavedQuery(name, stored, previous.owner if previous is not None else owner_of(request))
    created = await knowledge.queries.put(saved, by=principal.name)
    if cluster is not None:
        await cluster.publish_query(saved)
    return JSONResponse({**saved.as_json(), **({"warnings": warnings} if warnings else {})},
                        status_code=201 if created else 200)


@API.route("DELETE", "/v1/queries/{name}", scope=WRITE, summary="remove a saved query", params=(NAME,),
           replies=[Reply(204, description="removed")], errors=(403, 404))
async def delete_query(request: Request) -> Response:
    saved = visible(request, request.path_params["name"])
    principal = principal_of(request)
    require_owner(principal, saved)
    cluster = cluster_of(request)
    await knowledge_of(request).queries.delete(saved.name, by=principal.name)
    if cluster is not None:
        await cluster.publish_query_removal(saved.name)
    return Response(status_code=204)


# -- its answers -----------------------------------------------------------------------------------
@API.route("GET", "/v1/queries/{name}/discover", scope=READ, summary="what a saved query discovers now",
           params=(NAME, Param("tags", schema=TAGS_FLAG, description="views with their tags (default false)"), *WATCH),
           replies=[Reply(200, {"oneOf": [{"$ref": REF + DiscoverView.__name__}, {"$ref": REF + ConjunctiveView.__name__}]},
                          description="as GET /v1/discover answers, or POST /v1/discover for a query of all",
                          headers=INDEX_HEADER)], errors=(404,))
async def discover_saved(request: Request) -> Response:
    no_own_parameters(request)
    knowledge = knowledge_of(request)
    q = app_state(request).questions.of(visible(request, request.path_params["name"]))
    q = dataclasses.replace(q, tags=bool_param(request, "tags", False))
    return await discovered(request, q, await discover_warnings(knowledge, lane_of(request), q))


@API.route("GET", "/v1/queries/{name}/route", scope=READ, summary="redirect to an instance a saved query chooses",
           params=(NAME, Param("policy", schema={"enum": ["least-load", "spillover", "round-robin", "limit"]}),
                   Param("path", schema={"type": "string", "pattern": r"^(/[^\s#]*)?$"})),
           replies=[Reply(307, description="redirect", headers={"Location": {"schema": {"type": "string"}},
                                                              "X-Semreg-Instance": {"schema": {"type": "string"}}})],
           errors=(404, 503))
async def route_saved(request: Request) -> Response:
    no_own_parameters(request)
    q = app_state(request).questions.of(visible(request, request.path_params["name"]))
    return await routed(request, q)

