"""Instances: list (watchable), register (with a server-chosen id, in a batch, or by id), read, replace,
deregister and the heartbeat that renews a lease; with what only they need: the instance id of the path,
a registration body parsed into a `Registration`, and the checks that the caller may change an instance."""
from __future__ import annotations

import re
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from semreg import heap
from semreg.access.tokens import READ, WRITE
from semreg.config import Settings
from semreg.errors import BadRequest, Forbidden
from semreg.http import schemas as s
from semreg.http.endpoints import Endpoints, Param, Reply
from semreg.http.requests import bool_param, read_body, read_json
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
    warned,
    watched,
    with_members,
)
from semreg.http.schemas import ID_PATTERN, BatchBody, HeartbeatBody, InstanceBody, validate
from semreg.http.state import app_state
from semreg.rdf.terms import parse_component, parse_tag, parse_tags
from semreg.registry import listing
from semreg.registry.instances import Registration
from semreg.registry.query_params import int_value
from semreg.registry.quorum import not_registered
from semreg.registry.selector import Selector
from semreg.work.lane import checkpoint

API = Endpoints()
_ID = re.compile(ID_PATTERN)
MAX_OFFSET = 100_000_000
ID = Param("id", "path", True, {"type": "string", "pattern": ID_PATTERN}, "instance id")


# -- who may change an instance, and what a registration body says ---------------------------------
def owner_of(request: Request) -> str | None:
    """The name registrations are owned by: the token's, when tokens are in force."""
    return principal_of(request).name if app_state(request).tokens.enabled else None


async def check_owner(request: Request, instance_id: str) -> None:
    """403 unless the caller may change this instance (its owner, or an admin); 404 if there is none, or
    it is in an environment the token is not bound to (an admin is not looked up: the change answers 404)."""
    principal = principal_of(request)
    if principal.admin:
        return
    inst = await coordinator_of(request).get(instance_id)
    if not principal.sees(inst.reg.environment):
        raise not_registered(instance_id)
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
        if not principal.sees(environment):  # taken, but where is not this token's to learn
            raise Forbidden(f"the instance id '{iid}' is taken by an instance this token may not change; "
                            f"choose another id.", field="id")
        principal.require_owner(owner, iid)


def path_id(request: Request) -> str:
    iid: str = request.path_params["id"]
    if not _ID.match(iid):
        raise BadRequest(f"'{iid[:140]}' is not a valid instance id: 1-128 of A-Z a-z 0-9 . _ : -", field="id")
    return iid


def registration(request: Request, data: Any, instance_id: str | None, where: str = ""
                 ) -> tuple[Registration, list[tuple[str, str]]]:
    """One registration body as a `Registration` (400 naming the field otherwise), and the `(field, term)`
    pairs its tags name, for the warnings about terms no ontology knows (`registrations` gives them)."""
    settings = app_state(request).settings
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
    named = [(f"{at}tags[{n}]", iri) for tag, n in zip(tags, positions) for iri in tag]
    return Registration(id=iid, service=body.service, address=body.address, port=body.port, scheme=body.scheme,
                        tags=tuple(tags), weight=body.weight, capacity=body.capacity, ttl_s=float(body.ttl),
                        deregister_after_s=deregister_after_s(body),
                        check=body.check.model_dump(exclude_none=True) if body.check else None,
                        meta=dict(body.meta), owner=owner_of(request), environment=body.environment), named


def deregister_after_s(body: InstanceBody) -> float:
    """How long the instance stays critical before it is deleted: as asked; else 90 s with a lease, and never
    without one (ttl 0). An instance with no lease has nothing renewing it: a check that fails for a while
    (its target restarting) must not delete what only an operator registered, as Consul removes a critical
    service only when `DeregisterCriticalServiceAfter` is set."""
    if "deregister_after" in body.model_fields_set:
        return float(body.deregister_after)
    return float(body.deregister_after) if body.ttl > 0 else 0.0


