"""Discovery: by meaning (`GET /v1/discover`, and the parsing of its query the fast path shares), routing
to a chosen instance and its preview, the exact multi-tag lookup, the registered tags, what a query
expands to, and the concepts of the hierarchy."""
from __future__ import annotations

import re

import orjson
from starlette.requests import Request
from starlette.responses import Response

from semreg.access.tokens import READ
from semreg.errors import BadRequest, Unavailable
from semreg.http import schemas as s
from semreg.http.conjunctive_schemas import ConjunctiveBody, ConjunctiveView
from semreg.http.endpoints import Endpoints, Param, Reply
from semreg.http.requests import bool_param, read_json
from semreg.http.responses import JSONResponse
from semreg.http.routes.common import (
    INDEX_HEADER,
    SELECTOR,
    TAGS_FLAG,
    WATCH,
    coordinator_of,
    knowledge_of,
    lane_of,
    principal_of,
    selector_of,
    term_warnings,
    warned,
    watched,
)
from semreg.http.schemas import TagsBody, validate
from semreg.http.state import app_state
from semreg.knowledge.knowledge import Knowledge
from semreg.rdf.terms import ANY, RDF_TYPE, Tag, parse_component, parse_tags
from semreg.reasoning.explanation import explain
from semreg.reasoning.matching import SIMILAR, degrees_of, parse_match, similarity_of
from semreg.registry.balancer import parse_policy
from semreg.registry.conjunctive import ConjunctiveQuery
from semreg.registry.discovery import DiscoverQuery
from semreg.registry.query_params import conjunctive_query, discover_query, pattern_of
from semreg.registry.questions import Question
from semreg.work.lane import Lane

API = Endpoints()

TERM = {"type": "string", "minLength": 1, "description": "a full IRI, <IRI> or CURIE"}
PATTERN = (Param("s", required=True, schema=TERM, description="subject term"),
           Param("p", schema=TERM, description="predicate term (omitted: any)"),
           Param("o", schema=TERM, description="object term (omitted: any)"),
           Param("match", description="comma list of exact, narrower, broader, overlap and similar; or all (with "
                 "similar or not): similar only when named"),
           Param("min_similarity", schema={"type": "number", "minimum": 0, "maximum": 1},
                 description="the floor of the similar degree (default 0.3); needs similar in match"))


# -- a query's pattern, and the warnings about its terms -------------------------------------------
def pattern_terms(tag: Tag) -> list[tuple[str, str]]:
    return list(zip("spo", tag))


def question_terms(q: Question) -> list[tuple[str, str]]:
    """Each term of a question with the field that named it (`s`; `all[1]`, `provided[0]`)."""
    if not isinstance(q, ConjunctiveQuery):
        return pattern_terms(q.tag)
    named = [(f"all[{n}]", iri) for n, tag in enumerate(q.patterns) for iri in tag]
    return named + [(f"provided[{n}]", iri) for n, tag in enumerate(q.provided or ()) for iri in tag]


async def discover_warnings(knowledge: Knowledge, lane: Lane, q: Question) -> bytes:
    """What a discovery answer adds: the warnings about the query's unknown terms (a 400 with --strict-terms),
    looked for as request work when there are some."""
    named = question_terms(q)
    if knowledge.knows_all(named):
        return b""
    return warned(await lane.run(knowledge.term_warnings, named, what="this question"))


def query_tag(request: Request, purpose: str = "discover") -> Tag:
    return pattern_of(request.query_params, knowledge_of(request).prefixes, purpose)


# -- by meaning, and routing -----------------------------------------------------------------------
@API.route("GET", "/v1/discover", scope=READ, summary="discover by meaning",
           params=(*PATTERN, Param("service"), Param("status", schema={"enum": ["up", "any"]}),
                   Param("limit", schema={"type": "integer", "minimum": 1}),
                   Param("tags", schema=TAGS_FLAG, description="views with their tags (default false)"), *SELECTOR,
                   *WATCH),
           replies=[Reply(200, s.DiscoverView, headers=INDEX_HEADER)])
async def discover(request: Request) -> Response:
    knowledge = knowledge_of(request)
    q = discover_query(request.query_params, knowledge.prefixes)
    principal_of(request).require_environment(q.selector.environment)
    warnings = await discover_warnings(knowledge, lane_of(request), q)
    app_state(request).known_queries.remember(request.scope["query_string"], knowledge.prefixes.version, q, warnings)
    return await discovered(request, q, warnings)


