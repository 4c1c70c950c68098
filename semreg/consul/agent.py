"""The agent API: a Consul client registers, deregisters and reports its TTL check here, and reads back what it
registered. Each change goes through the handlers' own checks of the public API (who owns an instance, which
environments a token may write in) and the coordinator, as `PUT /v1/instances/{id}` does.

A TTL check is the instance's lease: `pass` renews it as `up`, `warn` as `blocked` (listed, no new work: Consul
leaves a warning service out of `?passing`), `fail` as critical (reported by the service: it leaves discovery at
once, and is deleted after `DeregisterCriticalServiceAfter`); `update` takes the status in its body. Consul's
check output and notes are not kept. Maintenance is a drain, set without renewing the lease, and a passing or
warning check leaves it in place, as Consul keeps a service in maintenance whatever its checks say.
"""
from __future__ import annotations

import re
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from semreg.access.tokens import READ, WRITE
from semreg.consul import entries, filters, strconv
from semreg.consul.access import admit, environment, selector
from semreg.consul.registration import CHECK_STATUSES, CRITICAL, PASSING, WARNING, definition, folded
from semreg.errors import BadRequest, NotFound
from semreg.http.requests import read_body
from semreg.http.responses import JSONResponse
from semreg.http.routes.instances import check_may_replace, check_owner, registrations
from semreg.http.schemas import ID_PATTERN, parse_json
from semreg.http.state import app_state
from semreg.registry.instances import BLOCKED, DRAINING, UP
from semreg.registry.instances import CRITICAL as CRITICAL_STATUS  # Consul's `critical` is a check's

_ID = re.compile(ID_PATTERN)
CHECK_PREFIX = "service:"


def node_of(request: Request) -> entries.NodeInfo:
    node: entries.NodeInfo = request.app.state.consul_node
    return node


async def body_of(request: Request, required: bool = True) -> Any:
    raw = await read_body(request, app_state(request).settings.json_body_limit_bytes)
    if not raw.strip() and not required:
        return None
    return parse_json(raw)


async def register(request: Request) -> Response:
    admit(request, WRITE)
    state = app_state(request)
    data = await body_of(request)
    client = request.client.host if request.client else "127.0.0.1"
    given = definition(data, state.knowledge.prefixes, client, environment(request))
    iid = given.body["id"]
    [reg], _ = await registrations(request, [(given.body, iid if isinstance(iid, str) else None, "")])
    await check_may_replace(request, [reg])
    (inst, _), = await state.coordinator.register([reg])
    # The TTL check's first status (Consul starts a check critical unless told), or up again where a replaced
    # registration had been reported critical: a registration keeps its admin status across replacements. The
    # instance may be another member's copy, which says its status only.
    wanted = entries.TO_STATUS[given.ttl_status] if given.ttl_status else "up"
    if inst.status != wanted:
        await state.coordinator.heartbeat(reg.id, None, wanted)
    return Response(status_code=200)


def instance_id(text: str, what: str) -> str:
    if not _ID.match(text):
        raise NotFound(f'Unknown {what} "{text[:140]}"')
    return text


async def deregister(request: Request) -> Response:
    admit(request, WRITE)
    iid = instance_id(request.path_params["id"], "service ID")
    try:
        await check_owner(request, iid)
        await app_state(request).coordinator.deregister(iid)
    except NotFound:
        raise NotFound(f'Unknown service ID "{iid}". Ensure that the service ID is passed, not the service name.') \
            from None
    return Response(status_code=200)


async def check_pass(request: Request) -> Response:
    return await _report(request, PASSING)


async def check_warn(request: Request) -> Response:
    return await _report(request, WARNING)


async def check_fail(request: Request) -> Response:
    return await _report(request, CRITICAL)


async def check_update(request: Request) -> Response:
    admit(request, WRITE)
    body = folded(await body_of(request), "the check update")
    status = body.get("status")
    if status not in CHECK_STATUSES:
        raise BadRequest("Status: give passing, warning or critical.")
    return await _report(request, str(status), admitted=True)


