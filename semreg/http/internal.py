"""The internal API one node answers another with (`/internal/v1/...`): this node's shard, its change
log and its ontologies. Every request must carry the cluster secret (401 otherwise; wrong secrets are
throttled per address and per secret shown, the right one never); the routes are not part of the public
contract and not in `/openapi.json`, and are served only on the cluster listener
(`semreg.http.cluster_listener`), never on the public port.

A handler decodes the whole request before it calls the shard (`semreg.http.internal_decoding`): a request of
the wrong shape is a 400 that changed nothing, the sender's fault; an error the shard call raises is this
member's, a 500, which the sender takes for a member failing (`semreg.cluster.peer`).
"""
from __future__ import annotations

import hashlib
import hmac
import logging
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from semreg.access.failures import Failure
from semreg.cluster import wire
from semreg.cluster.peer import SECRET_HEADER
from semreg.errors import BadRequest, NotFound, Unauthorized
from semreg.http.endpoints import Endpoints
from semreg.http.internal_decoding import admin_status, decoded, number, record, registration, seconds, state, text, texts, view
from semreg.http.requests import read_body
from semreg.http.responses import JSONResponse
from semreg.http.sparql_forward import MAX_FORWARDED_BYTES, answer_forwarded
from semreg.http.state import app_state
from semreg.registry.instances import STATUSES
from semreg.registry.local_shard import LocalShard
from semreg.registry.selector import Selector
from semreg.registry.shard import Removed
from semreg.work.lane import paced

INTERNAL = Endpoints()
PREFIX = "/internal/v1"
MAX_BODY = 256 * 1024 * 1024
log = logging.getLogger("semreg.internal")


def guarded(request: Request) -> LocalShard:
    """The local shard, once the request has shown the cluster secret: compared first (as digests of one
    length, in constant time), so that the right secret passes whatever others failed; a wrong one is counted
    (`state.secret_failures`), and answered 429 instead of 401 while its address or itself is throttled."""
    state = app_state(request)
    secret = state.cluster_secret
    shown = request.headers.get(SECRET_HEADER, "")
    if secret and hmac.compare_digest(_digest(shown), _digest(secret)):
        return state.shard
    failures = state.secret_failures
    address = request.client.host if request.client is not None else ""
    why = "a wrong cluster secret" if shown else "no cluster secret"
    refusal = failures.failed(Failure(address, failures.fingerprint(shown), why, request.url.path),
                              state.clock.monotonic())
    if refusal is not None:
        raise refusal
    raise Unauthorized("node-to-node requests need the cluster secret.")


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


async def body_of(request: Request) -> Any:
    raw = await read_body(request, MAX_BODY, "the request")
    try:
        return orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from exc


def route(method: str, path: str) -> Any:
    """A route of the internal API. Each handler decodes the request first (`internal_decoding.decoded`: a body
    of the wrong shape is a 400, the sender's fault, and changes nothing), then calls the shard: what that
    raises unexpectedly is this member's failure, a 500 (`semreg.http.cluster_listener`)."""
    return INTERNAL.route(method, PREFIX + path, scope=None, summary="internal", documented=False,
                          open_query=True)  # their parameters are the sending node's, not a person's


def admitted(request: Request, body: Any) -> None:
    """A write from another node: not while this node's lease is known to have lapsed (503), nor when its
    ring is one this node moved past (409; `semreg.cluster.cluster.Cluster.admit`)."""
    sender = decoded(lambda: view(body))
    cluster = app_state(request).cluster
    if cluster is not None:
        cluster.admit(sender)


@route("POST", "/records")
async def records(request: Request) -> Response:
    shard = guarded(request)
    body = await body_of(request)
    admitted(request, body)
    # a batch's thousand records made objects again: essential work in slices (the write is another member's,
    # admitted there; it held this member's loop ~0.4 s in a ring under a noisy neighbour)
    items = await shard.lane.run(decoded, lambda: [(registration(rec), int(rev)) for rec, rev in paced(body["items"])],
                                 what="this write", essential=True)
    views = decoded(lambda: bool(body.get("views", True)))
    stored = await shard.put_records(items)
    return JSONResponse({"results": [
        None if inst is None else {"created": created, **({"member": wire.member_json(inst, True)} if views else {})}
        for inst, created in stored]})


@route("POST", "/restore")
async def restore(request: Request) -> Response:
    shard = guarded(request)
    body = await body_of(request)
    # records handed over by the thousand: decoded in slices, as a write's (`records`)
    items = await shard.lane.run(decoded, lambda: [record(item) for item in paced(body["items"])], what="this write",
                                 essential=True)
    return JSONResponse({"applied": await shard.restore_records(items)})