@API.route("POST", "/v1/discover", scope=READ, summary="discover the instances that match every one of several patterns",
           body=ConjunctiveBody, params=WATCH, replies=[Reply(200, ConjunctiveView, headers=INDEX_HEADER)],
           errors=(413, 415))
async def discover_all(request: Request) -> Response:
    body = validate(ConjunctiveBody, await read_json(request, app_state(request).settings.json_body_limit_bytes))
    knowledge = knowledge_of(request)
    q = conjunctive_query(body.fields(), knowledge.prefixes)
    principal_of(request).require_environment(q.selector.environment)
    return await discovered(request, q, await discover_warnings(knowledge, lane_of(request), q))


async def discovered(request: Request, q: Question, warnings: bytes) -> Response:
    """The answer to a discovery (and its watch, with the request's `index` and `wait`), once its query is known
    and the token may read its environment: `GET /v1/discover` and a saved query's."""
    coordinator = coordinator_of(request)
    return await watched(request, await coordinator.discover(q), lambda: coordinator.discover(q), warnings)


_PATH_RE = re.compile(r"^(/[^\s#]*)?$")


ROUTE_PARAMS = (*PATTERN, Param("service"),
                Param("policy", schema={"enum": ["least-load", "spillover", "round-robin", "limit"]}), *SELECTOR)


@API.route("GET", "/v1/route", scope=READ, summary="redirect to a chosen instance",
           params=(*ROUTE_PARAMS, Param("path", schema={"type": "string", "pattern": r"^(/[^\s#]*)?$"})),
           replies=[Reply(307, description="redirect", headers={"Location": {"schema": {"type": "string"}},
                                                              "X-Semreg-Instance": {"schema": {"type": "string"}}})],
           errors=(503,))
async def route(request: Request) -> Response:
    params = request.query_params
    match = parse_match(params.get("match"), params.get("min_similarity"))
    q = DiscoverQuery(query_tag(request, "route by"), match, params.get("service") or None,
                      selector=selector_of(request))
    return await routed(request, q)


async def routed(request: Request, q: Question) -> Response:
    """The redirect to the instance `q` chooses, with the request's `policy` and `path`, once the token may read
    its environment: `GET /v1/route` and a saved query's."""
    params = request.query_params
    policy, limit = parse_policy(params.get("policy"))
    path = params.get("path", "")
    if not _PATH_RE.match(path) or len(path) > 2048:
        raise BadRequest("path must be empty or start with '/', without spaces or '#'.", field="path")
    warnings = await term_warnings(request, question_terms(q), "this route")
    client = request.client
    state = app_state(request)
    try:
        inst = await state.router.route(q, policy, limit or state.settings.balance_limit,
                                        caller=f"{client.host}:{client.port}" if client else None)
    except Unavailable as exc:
        if warnings:
            exc.extra["warnings"] = warnings
        raise
    r = inst.reg
    host = f"[{r.address}]" if ":" in r.address else r.address
    return Response(status_code=307, headers={"Location": f"{r.scheme}://{host}:{r.port}{path}",
                                              "X-Semreg-Instance": inst.id, "Cache-Control": "no-store"})


@API.route("GET", "/v1/route/preview", scope=READ, summary="the instance a route would go to now, without routing",
           params=ROUTE_PARAMS, replies=[Reply(200, s.RoutePreview)])
async def route_preview(request: Request) -> Response:
    params = request.query_params
    policy, limit = parse_policy(params.get("policy"))
    limit = limit or app_state(request).settings.balance_limit
    match = parse_match(params.get("match"), params.get("min_similarity"))
    q = DiscoverQuery(query_tag(request), match, params.get("service") or None,
                      selector=selector_of(request))
    inst, cands = await app_state(request).router.preview(q, policy, limit)
    return JSONResponse({"policy": policy, "limit": limit, "instance": orjson.Fragment(inst.view_json(False)) if inst else None,
                         "candidates": [{"id": c.id, "weight": c.weight, "effective_load": c.effective_load,
                                         "capacity": c.capacity} for c in cands]})


