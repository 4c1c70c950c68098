"""The HTTP API: each route declared once (`semreg.http.endpoints`) with a thin handler: parse, call the
domain (the coordinator, the knowledge), shape the response. The router's table, the access rules and
`/openapi.json` are generated from these declarations.

Handlers find the node's parts on `request.app.state`: `coordinator`, `knowledge`, `router`,
`settings`, `tokens`, `known_queries`, `ready` and `starting` (callables), `cluster` (None on a node alone).
"""
from __future__ import annotations

import functools
import re
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import orjson
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response

from semreg.access.tokens import ADMIN, OPEN, READ, WRITE, Principal
from semreg.cluster.ring import Ring
from semreg.errors import BadRequest, NotFound, Unauthorized, Unavailable
from semreg.http import schemas as s
from semreg.http.endpoints import Endpoints, Param, Reply
from semreg.http.openapi import document_bytes
from semreg.http.requests import bool_param, bool_value, int_value, read_body, read_json, watch_params
from semreg.http.responses import JSONResponse
from semreg.http.schemas import ID_PATTERN, BatchBody, HeartbeatBody, InstanceBody, PrefixBody, TagsBody, validate
from semreg.knowledge.knowledge import Knowledge
from semreg.rdf import parsing
from semreg.rdf.terms import ANY, RDF_TYPE, PrefixMap, Tag, parse_component, parse_tags
from semreg.reasoning.explanation import explain
from semreg.reasoning.lexicon import MAX_WARNINGS
from semreg.reasoning.matching import DEGREES, parse_match
from semreg.registry.balancer import parse_policy
from semreg.registry.coordinator import Coordinator
from semreg.registry.discovery import DiscoverQuery
from semreg.registry.instances import Registration
from semreg.registry.selector import Selector, parse_selector
from semreg.registry.watch import Topic

if TYPE_CHECKING:
    from semreg.cluster.cluster import Cluster

API = Endpoints()
_ID = re.compile(ID_PATTERN)

# -- shared parameters and replies -----------------------------------------------------------------
TERM = {"type": "string", "minLength": 1, "description": "a full IRI, <IRI> or CURIE"}
PATTERN = (Param("s", required=True, schema=TERM, description="subject term"),
           Param("p", schema=TERM, description="predicate term (omitted: any)"),
           Param("o", schema=TERM, description="object term (omitted: any)"),
           Param("match", description="comma list of exact, narrower, broader, overlap; or all"))
WATCH = (Param("index", schema={"type": "integer", "minimum": 0}, description="X-Semreg-Index of the last read"),
         Param("wait", description="how long to block, e.g. 30s (cap 300 s)"))
ENVIRONMENT = Param("environment", description="the environment read: default 'default'; '*' reads every environment")
META = Param("meta.", prefix=True, description="meta.KEY=VALUE: only instances whose meta has KEY set to VALUE "
                                             "(repeatable: all must hold)")
SELECTOR = (ENVIRONMENT, META)  # every read of instances and its watch takes them
ID = Param("id", "path", True, {"type": "string", "pattern": ID_PATTERN}, "instance id")
INDEX_HEADER = {"X-Semreg-Index": {"schema": {"type": "integer", "minimum": 1}}}
RDF_TYPES = list(parsing.REPRESENTATIONS)
OBJECT = {"type": "object"}


def coordinator_of(request: Request) -> Coordinator:
    return request.app.state.coordinator


def knowledge_of(request: Request) -> Knowledge:
    return request.app.state.knowledge


def principal_of(request: Request) -> Principal:
    return getattr(request.state, "principal", None) or OPEN


def owner_of(request: Request) -> str | None:
    """The name registrations are owned by: the token's, when tokens are in force."""
    return principal_of(request).name if request.app.state.tokens.enabled else None


async def check_owner(request: Request, instance_id: str) -> None:
    """403 unless the caller may change this instance (its owner, or an admin, in an environment the token
    may write in); 404 if there is none (an admin is not looked up: the change itself answers 404)."""
    principal = principal_of(request)
    if principal.admin:
        return
    inst = await coordinator_of(request).get(instance_id)
    principal.require_environment(inst.reg.environment)
    principal.require_owner(inst.reg.owner, instance_id)


