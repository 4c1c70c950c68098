"""The route table and thin handlers: parse, call the node, shape the response."""
from __future__ import annotations

import re
import time
from collections.abc import Callable

import mmh3
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from semreg import ontology
from semreg.auth import OPEN, Principal
from semreg.balancer import parse_policy
from semreg.discovery import DiscoverQuery
from semreg.errors import BadRequest, NotFound
from semreg.http import JSONResponse, int_param, read_body, read_json, watch_params
from semreg.matching import parse_match
from semreg.node import Node
from semreg.schemas import ID_PATTERN, BatchBody, HeartbeatBody, PrefixBody, TagsBody, validate
from semreg.terms import ANY, RDF_TYPE, Tag, parse_component
from semreg.watch import Topic

_ID = re.compile(ID_PATTERN)


def node_of(request: Request) -> Node:
    return request.app.state.node


def principal_of(request: Request) -> Principal:
    return getattr(request.state, "principal", None) or OPEN


def owner_of(request: Request) -> str | None:
    """The name registrations are owned by: the token's, when tokens are in force."""
    return principal_of(request).name if request.app.state.tokens.enabled else None


def check_owner(request: Request, instance_id: str) -> None:
    """403 unless the caller may change this instance (its owner, or an admin); 404 if there is none."""
    inst = node_of(request).registry.get(instance_id)
    principal_of(request).require_owner(inst.reg.owner, instance_id)


def check_may_replace(request: Request, instance_ids: list[str]) -> None:
    instances = node_of(request).registry.instances
    principal = principal_of(request)
    for iid in instance_ids:
        inst = instances.get(iid)
        if inst is not None:
            principal.require_owner(inst.reg.owner, iid)


def path_id(request: Request) -> str:
    iid = request.path_params["id"]
    if not _ID.match(iid):
        raise BadRequest(f"'{iid[:140]}' is not a valid instance id: 1-128 of A-Z a-z 0-9 . _ : -", field="id")
    return iid


async def watched(request: Request, topic_of: Callable[[], Topic]) -> JSONResponse:
    """A watchable read: the topic's body and index; with `?index=N&wait=`, after its result changes."""
    node = node_of(request)
    index, wait = watch_params(request, node.settings.watch_max_wait_s)
    topic = topic_of()
    if index is not None:
        await node.hub.wait(topic, index, wait)
        topic = topic_of()
    return JSONResponse(topic.body, headers={"X-Semreg-Index": str(topic.index)})


# -- operations ------------------------------------------------------------------------------------
async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "alive"})


async def readyz(request: Request) -> Response:
    node = node_of(request)
    if not node.ready:
        return JSONResponse({"status": "starting", "error": "the node is still opening its store or reasoning."},
                            status_code=503, headers={"Retry-After": "1"})
    return JSONResponse({"status": "ready", "store": "open", "closure": "built", "ring": "joined",
                         "instances": len(node.registry.instances), "ontologies": len(node.ontologies),
                         "replica_pending": node.replica.pending})


async def cluster(request: Request) -> Response:
    node = node_of(request)
    me = f"{node.settings.host}:{node.settings.port}"
    members = [{"id": me, "address": me, "status": "alive"}]
    # ringpop's checksum: a hash of the sorted member addresses, equal on every node that agrees
    checksum = mmh3.hash(";".join(sorted(m["address"] for m in members)), signed=False)
    return JSONResponse({"node": me, "members": members, "replicas": 1, "checksum": checksum})


# -- instances -------------------------------------------------------------------------------------
async def put_instance(request: Request) -> Response:
    node = node_of(request)
    iid = path_id(request)
    data = await read_json(request, node.settings.json_body_limit_bytes)
    reg = node.registration(data, iid, owner_of(request))
    check_may_replace(request, [iid])
    (inst, created), = await node.register([reg])
    return JSONResponse(inst.view_json(), status_code=201 if created else 200)


async def post_instance(request: Request) -> Response:
    node = node_of(request)
    data = await read_json(request, node.settings.json_body_limit_bytes)
    iid = data.get("id") if isinstance(data, dict) else None
    reg = node.registration(data, None if iid is not None else node.new_id(), owner_of(request))
    if iid is not None and iid in node.registry.instances:
        raise BadRequest(f"an instance '{iid}' already exists; replace it with PUT /v1/instances/{iid}.", field="id")
    (inst, _), = await node.register([reg])
    return JSONResponse(inst.view_json(), status_code=201, headers={"Location": f"/v1/instances/{inst.id}"})