async def _report(request: Request, status: str, admitted: bool = False) -> Response:
    if not admitted:
        admit(request, WRITE)
    check = request.path_params["check"]
    unknown = f'Unknown check ID "{check[:140]}". The TTL check of a service is service:<ID>.'
    if not check.startswith(CHECK_PREFIX) or not _ID.match(check[len(CHECK_PREFIX):]):
        raise NotFound(unknown)
    iid = check[len(CHECK_PREFIX):]
    coordinator = app_state(request).coordinator
    try:
        await check_owner(request, iid)
        inst = await coordinator.get(iid)
    except NotFound:
        raise NotFound(unknown) from None
    if inst.reg.ttl_s <= 0:
        raise BadRequest(f'CheckID "{check[:140]}" does not have associated TTL: the service was registered without one.')
    wanted = entries.TO_STATUS[status]
    if wanted == CRITICAL_STATUS:
        await coordinator.heartbeat(iid, None, wanted)
        return Response(status_code=200)
    # a passing or warning check renews the lease and sets its status, except over a drain (maintenance): Consul
    # keeps a service in maintenance whatever its checks say. Decided by the owner, which knows the status even
    # where the lease has lapsed and this copy says only `critical`.
    await coordinator.heartbeat(iid, None, None)
    await coordinator.set_status(iid, wanted, (UP, BLOCKED, CRITICAL_STATUS))
    return Response(status_code=200)


async def maintenance(request: Request) -> Response:
    """Consul's maintenance mode is semreg's drain: listed, out of `?passing`, no new routes. It changes the status
    alone, never the lease (a lapsed instance stays critical), and only a status it may stand for: it drains an
    `up` or `blocked` instance, and ends only a drain, so a service that reported itself critical stays critical
    whichever way maintenance is switched. The reason is not kept."""
    admit(request, WRITE)
    iid = instance_id(request.path_params["id"], "service ID")
    given = request.query_params.get("enable")
    if given is None or given == "":
        raise BadRequest("Missing value for enable")
    if given not in strconv.TRUE | strconv.FALSE:
        raise BadRequest(f'Invalid value for enable: "{given[:40]}"')
    unknown = f'Unknown service ID "{iid}"'
    try:
        await check_owner(request, iid)
        if given in strconv.TRUE:  # Go's ParseBool: py-consul sends `True` and `False`
            await app_state(request).coordinator.set_status(iid, DRAINING, (UP, BLOCKED))
        else:
            await app_state(request).coordinator.set_status(iid, UP, (DRAINING,))
    except NotFound:
        raise NotFound(unknown) from None
    return Response(status_code=200)


async def services(request: Request) -> Response:
    principal = admit(request, READ)
    chosen = filter_of(request, filters.AGENT_SERVICE)
    node = node_of(request)
    topic = await app_state(request).coordinator.instances(None, True, selector(request, principal))
    found = {i.id: entries.service(i, node.datacenter) for i in topic.payload.items}
    if chosen is not None:
        found = await app_state(request).lane.run(chosen.keep_values, found, what="this filter")
    return JSONResponse(found)


async def service(request: Request) -> Response:
    principal = admit(request, READ)
    iid = instance_id(request.path_params["id"], "service ID")
    unknown = f'unknown service ID: {iid}'
    try:
        inst = await app_state(request).coordinator.get(iid)
    except NotFound:
        raise NotFound(unknown) from None
    if not principal.sees(inst.reg.environment):
        raise NotFound(unknown)
    return JSONResponse(entries.service(inst, node_of(request).datacenter))


async def self_(request: Request) -> Response:
    admit(request, READ)
    node = node_of(request)
    config = {"Datacenter": node.datacenter, "PrimaryDatacenter": node.datacenter, "NodeName": node.name,
              "NodeID": "", "Server": True, "Version": node.version, "Revision": "semreg"}
    member = {"Name": node.name, "Addr": node.address, "Port": 0, "Tags": {"dc": node.datacenter, "role": "node"},
              "Status": 1}
    return Response(orjson.dumps({"Config": config, "DebugConfig": {}, "Coord": {}, "Member": member, "Stats": {},
                                  "Meta": {}}), media_type="application/json")


def filter_of(request: Request, schema: dict[str, Any]) -> filters.Filter | None:
    """The request's `filter`, checked against the endpoint's type (`schema`), or None without one; a 400 in
    go-bexpr's words for one that does not parse or fit."""
    text = request.query_params.get("filter")
    if not text:
        return None
    try:
        return filters.Filter(text, schema)
    except filters.FilterError as exc:
        raise BadRequest(str(exc)) from None