async def check_may_replace(request: Request, regs: list[Registration]) -> None:
    """403 if one of these registrations is in an environment the token may not write in, or replaces an
    instance registered by another token or in such an environment (one lookup for all)."""
    principal = principal_of(request)
    if principal.admin:
        return
    for reg in regs:
        principal.require_environment(reg.environment)
    for iid, (owner, environment) in (await coordinator_of(request).registered_by([r.id for r in regs])).items():
        principal.require_environment(environment)
        principal.require_owner(owner, iid)


def selector_of(request: Request) -> Selector:
    """The read's `environment=` and `meta.KEY=VALUE` filters, in an environment the token may read."""
    selector = selector_from(request.query_params)
    principal_of(request).require_environment(selector.environment)
    return selector


def selector_from(params: QueryParams) -> Selector:
    prefix = META.name
    return parse_selector(params.get(ENVIRONMENT.name),
                          [(k[len(prefix):], v) for k, v in params.multi_items() if k.startswith(prefix)])


def path_id(request: Request) -> str:
    iid = request.path_params["id"]
    if not _ID.match(iid):
        raise BadRequest(f"'{iid[:140]}' is not a valid instance id: 1-128 of A-Z a-z 0-9 . _ : -", field="id")
    return iid


def registration(request: Request, data: Any, instance_id: str | None, where: str = ""
                 ) -> tuple[Registration, list[dict[str, Any]]]:
    """One registration body as a `Registration` (400 naming the field otherwise), and the warnings about
    the terms of its tags that no ontology knows."""
    settings = request.app.state.settings
    body = validate(InstanceBody, data, where)
    iid = instance_id or body.id
    at = f"{where}." if where else ""
    if instance_id is not None and body.id is not None and body.id != instance_id:
        raise BadRequest(f"{at}id '{body.id}' differs from the id in the path '{instance_id}'.", field="id")
    if iid is None:
        raise BadRequest(f"{at}id is required.", field="id")
    if len(body.tags) > settings.max_tags_per_instance:
        raise BadRequest(f"{at}tags: {len(body.tags)} tags is more than the {settings.max_tags_per_instance} an "
                         f"instance may have.", field="tags")
    knowledge = knowledge_of(request)
    positions: list[int] = []
    try:
        tags = parse_tags(body.tags, knowledge.prefixes, positions)
    except BadRequest as exc:
        if where:
            exc.message = f"{where}.{exc.message}"
        raise
    warnings = knowledge.term_warnings((f"{at}tags[{n}]", iri) for tag, n in zip(tags, positions) for iri in tag)
    return Registration(id=iid, service=body.service, address=body.address, port=body.port, scheme=body.scheme,
                        tags=tuple(tags), weight=body.weight, capacity=body.capacity, ttl_s=float(body.ttl),
                        deregister_after_s=float(body.deregister_after),
                        check=body.check.model_dump(exclude_none=True) if body.check else None,
                        meta=dict(body.meta), owner=owner_of(request), environment=body.environment), warnings


def warned(warnings: list[dict[str, Any]]) -> bytes:
    """The `"warnings"` member to add at the end of a JSON object answer (`b""` for none)."""
    return b',"warnings":' + orjson.dumps(warnings) if warnings else b""


def with_members(body: bytes, members: bytes) -> bytes:
    """A JSON object's encoding with `members` (`,"name":value...`) added at its end."""
    return body[:-1] + members + b"}" if members else body


def pattern_terms(tag: Tag) -> list[tuple[str, str]]:
    return list(zip("spo", tag))


def discover_warnings(knowledge: Knowledge, q: DiscoverQuery) -> bytes:
    """What a discovery answer adds: the warnings about the query's unknown terms (a 400 with --strict-terms)."""
    return warned(knowledge.term_warnings(pattern_terms(q.tag)))


async def watched(request: Request, topic: Topic, refresh: Any, members: bytes = b"") -> JSONResponse:
    """A watchable read: the topic's body (with `members` added) and index; with `?index=N&wait=`, after its
    result changes."""
    index, wait = watch_params(request, request.app.state.settings.watch_max_wait_s)
    if index is not None:
        await coordinator_of(request).hub.wait(topic, index, wait)
        topic = await refresh()
    headers = {"X-Semreg-Index": str(topic.index)}
    missing = getattr(topic.payload, "missing", ())
    if missing:
        headers["X-Semreg-Partial"] = ",".join(missing)
    return JSONResponse(with_members(topic.body or b"", members) if members else topic.body, headers=headers)