async def registrations(request: Request, items: list[tuple[Any, str | None, str]]
                        ) -> tuple[list[Registration], list[dict[str, Any]]]:
    """`(body, id, where)` items as registrations, with the warnings about the terms of their tags that no
    ontology knows (at most `MAX_WARNINGS`, the first by position, each suggestion looked for once): request
    work (`semreg.work.lane`), in slices, the suggestions on a worker thread."""
    def parse() -> tuple[list[Registration], list[dict[str, Any]]]:
        regs: list[Registration] = []
        named: list[tuple[str, str]] = []
        for data, iid, where in items:
            checkpoint()
            reg, terms = registration(request, data, iid, where)
            regs.append(reg)
            named += terms
        return regs, knowledge_of(request).term_warnings(named)
    return await lane_of(request).run(parse, what="this registration")


# -- the routes ------------------------------------------------------------------------------------
INSTANCE_LIST = {"type": "array", "items": {"$ref": "#/components/schemas/InstanceView"}}


PAGING = (Param("status", schema={"enum": list(listing.STATUSES)}, description="only instances of this status"),
          Param("tag", description="only instances whose tags mention this term in any position, or carry this "
                                   "whole tag of three terms"),
          Param("limit", schema={"type": "integer", "minimum": 1, "maximum": listing.MAX_LIMIT},
                description="at most this many"),
          Param("after", schema={"type": "string", "pattern": ID_PATTERN},
                description="only instances whose id sorts after this one: the last id of the page before"),
          Param("offset", schema={"type": "integer", "minimum": 0, "maximum": MAX_OFFSET},
                description="skip this many (after `after`)"))
TOTAL_HEADER = {"X-Semreg-Total": {"schema": {"type": "integer", "minimum": 0},
                                   "description": "with a paging or filter parameter: how many the filters admit"}}


@API.route("GET", "/v1/instances", scope=READ, summary="list instances; paged and filtered on request",
           params=(Param("service"), Param("tags", schema=TAGS_FLAG, description="views with their tags (default true)"),
                   *PAGING, *SELECTOR, *WATCH),
           replies=[Reply(200, INSTANCE_LIST, headers={**INDEX_HEADER, **TOTAL_HEADER})])
async def list_instances(request: Request) -> Response:
    service = request.query_params.get("service") or None
    tags = bool_param(request, "tags", True)
    selector = selector_of(request)
    coordinator = coordinator_of(request)
    if any(request.query_params.get(p.name) for p in PAGING):
        q = list_query(request, service, tags, selector)
        return await watched(request, await listing.page(coordinator, q), lambda: listing.page(coordinator, q),
                             more=lambda topic: {"X-Semreg-Total": str(topic.payload.total)})
    return await watched(request, await coordinator.instances(service, tags, selector),
                         lambda: coordinator.instances(service, tags, selector))


def list_query(request: Request, service: str | None, tags: bool, selector: Selector) -> listing.ListQuery:
    """A paged or filtered list's query (a 400 naming the parameter at fault otherwise)."""
    params = request.query_params
    status = params.get("status") or None
    if status is not None and status not in listing.STATUSES:
        raise BadRequest(f"status takes {', '.join(listing.STATUSES)}, not '{status[:40]}'.", field="status")
    after = params.get("after") or None
    if after is not None and not _ID.match(after):
        raise BadRequest(f"after takes an instance id (1-128 of A-Z a-z 0-9 . _ : -), not '{after[:140]}'.",
                         field="after")
    return listing.ListQuery(service, status, mention(request, params.get("tag") or None), selector, after,
                             int_value(params, "offset", 0, MAX_OFFSET) or 0,
                             int_value(params, "limit", 1, listing.MAX_LIMIT), tags)


def mention(request: Request, text: str | None) -> listing.Mention | None:
    """`tag=`: one term (named in any position of a tag), or a whole tag of three terms."""
    if text is None:
        return None
    parts = text.split()
    if len(parts) not in (1, 3):
        raise BadRequest(f"tag: '{text[:140]}' has {len(parts)} terms; give one term, or a whole tag of three.",
                         field="tag")
    prefixes = knowledge_of(request).prefixes
    try:
        return parse_component(parts[0], prefixes, predicate=True) if len(parts) == 1 else parse_tag(text, prefixes)
    except BadRequest as exc:
        exc.message = f"tag: {exc.message}"
        exc.extra["field"] = "tag"
        raise