# -- tags and concepts -----------------------------------------------------------------------------
@API.route("POST", "/v1/discover/tags", scope=READ, summary="exact multi-tag lookup", body=s.TagsBody,
           params=(Param("tags", schema=TAGS_FLAG, description="views with their tags (default true)"), *SELECTOR),
           replies=[Reply(200, s.PeersView)], errors=(413, 415))
async def discover_tags(request: Request) -> Response:
    with_tags = bool_param(request, "tags", True)
    selector = selector_of(request)
    body = validate(TagsBody, await read_json(request, app_state(request).settings.json_body_limit_bytes))
    knowledge = knowledge_of(request)
    positions: list[int] = []
    tags = parse_tags(body.tags, knowledge.prefixes, positions)
    warnings = [] if knowledge.knows_every(iri for tag in tags for iri in tag) else await term_warnings(
        request, ((f"tags[{n}]", iri) for tag, n in zip(tags, positions) for iri in tag))  # fields named only if needed
    found, missing = await coordinator_of(request).holders(tags, with_tags, selector)
    parts = [b'{"peers":{']
    for n, tag in enumerate(dict.fromkeys(tags)):
        views = b",".join(i.view_json(with_tags) for i in found[tag])
        parts += [b"," if n else b"", orjson.dumps(tag.text), b":[", views, b"]"]
    parts.append(b"}")
    if missing:
        parts += [b',"partial":true,"missing":', orjson.dumps(list(missing))]
    parts += [warned(warnings), b"}"]
    return JSONResponse(b"".join(parts))


@API.route("GET", "/v1/tags", scope=READ, summary="every registered tag", params=(*SELECTOR, *WATCH),
           replies=[Reply(200, s.TagsView, headers=INDEX_HEADER)])
async def tags(request: Request) -> Response:
    selector = selector_of(request)
    coordinator = coordinator_of(request)
    return await watched(request, await coordinator.tags(selector), lambda: coordinator.tags(selector))


@API.route("GET", "/v1/expand", scope=READ, summary="what a query expands to", params=PATTERN,
           replies=[Reply(200, s.ExpandView)])
async def expand(request: Request) -> Response:
    query = query_tag(request, "expand")
    match = parse_match(request.query_params.get("match"), request.query_params.get("min_similarity"))
    warnings = await term_warnings(request, pattern_terms(query), "this expansion")
    matched = await coordinator_of(request).matching_tags(query, match)
    principal = principal_of(request)
    if principal.bound:  # only the tags of its environments' instances, as a server holding only those
        assert principal.environments is not None
        visible = await coordinator_of(request).tags_in(principal.environments)
        matched = [m for m in matched if m[0] in visible]
    knowledge = knowledge_of(request)
    hierarchy = knowledge.hierarchy
    return JSONResponse({"query": query.as_json(), "match": degrees_of(match),
                         "components": knowledge.expand(query, match),
                         "tags": [{"tag": t.as_json(), "degree": d, "distance": 0 if d == SIMILAR else n,
                                   **({"similarity": similarity_of(n)} if d == SIMILAR else {}),
                                   "why": explain(hierarchy, t, query, d == SIMILAR)} for t, d, n in matched],
                         **({"warnings": warnings} if warnings else {})})


@API.route("GET", "/v1/concepts", scope=READ, summary="every concept of the hierarchy with its asserted parents",
           replies=[Reply(200, s.ConceptsView)])
async def concepts(request: Request) -> Response:
    return JSONResponse({"concepts": knowledge_of(request).concepts()})


@API.route("GET", "/v1/concepts/{term:path}", scope=READ, summary="a concept of the hierarchy",
           params=(Param("term", "path", True),), replies=[Reply(200, s.ConceptView)], errors=(404,))
async def concept(request: Request) -> Response:
    term = request.path_params["term"]
    iri = RDF_TYPE if term == "a" else parse_component(term, knowledge_of(request).prefixes)
    if iri == ANY:
        raise BadRequest("sr:Any is the wildcard, not a concept.", field="term")
    principal = principal_of(request)
    if principal.bound:  # whether its environments' tags name it: others' use of a term is not its to learn
        assert principal.environments is not None
        registered = any(iri in tag for tag in await coordinator_of(request).tags_in(principal.environments))
    else:
        registered = await coordinator_of(request).is_registered_term(iri)
    return JSONResponse(knowledge_of(request).concept(iri, lambda _: registered))