def query_tag(request: Request, purpose: str = "discover") -> Tag:
    return pattern_of(request.query_params, knowledge_of(request).prefixes, purpose)


def pattern_of(params: Mapping[str, str], prefixes: PrefixMap, purpose: str = "discover") -> Tag:
    """The pattern `s`, `p`, `o` of a query; `purpose` says what it is for in the sentence when `s` is missing."""
    s_ = params.get("s")
    if s_ is None or not s_.strip():
        raise BadRequest(f"s is required: the subject term of the pattern to {purpose} (p and o are optional).",
                         field="s")
    p, o = params.get("p") or None, params.get("o") or None
    return Tag(parse_component(s_, prefixes), parse_component(p, prefixes, predicate=True),
               parse_component(o, prefixes))


# -- discovery (the hot routes first: the router tries them in order) -------------------------------
TAGS_FLAG = {"type": "boolean"}


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
    warnings = discover_warnings(knowledge, q)
    request.app.state.known_queries.remember(request.scope["query_string"], knowledge.prefixes.version, q, warnings)
    coordinator = coordinator_of(request)
    return await watched(request, await coordinator.discover(q), lambda: coordinator.discover(q), warnings)


def discover_query(params: QueryParams, prefixes: PrefixMap) -> DiscoverQuery:
    """The query of a `GET /v1/discover` (a 400 naming the parameter at fault otherwise). The caller checks
    that the token may read its environment."""
    status = params.get("status")
    if status not in (None, "", "up", "any"):
        raise BadRequest(f"status takes 'up' (the default) or 'any', not '{status[:40]}'.", field="status")
    return DiscoverQuery(pattern_of(params, prefixes), parse_match(params.get("match")), params.get("service") or None,
                         status == "any", int_value(params, "limit", 1, 1_000_000), bool_value(params, "tags", False),
                         selector_from(params))


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
    policy, limit = parse_policy(params.get("policy"))
    path = params.get("path", "")
    if not _PATH_RE.match(path) or len(path) > 2048:
        raise BadRequest("path must be empty or start with '/', without spaces or '#'.", field="path")
    q = DiscoverQuery(query_tag(request, "route by"), parse_match(params.get("match")), params.get("service") or None,
                      selector=selector_of(request))
    warnings = knowledge_of(request).term_warnings(pattern_terms(q.tag))
    client = request.client
    try:
        inst = await request.app.state.router.route(q, policy, limit or request.app.state.settings.balance_limit,
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
    limit = limit or request.app.state.settings.balance_limit
    q = DiscoverQuery(query_tag(request), parse_match(params.get("match")), params.get("service") or None,
                      selector=selector_of(request))
    inst, cands = await request.app.state.router.preview(q, policy, limit)
    return JSONResponse({"policy": policy, "limit": limit, "instance": orjson.Fragment(inst.view_json(False)) if inst else None,
                         "candidates": [{"id": c.id, "weight": c.weight, "effective_load": c.effective_load,
                                         "capacity": c.capacity} for c in cands]})


@API.route("PUT", "/v1/instances/{id}/heartbeat", scope=WRITE, summary="renew the lease; optionally report load and status",
           params=(ID,), body=s.HeartbeatBody, body_required=False, replies=[Reply(200, s.HeartbeatView)],
           errors=(404, 413, 415))
async def heartbeat(request: Request) -> Response:
    settings = request.app.state.settings
    iid = path_id(request)
    raw = await read_body(request, settings.json_body_limit_bytes)
    body = HeartbeatBody()
    if raw.strip():
        from semreg.http.schemas import parse_json

        body = validate(HeartbeatBody, parse_json(raw))
    await check_owner(request, iid)
    inst = await coordinator_of(request).heartbeat(iid, body.load, body.status)
    return JSONResponse({"id": inst.id, "status": inst.status, "expires_at": inst.expires_at_text()})


# -- operations ------------------------------------------------------------------------------------
@API.route("GET", "/v1/token/self", scope=None, summary="the presented token: its name and scopes",
           replies=[Reply(200, s.TokenView)], errors=(401,))
async def token_self(request: Request) -> Response:
    """Open, so that a token of any scope can learn what it may do; the token is checked here (401 when it
    is not valid). Without one, the caller is anonymous, with every scope when no tokens are in force and
    with none when they are."""
    tokens = request.app.state.tokens
    if tokens.enabled and not request.headers.get("authorization"):
        return JSONResponse({"name": OPEN.name, "scopes": [], "tokens": True})
    try:
        principal = tokens.authenticate(request.headers.get("authorization"))
    except Unauthorized as exc:
        return JSONResponse(exc.body(), status_code=401, headers={"WWW-Authenticate": 'Bearer realm="semreg"'})
    scopes = [scope for scope in (READ, WRITE, ADMIN) if principal.admin or scope in principal.scopes]
    return JSONResponse({"name": principal.name, "scopes": scopes, "tokens": tokens.enabled})


@API.route("GET", "/healthz", scope=None, summary="alive", replies=[Reply(200, OBJECT)])
async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "alive"})