@API.route("POST", "/v1/instances", scope=WRITE, summary="register with a server-chosen id", body=s.InstanceBody,
           replies=[Reply(201, s.RegisteredInstanceView)], errors=(413, 415))
async def post_instance(request: Request) -> Response:
    settings = app_state(request).settings
    data = await read_json(request, settings.json_body_limit_bytes)
    iid = data.get("id") if isinstance(data, dict) else None
    [reg], warnings = await registrations(request, [(data, None if iid is not None else uuid.uuid4().hex, "")])
    principal_of(request).require_environment(reg.environment)
    if iid is not None and await coordinator_of(request).exists(iid):
        raise BadRequest(f"an instance '{iid}' already exists; replace it with PUT /v1/instances/{iid}.", field="id")
    (inst, _), = await coordinator_of(request).register([reg])
    return JSONResponse(with_members(inst.view_json(), warned(warnings)), status_code=201,
                        headers={"Location": f"/v1/instances/{inst.id}"})


@API.route("POST", "/v1/instances/batch", scope=WRITE, summary="register many, all or nothing", body=s.BatchBody,
           replies=[Reply(200, s.RegisteredView)], errors=(413, 415))
async def batch_instances(request: Request) -> Response:
    settings = app_state(request).settings
    with heap.making(settings.max_batch_instances):  # what a batch makes lives on: never walked by the collector
        return await registered_batch(request, settings)


async def registered_batch(request: Request, settings: Settings) -> Response:
    data = await read_json(request, settings.json_body_limit_bytes)
    body = validate(BatchBody, data)
    if len(body.instances) > settings.max_batch_instances:
        raise BadRequest(f"instances: {len(body.instances)} instances is more than the "
                         f"{settings.max_batch_instances} a batch may hold.", field="instances")
    items = []
    for n, item in enumerate(body.instances):
        iid = item.get("id") if isinstance(item, dict) else None
        if iid is None and isinstance(item, dict):
            iid = uuid.uuid4().hex
        items.append((item, iid if isinstance(iid, str) else None, f"instances[{n}]"))
    regs, warnings = await registrations(request, items)
    await check_may_replace(request, regs)
    if regs:
        await coordinator_of(request).register(regs, views=False)
    return JSONResponse({"registered": len(regs), **({"warnings": warnings} if warnings else {})})


@API.route("GET", "/v1/instances/{id}", scope=READ, summary="one instance", params=(ID,),
           replies=[Reply(200, s.InstanceView)], errors=(404,))
async def get_instance(request: Request) -> Response:
    iid = path_id(request)
    inst = await coordinator_of(request).get(iid)
    if not principal_of(request).sees(inst.reg.environment):
        raise not_registered(iid)  # as if it were not there: not a 403 naming where it is
    return JSONResponse(inst.view_json())


@API.route("PUT", "/v1/instances/{id}", scope=WRITE, summary="create or replace", params=(ID,), body=s.InstanceBody,
           replies=[Reply(200, s.RegisteredInstanceView, "replaced"), Reply(201, s.RegisteredInstanceView, "created")],
           errors=(413, 415))
async def put_instance(request: Request) -> Response:
    settings = app_state(request).settings
    iid = path_id(request)
    data = await read_json(request, settings.json_body_limit_bytes)
    [reg], warnings = await registrations(request, [(data, iid, "")])
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


@API.route("PUT", "/v1/instances/{id}/heartbeat", scope=WRITE, summary="renew the lease; optionally report load and status",
           params=(ID,), body=s.HeartbeatBody, body_required=False, replies=[Reply(200, s.HeartbeatView)],
           errors=(404, 413, 415))
async def heartbeat(request: Request) -> Response:
    settings = app_state(request).settings
    iid = path_id(request)
    raw = await read_body(request, settings.json_body_limit_bytes)
    body = HeartbeatBody()
    if raw.strip():
        from semreg.http.schemas import parse_json

        body = validate(HeartbeatBody, parse_json(raw))
    await check_owner(request, iid)
    inst = await coordinator_of(request).heartbeat(iid, body.load, body.status)
    return JSONResponse({"id": inst.id, "status": inst.status, "expires_at": inst.expires_at_text()})