@route("POST", "/export")
async def export(request: Request) -> Response:
    shard = guarded(request)
    body = await body_of(request)
    ids = decoded(lambda: [str(iid) for iid in body["ids"]])
    return JSONResponse({"items": await shard.export(ids)})


@route("POST", "/delete")
async def delete(request: Request) -> Response:
    shard = guarded(request)
    body = await body_of(request)
    admitted(request, body)
    items = decoded(lambda: [(text(iid), int(rev)) for iid, rev in body["items"]])
    return JSONResponse({"deleted": [await shard.delete_record(iid, rev) for iid, rev in items]})


@route("POST", "/heartbeat/{id}")
async def heartbeat(request: Request) -> Response:
    shard = guarded(request)
    body = await body_of(request)
    load, wanted = decoded(lambda: (None if body.get("load") is None else number(body["load"]),
                                    admin_status(body.get("status"))))
    inst = await shard.heartbeat(request.path_params["id"], load, wanted, dated(body))
    return JSONResponse(wire.member_json(inst, True))


@route("POST", "/status/{id}")
async def status(request: Request) -> Response:
    shard = guarded(request)
    body = await body_of(request)
    wanted = body.get("status") if isinstance(body, dict) else None
    replaces = body.get("replaces") if isinstance(body, dict) else None
    if wanted not in STATUSES:
        raise BadRequest(f"status: give one of {', '.join(STATUSES)}.")
    if replaces is not None and not (isinstance(replaces, list) and all(r in STATUSES for r in replaces)):
        raise BadRequest(f"replaces: a list of statuses among {', '.join(STATUSES)}.")
    inst = await shard.set_status(request.path_params["id"], wanted, replaces, dated(body))
    return JSONResponse(wire.member_json(inst, True))


def dated(body: Any) -> int | None:
    """The revision a coordinator dated a status change with (none from a member that does not date them)."""
    revision = body.get("revision") if isinstance(body, dict) else None
    if revision is not None and (not isinstance(revision, int) or isinstance(revision, bool) or revision <= 0):
        raise BadRequest("revision: a positive integer, or null.")
    return revision


@route("POST", "/states")
async def states(request: Request) -> Response:
    shard = guarded(request)
    body = await body_of(request)
    states_ = decoded(lambda: [state(s) for s in body["states"]])
    return JSONResponse({"applied": await shard.apply_states(states_)})


@route("POST", "/routes/{id}")
async def routes(request: Request) -> Response:
    await guarded(request).record_route(request.path_params["id"])
    return Response(status_code=204)


@route("GET", "/instances/{id}")
async def instance(request: Request) -> Response:
    shard = guarded(request)
    try:
        inst = await shard.get(request.path_params["id"])
    except Removed as exc:  # the other owners' copies older than this removal are stale
        return JSONResponse({"error": str(exc), "removed": exc.revision}, status_code=404)
    return JSONResponse(wire.member_json(inst, True))


@route("POST", "/registered-by")
async def registered_by(request: Request) -> Response:
    shard = guarded(request)
    body = await body_of(request)
    ids = decoded(lambda: [str(i) for i in body["ids"]])
    return JSONResponse({"found": {iid: list(v) for iid, v in (await shard.registered_by(ids)).items()}})


@route("GET", "/instances")
async def instances(request: Request) -> Response:
    shard = guarded(request)
    tags = request.query_params.get("tags") != "false"
    service = request.query_params.get("service") or None
    held = await shard.instances(service, shed=False)  # the asking member admitted the request
    return JSONResponse({"members": [wire.member_json(i, tags) for i in held.items], "removed": held.removed})


@route("POST", "/discover")
async def discover(request: Request) -> Response:
    shard = guarded(request)
    body = await body_of(request)
    q = decoded(lambda: wire.query_from_json(body["query"]))
    part = await shard.resolve(q, shed=False)  # the asking member admitted the question
    return Response(wire.part_bytes(part, q.tags), media_type=wire.PART_MEDIA_TYPE)


@route("POST", "/holders")
async def holders(request: Request) -> Response:
    shard = guarded(request)
    body = await body_of(request)
    tags, with_tags = decoded(lambda: ([wire.tag_from_json(t) for t in body["tags"]],
                                       bool(body.get("with_tags", True))))
    found = await shard.holders(tags, with_tags)
    return Response(wire.holders_bytes(tags, found.items, with_tags, found.removed), media_type="application/json")