@API.route("GET", "/readyz", scope=None, summary="ready: store open, closure built, ring joined",
           replies=[Reply(200, OBJECT, "ready, or degraded: serving on the last ring known while etcd is away"),
                    Reply(503, s.ErrorView, "starting")])
async def readyz(request: Request) -> Response:
    state = request.app.state
    if not state.ready():
        return JSONResponse({"status": "starting", "error": state.starting()}, status_code=503,
                            headers={"Retry-After": "1"})
    cluster = state.cluster
    degraded = cluster is not None and cluster.degraded
    return JSONResponse({"status": "degraded" if degraded else "ready", "store": "open", "closure": "built",
                         "ring": "last known (etcd cannot be reached)" if degraded else "joined",
                         **state.readiness()})


@API.route("GET", "/v1/cluster", scope=READ, summary="cluster members", replies=[Reply(200, s.ClusterView)])
async def cluster(request: Request) -> Response:
    if request.app.state.cluster is not None:
        return JSONResponse(request.app.state.cluster.describe())
    settings = request.app.state.settings
    me = settings.node_id or f"{settings.host}:{settings.port}"
    members = [{"id": me, "address": settings.advertise or f"http://{settings.host}:{settings.port}",
                "status": "alive"}]
    return JSONResponse({"node": me, "members": members, "replicas": 1, "checksum": Ring([me]).checksum,
                         "revision": 0, "degraded": False})


def cluster_of(request: Request) -> Cluster | None:
    """The cluster this node is in, refusing a change every node must make while etcd is away."""
    cluster = request.app.state.cluster
    if cluster is not None and cluster.degraded:
        raise Unavailable("the cluster's etcd cannot be reached: ontologies and prefixes change on every node "
                          "at once, which waits until it answers again.", retry_after_s=5)
    return cast("Cluster | None", cluster)


# -- instances -------------------------------------------------------------------------------------
INSTANCE_LIST = {"type": "array", "items": {"$ref": "#/components/schemas/InstanceView"}}


@API.route("GET", "/v1/instances", scope=READ, summary="list instances",
           params=(Param("service"), Param("tags", schema=TAGS_FLAG, description="views with their tags (default true)"),
                   *SELECTOR, *WATCH),
           replies=[Reply(200, INSTANCE_LIST, headers=INDEX_HEADER)])
async def list_instances(request: Request) -> Response:
    service = request.query_params.get("service") or None
    tags = bool_param(request, "tags", True)
    selector = selector_of(request)
    coordinator = coordinator_of(request)
    return await watched(request, await coordinator.instances(service, tags, selector),
                         lambda: coordinator.instances(service, tags, selector))


@API.route("POST", "/v1/instances", scope=WRITE, summary="register with a server-chosen id", body=s.InstanceBody,
           replies=[Reply(201, s.RegisteredInstanceView)], errors=(413, 415))
async def post_instance(request: Request) -> Response:
    settings = request.app.state.settings
    data = await read_json(request, settings.json_body_limit_bytes)
    iid = data.get("id") if isinstance(data, dict) else None
    reg, warnings = registration(request, data, None if iid is not None else uuid.uuid4().hex)
    principal_of(request).require_environment(reg.environment)
    if iid is not None and await coordinator_of(request).exists(iid):
        raise BadRequest(f"an instance '{iid}' already exists; replace it with PUT /v1/instances/{iid}.", field="id")
    (inst, _), = await coordinator_of(request).register([reg])
    return JSONResponse(with_members(inst.view_json(), warned(warnings)), status_code=201,
                        headers={"Location": f"/v1/instances/{inst.id}"})