async def batch_instances(request: Request) -> Response:
    node = node_of(request)
    data = await read_json(request, node.settings.json_body_limit_bytes)
    body = validate(BatchBody, data)
    if len(body.instances) > node.settings.max_batch_instances:
        raise BadRequest(f"instances: {len(body.instances)} instances is more than the "
                         f"{node.settings.max_batch_instances} a batch may hold.", field="instances")
    owner = owner_of(request)
    regs = []
    for n, item in enumerate(body.instances):
        where = f"instances[{n}]"
        iid = item.get("id") if isinstance(item, dict) else None
        if iid is None and isinstance(item, dict):
            iid = node.new_id()
        regs.append(node.registration(item, iid if isinstance(iid, str) else None, owner, where))
    check_may_replace(request, [r.id for r in regs])
    if regs:
        await node.register(regs)
    return JSONResponse({"registered": len(regs)})


async def list_instances(request: Request) -> Response:
    node = node_of(request)
    service = request.query_params.get("service") or None
    return await watched(request, lambda: node.instances_topic(service))


async def get_instance(request: Request) -> Response:
    return JSONResponse(node_of(request).registry.get(path_id(request)).view_json())


async def delete_instance(request: Request) -> Response:
    iid = path_id(request)
    check_owner(request, iid)
    await node_of(request).deregister(iid)
    return Response(status_code=204)


async def heartbeat(request: Request) -> Response:
    node = node_of(request)
    iid = path_id(request)
    raw = await read_body(request, node.settings.json_body_limit_bytes)
    body = HeartbeatBody()
    if raw.strip():
        from semreg.schemas import parse_json

        body = validate(HeartbeatBody, parse_json(raw))
    check_owner(request, iid)
    inst = await node.heartbeat(iid, body.load, body.status)
    from semreg.instances import rfc3339

    return JSONResponse({"id": inst.id, "status": inst.status, "expires_at": rfc3339(inst.expires_at)})


# -- discovery -------------------------------------------------------------------------------------
def query_tag(request: Request, node: Node) -> Tag:
    params = request.query_params
    s = params.get("s")
    if s is None or not s.strip():
        raise BadRequest("s is required: the subject term of the pattern to discover (p and o are optional).",
                         field="s")
    p, o = params.get("p") or None, params.get("o") or None
    return Tag(parse_component(s, node.prefixes), parse_component(p, node.prefixes, predicate=True),
               parse_component(o, node.prefixes))


async def discover(request: Request) -> Response:
    node = node_of(request)
    params = request.query_params
    status = params.get("status")
    if status not in (None, "", "up", "any"):
        raise BadRequest(f"status takes 'up' (the default) or 'any', not '{status[:40]}'.", field="status")
    version = node.prefixes.version
    q = DiscoverQuery(query_tag(request, node), parse_match(params.get("match")), params.get("service") or None,
                      status == "any", int_param(request, "limit", 1, 1_000_000))
    node.known_queries.remember(request.scope["query_string"], version, q)
    return await watched(request, lambda: node.discover_topic(q))


async def discover_tags(request: Request) -> Response:
    node = node_of(request)
    body = validate(TagsBody, await read_json(request, node.settings.json_body_limit_bytes))
    return JSONResponse({"peers": node.discover_tags(body.tags)})


async def tags(request: Request) -> Response:
    node = node_of(request)
    return await watched(request, node.tags_topic)


async def expand(request: Request) -> Response:
    node = node_of(request)
    return JSONResponse(node.expand(query_tag(request, node), parse_match(request.query_params.get("match"))))


async def concept(request: Request) -> Response:
    node = node_of(request)
    term = request.path_params["term"]
    iri = RDF_TYPE if term == "a" else parse_component(term, node.prefixes)
    if iri == ANY:
        raise BadRequest("sr:Any is the wildcard, not a concept.", field="term")
    return JSONResponse(node.concept(iri))


_PATH_RE = re.compile(r"^(/[^\s#]*)?$")


async def route(request: Request) -> Response:
    node = node_of(request)
    params = request.query_params
    policy, limit = parse_policy(params.get("policy"))
    path = params.get("path", "")
    if not _PATH_RE.match(path) or len(path) > 2048:
        raise BadRequest("path must be empty or start with '/', without spaces or '#'.", field="path")
    q = DiscoverQuery(query_tag(request, node), parse_match(params.get("match")), params.get("service") or None)
    client = request.client
    inst = request.app.state.router.route(q, policy, limit or node.settings.balance_limit,
                                          caller=f"{client.host}:{client.port}" if client else None)
    r = inst.reg
    host = f"[{r.address}]" if ":" in r.address else r.address
    return Response(status_code=307, headers={"Location": f"{r.scheme}://{host}:{r.port}{path}",
                                              "X-Semreg-Instance": inst.id, "Cache-Control": "no-store"})