@route("POST", "/matching-tags")
async def matching_tags(request: Request) -> Response:
    shard = guarded(request)
    body = await body_of(request)
    query, match = decoded(lambda: (wire.tag_from_json(body["tag"]), wire.match_from_json(body["match"])))
    found = await shard.matching_tags(query, match, shed=False)
    return JSONResponse({"matches": [[*tag, degree, distance] for tag, degree, distance in found]})


@route("POST", "/tags")
async def tags(request: Request) -> Response:
    shard = guarded(request)
    body = await body_of(request)
    selector = decoded(lambda: Selector.from_json(body.get("selector")))
    held = await shard.tag_holders(selector)
    return JSONResponse({"tags": [[*t, sorted(ids)] for t, ids in held.items.items()], "removed": held.removed})


@route("GET", "/terms")
async def terms(request: Request) -> Response:
    shard = guarded(request)
    return JSONResponse({"named": await shard.names_term(request.query_params.get("iri", ""))})


@route("POST", "/counts")
async def counts(request: Request) -> Response:
    """The overview's counts of the instances whose lease runs here (`LocalShard.counts`)."""
    shard = guarded(request)
    body = await body_of(request)
    environments = decoded(lambda: None if body.get("environments") is None else
                           frozenset(str(e) for e in body["environments"]))
    known = body.get("known")
    tally = await shard.counts(environments, known if isinstance(known, str) else None)
    return JSONResponse(wire.tally_json(tally))


@route("GET", "/changes")
async def changes(request: Request) -> Response:
    shard = guarded(request)
    log = app_state(request).changelog
    params = request.query_params
    epoch, cursor = decoded(lambda: (None if params.get("epoch") in (None, "") else int(params["epoch"]),
                                     int(params.get("after", "0"))))
    if epoch is not None and epoch != log.epoch:
        return JSONResponse({"epoch": log.epoch, "cursor": log.cursor, "changes": [], "reset": True})
    await log.wait(cursor, min(decoded(lambda: seconds(params.get("wait", "0"))), 60.0))
    reset, found, last = log.since_encoded(cursor, lambda c: wire.logged_change_bytes(c, shard.held(c.id)))
    return JSONResponse({"epoch": log.epoch, "cursor": last, "reset": reset,
                         "changes": [orjson.Fragment(b) for b in found]})


@route("GET", "/cursor")
async def cursor(request: Request) -> Response:
    """Where this node's change log is: a node about to answer a SPARQL query waits until it has read
    this far (what was acknowledged here before the query is then in its replica)."""
    guarded(request)
    log = app_state(request).changelog
    return JSONResponse({"epoch": log.epoch, "cursor": log.cursor})


@route("POST", "/inventory")
async def inventory(request: Request) -> Response:
    shard = guarded(request)
    body = await body_of(request)
    ids = decoded(lambda: None if body.get("ids") is None else texts(body["ids"]))
    return JSONResponse({"inventory": await shard.inventory(ids)})


@route("POST", "/digests")
async def arc_digests(request: Request) -> Response:
    """Digests of what this node holds in the given arcs of the ring whose checksum the caller names; 409
    when this node's ring is another (the caller then compares record by record)."""
    shard = guarded(request)
    body = await body_of(request)
    cluster = app_state(request).cluster
    if cluster is None or decoded(lambda: int(body["checksum"])) != cluster.ring.checksum:
        return JSONResponse({"error": "this node's ring is another one."}, status_code=409)
    found = await shard.digests(cluster.ring, decoded(lambda: [int(a) for a in body["arcs"]]))
    return JSONResponse({"digests": {str(arc): list(d) for arc, d in found.items()}})


@route("POST", "/sparql")
async def sparql(request: Request) -> Response:
    """A `/sparql` request a member without the replica forwarded (`semreg.http.sparql_forward`): the caller's
    token is checked here again, as on this node's public port."""
    guarded(request)
    raw = await read_body(request, MAX_FORWARDED_BYTES, "a forwarded SPARQL request")
    try:
        fields = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from exc
    state = app_state(request)
    return await answer_forwarded(state, fields, state.clock.monotonic())


@route("GET", "/ontologies/{name}")
async def ontology(request: Request) -> Response:
    guarded(request)
    ontologies = app_state(request).knowledge.ontologies
    name = request.path_params["name"]
    source = ontologies.sources.get(name)
    if source is None:
        raise NotFound(f"no ontology named '{name}'.")
    return Response(source, media_type=ontologies.metas[name].media_type)