@API.route("POST", "/v1/instances/batch", scope=WRITE, summary="register many, all or nothing", body=s.BatchBody,
           replies=[Reply(200, s.RegisteredView)], errors=(413, 415))
async def batch_instances(request: Request) -> Response:
    settings = request.app.state.settings
    data = await read_json(request, settings.json_body_limit_bytes)
    body = validate(BatchBody, data)
    if len(body.instances) > settings.max_batch_instances:
        raise BadRequest(f"instances: {len(body.instances)} instances is more than the "
                         f"{settings.max_batch_instances} a batch may hold.", field="instances")
    regs: list[Registration] = []
    warnings: list[dict[str, Any]] = []
    for n, item in enumerate(body.instances):
        where = f"instances[{n}]"
        iid = item.get("id") if isinstance(item, dict) else None
        if iid is None and isinstance(item, dict):
            iid = uuid.uuid4().hex
        reg, warned_here = registration(request, item, iid if isinstance(iid, str) else None, where)
        regs.append(reg)
        warnings += warned_here[:MAX_WARNINGS - len(warnings)]
    await check_may_replace(request, regs)
    if regs:
        await coordinator_of(request).register(regs, views=False)
    return JSONResponse({"registered": len(regs), **({"warnings": warnings} if warnings else {})})


@API.route("GET", "/v1/instances/{id}", scope=READ, summary="one instance", params=(ID,),
           replies=[Reply(200, s.InstanceView)], errors=(404,))
async def get_instance(request: Request) -> Response:
    inst = await coordinator_of(request).get(path_id(request))
    principal_of(request).require_environment(inst.reg.environment)
    return JSONResponse(inst.view_json())


@API.route("PUT", "/v1/instances/{id}", scope=WRITE, summary="create or replace", params=(ID,), body=s.InstanceBody,
           replies=[Reply(200, s.RegisteredInstanceView, "replaced"), Reply(201, s.RegisteredInstanceView, "created")],
           errors=(413, 415))
async def put_instance(request: Request) -> Response:
    settings = request.app.state.settings
    iid = path_id(request)
    data = await read_json(request, settings.json_body_limit_bytes)
    reg, warnings = registration(request, data, iid)
    await check_may_replace(request, [reg])
    (inst, created), = await coordinator_of(request).register([reg])
    return JSONResponse(with_members(inst.view_json(), warned(warnings)), status_code=201 if created else 200)


@API.route("DELETE", "/v1/instances/{id}", scope=WRITE, summary="deregister", params=(ID,),
           replies=[Reply(204, description="deregistered")], errors=(404,))
async def delete_instance(request: Request) -> Response:
    iid = path_id(request)
    await check_owner(request, iid)
    await coordinator_of(request).deregister(iid)
    return Response(status_code=204)


# -- more discovery --------------------------------------------------------------------------------
@API.route("POST", "/v1/discover/tags", scope=READ, summary="exact multi-tag lookup", body=s.TagsBody,
           params=(Param("tags", schema=TAGS_FLAG, description="views with their tags (default true)"), *SELECTOR),
           replies=[Reply(200, s.PeersView)], errors=(413, 415))