# -- ontologies ------------------------------------------------------------------------------------
async def put_ontology(request: Request) -> Response:
    node = node_of(request)
    name = ontology.validate_name(request.path_params["name"])
    ontology.media_type_of(request.headers.get("content-type"))
    started = time.perf_counter()
    body = await read_body(request, node.settings.ontology_body_limit_bytes, "the ontology")
    change = await node.ontologies.put(name, body, request.headers.get("content-type"))
    return JSONResponse({**change.meta.as_json(), "reasoning_ms": round(change.reasoning_ms, 1),
                         "timings_ms": {k: round(v, 1) for k, v in change.timings_ms.items()},
                         "concepts": change.concepts, "ms": round((time.perf_counter() - started) * 1000, 1)},
                        status_code=201 if change.created else 200)


async def list_ontologies(request: Request) -> Response:
    node = node_of(request)
    return JSONResponse([m.as_json() for m in sorted(node.ontologies.metas.values(), key=lambda m: m.name)])


async def get_ontology(request: Request) -> Response:
    node = node_of(request)
    name = request.path_params["name"]
    if name not in node.ontologies:
        raise NotFound(f"no ontology named '{name[:128]}'.")
    media, fmt = ontology.choose_representation(request.headers.get("accept"))
    data = node.ontologies.rdf(name, fmt)
    return Response(data, media_type=media + ("; charset=utf-8" if media != "application/ld+json" else ""))


async def delete_ontology(request: Request) -> Response:
    await node_of(request).ontologies.delete(request.path_params["name"])
    return Response(status_code=204)


# -- prefixes --------------------------------------------------------------------------------------
async def list_prefixes(request: Request) -> Response:
    return JSONResponse(node_of(request).prefixes.as_dict())


async def put_prefix(request: Request) -> Response:
    node = node_of(request)
    body = validate(PrefixBody, await read_json(request, node.settings.json_body_limit_bytes))
    prefix = request.path_params["prefix"]
    created = await node.put_prefix(prefix, body.iri)
    return JSONResponse({"prefix": prefix, "iri": body.iri}, status_code=201 if created else 200)


async def get_prefix(request: Request) -> Response:
    prefix = request.path_params["prefix"]
    iri = node_of(request).prefixes.get(prefix)
    if iri is None:
        raise NotFound(f"no prefix '{prefix[:64]}' is known.")
    return JSONResponse({"prefix": prefix, "iri": iri})


async def delete_prefix(request: Request) -> Response:
    await node_of(request).delete_prefix(request.path_params["prefix"])
    return Response(status_code=204)


DISCOVER = Route("/v1/discover", discover, methods=["GET"])

# The hot routes first: Starlette tries routes in order.
ROUTES = [
    DISCOVER,
    Route("/v1/route", route, methods=["GET"]),
    Route("/v1/instances/{id}/heartbeat", heartbeat, methods=["PUT"]),
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/v1/cluster", cluster, methods=["GET"]),
    Route("/v1/instances", list_instances, methods=["GET"]),
    Route("/v1/instances", post_instance, methods=["POST"]),
    Route("/v1/instances/batch", batch_instances, methods=["POST"]),
    Route("/v1/instances/{id}", get_instance, methods=["GET"]),
    Route("/v1/instances/{id}", put_instance, methods=["PUT"]),
    Route("/v1/instances/{id}", delete_instance, methods=["DELETE"]),
    Route("/v1/discover/tags", discover_tags, methods=["POST"]),
    Route("/v1/tags", tags, methods=["GET"]),
    Route("/v1/expand", expand, methods=["GET"]),
    Route("/v1/concepts/{term:path}", concept, methods=["GET"]),
    Route("/v1/ontologies", list_ontologies, methods=["GET"]),
    Route("/v1/ontologies/{name}", get_ontology, methods=["GET"]),
    Route("/v1/ontologies/{name}", put_ontology, methods=["PUT"]),
    Route("/v1/ontologies/{name}", delete_ontology, methods=["DELETE"]),
    Route("/v1/prefixes", list_prefixes, methods=["GET"]),
    Route("/v1/prefixes/{prefix}", get_prefix, methods=["GET"]),
    Route("/v1/prefixes/{prefix}", put_prefix, methods=["PUT"]),
    Route("/v1/prefixes/{prefix}", delete_prefix, methods=["DELETE"]),
]