async def discover_tags(request: Request) -> Response:
    with_tags = bool_param(request, "tags", True)
    selector = selector_of(request)
    body = validate(TagsBody, await read_json(request, request.app.state.settings.json_body_limit_bytes))
    knowledge = knowledge_of(request)
    positions: list[int] = []
    tags = parse_tags(body.tags, knowledge.prefixes, positions)
    warnings = knowledge.term_warnings((f"tags[{n}]", iri) for tag, n in zip(tags, positions) for iri in tag)
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
    match = parse_match(request.query_params.get("match"))
    warnings = knowledge_of(request).term_warnings(pattern_terms(query))
    matched = await coordinator_of(request).matching_tags(query, match)
    knowledge = knowledge_of(request)
    hierarchy = knowledge.hierarchy
    return JSONResponse({"query": query.as_json(), "match": sorted(match, key=DEGREES.index),
                         "components": knowledge.expand(query, match),
                         "tags": [{"tag": t.as_json(), "degree": d, "distance": n, "why": explain(hierarchy, t, query)}
                                  for t, d, n in matched],
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
    registered = await coordinator_of(request).is_registered_term(iri)
    return JSONResponse(knowledge_of(request).concept(iri, lambda _: registered))


# -- ontologies ------------------------------------------------------------------------------------
RDF_CONTENT = {t: {"schema": {"type": "string"}} for t in RDF_TYPES}
NAME = Param("name", "path", True, {"type": "string", "pattern": r"^[A-Za-z0-9._-]{1,128}$"})


@API.route("GET", "/v1/ontologies", scope=READ, summary="uploaded ontologies; watchable", params=WATCH,
           replies=[Reply(200, {"type": "array", "items": {"$ref": "#/components/schemas/OntologyView"}},
                          headers=INDEX_HEADER)])
async def list_ontologies(request: Request) -> Response:
    knowledge = knowledge_of(request)
    hub = coordinator_of(request).hub

    async def topic() -> Topic:
        # Every upload or removal installs a new hierarchy, which recomputes every watched topic.
        async def compute() -> tuple[Any, list[dict[str, Any]]]:
            metas = [m.as_json() for m in sorted(knowledge.ontologies.metas.values(), key=lambda m: m.name)]
            return tuple((m["name"], m["uploaded_at"], m["triples"]) for m in metas), metas

        return await hub.topic(("ontologies",), compute, lambda changes: False, orjson.dumps)

    return await watched(request, await topic(), topic)


@API.route("GET", "/v1/ontologies/{name}", scope=READ, summary="an ontology as RDF, by Accept",
           params=(Param("name", "path", True),), replies=[Reply(200, description="RDF", content=RDF_CONTENT)],
           errors=(404, 406))
async def get_ontology(request: Request) -> Response:
    ontologies = knowledge_of(request).ontologies
    name = request.path_params["name"]
    if name not in ontologies:
        raise NotFound(f"no ontology named '{name[:128]}'.")
    media, fmt = parsing.choose_representation(request.headers.get("accept"))
    data = ontologies.rdf(name, fmt)
    return Response(data, media_type=media + ("; charset=utf-8" if media != "application/ld+json" else ""))


@API.route("PUT", "/v1/ontologies/{name}", scope=ADMIN, summary="upload or replace; re-reasons", params=(NAME,),
           body=RDF_CONTENT, replies=[Reply(200, s.OntologyStored), Reply(201, s.OntologyStored)], errors=(413, 415))
async def put_ontology(request: Request) -> Response:
    ontologies = knowledge_of(request).ontologies
    name = parsing.validate_name(request.path_params["name"])
    parsing.media_type_of(request.headers.get("content-type"))
    started = time.perf_counter()
    body = await read_body(request, request.app.state.settings.ontology_body_limit_bytes, "the ontology")
    cluster = cluster_of(request)
    change = await ontologies.put(name, body, request.headers.get("content-type"))
    answer = {**change.meta.as_json(), "inferred_total": change.inferred_total, "reasoning_ms": round(change.reasoning_ms, 1),
              "timings_ms": {k: round(v, 1) for k, v in change.timings_ms.items()}, "concepts": change.concepts}
    if cluster is not None:
        answer.update(await cluster.publish_ontology(name, change.meta.sha256, change.meta.media_type))
    answer["ms"] = round((time.perf_counter() - started) * 1000, 1)
    return JSONResponse(answer, status_code=201 if change.created else 200)


@API.route("DELETE", "/v1/ontologies/{name}", scope=ADMIN, summary="remove; re-reasons",
           params=(Param("name", "path", True),), replies=[Reply(204, description="removed")], errors=(404,))
async def delete_ontology(request: Request) -> Response:
    name = request.path_params["name"]
    cluster = cluster_of(request)
    await knowledge_of(request).ontologies.delete(name)
    if cluster is not None:
        await cluster.publish_ontology(name, None)
    return Response(status_code=204)


# -- prefixes --------------------------------------------------------------------------------------
PREFIX = Param("prefix", "path", True)


@API.route("GET", "/v1/prefixes", scope=READ, summary="known CURIE prefixes",
           replies=[Reply(200, {"type": "object", "additionalProperties": {"type": "string"}})])
async def list_prefixes(request: Request) -> Response:
    return JSONResponse(knowledge_of(request).prefixes.as_dict())


@API.route("GET", "/v1/prefixes/{prefix}", scope=READ, summary="one prefix", params=(PREFIX,),
           replies=[Reply(200, s.PrefixView)], errors=(404,))
async def get_prefix(request: Request) -> Response:
    prefix = request.path_params["prefix"]
    iri = knowledge_of(request).prefixes.get(prefix)
    if iri is None:
        raise NotFound(f"no prefix '{prefix[:64]}' is known.")
    return JSONResponse({"prefix": prefix, "iri": iri})


@API.route("PUT", "/v1/prefixes/{prefix}", scope=ADMIN, summary="set a prefix",
           params=(PREFIX, Param("force", schema={"type": "boolean"},
                                 description="redefine a prefix an ontology declares (otherwise 409)")),
           body=s.PrefixBody, replies=[Reply(200, s.PrefixView), Reply(201, s.PrefixView)], errors=(409, 413, 415))
async def put_prefix(request: Request) -> Response:
    force = bool_param(request, "force", False)
    body = validate(PrefixBody, await read_json(request, request.app.state.settings.json_body_limit_bytes))
    prefix = request.path_params["prefix"]
    knowledge = knowledge_of(request)
    knowledge.check_prefix_change(prefix, body.iri, force)
    cluster = cluster_of(request)
    created = await knowledge.put_prefix(prefix, body.iri, by=principal_of(request).name, forced=force)
    if cluster is not None:
        await cluster.publish_prefix(prefix, body.iri)
    return JSONResponse({"prefix": prefix, "iri": body.iri}, status_code=201 if created else 200)


@API.route("DELETE", "/v1/prefixes/{prefix}", scope=ADMIN, summary="remove a client-set prefix", params=(PREFIX,),
           replies=[Reply(204, description="removed")], errors=(404,))
async def delete_prefix(request: Request) -> Response:
    prefix = request.path_params["prefix"]
    cluster = cluster_of(request)
    await knowledge_of(request).delete_prefix(prefix, by=principal_of(request).name)
    if cluster is not None:
        await cluster.publish_prefix(prefix, None)
    return Response(status_code=204)


# -- SPARQL, metrics, the API's own description ------------------------------------------------------
SPARQL_RESULTS = {t: {"schema": {"type": "string"}} for t in (
    "application/sparql-results+json", "application/sparql-results+xml", "text/csv", "text/tab-separated-values",
    "text/turtle", "application/n-triples", "application/ld+json", "application/rdf+xml")}
SPARQL_PARAMS = (Param("query", description="a SPARQL 1.1 query (without it: the service description)"),
                 Param("default-graph-uri"), Param("named-graph-uri"))


@API.route("GET", "/sparql", scope=READ, summary="SPARQL 1.1 Protocol query (GET)", params=SPARQL_PARAMS,
           open_query=True, replies=[Reply(200, description="results, by Accept", content=SPARQL_RESULTS)],
           errors=(406, 503), every_environment=True)
async def sparql_get(request: Request) -> Response:
    return await request.app.state.sparql.handle(request)


@API.route("POST", "/sparql", scope=READ, summary="SPARQL 1.1 Protocol query (POST form or query body)",
           params=SPARQL_PARAMS[1:], body={"application/x-www-form-urlencoded": {"type": "string"},
                                           "application/sparql-query": {"type": "string"}}, body_required=False,
           open_query=True, replies=[Reply(200, description="results, by Accept", content=SPARQL_RESULTS)],
           errors=(406, 413, 415, 503), every_environment=True)
async def sparql_post(request: Request) -> Response:
    return await request.app.state.sparql.handle(request)


@API.route("GET", "/metrics", scope=READ, summary="Prometheus metrics",
           replies=[Reply(200, description="the Prometheus text format",
                          content={"text/plain": {"schema": {"type": "string"}}})])
async def metrics(request: Request) -> Response:
    return Response(request.app.state.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


@API.route("GET", "/openapi.json", scope=None, summary="this API, as OpenAPI 3.1", replies=[Reply(200, OBJECT)])
async def openapi(request: Request) -> Response:
    return JSONResponse(_openapi_document())


@functools.cache
def _openapi_document() -> bytes:
    """Made once, on the first request: the table does not change while the server runs."""
    return document_bytes(API.endpoints)


DISCOVER = API.find("GET", "/v1/discover")
SPARQL_GET = API.find("GET", "/sparql")
