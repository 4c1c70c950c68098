"""CURIE prefixes: the known ones, one, and the setting or removal of a client-set prefix (on every member
of a cluster)."""
from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from semreg.access.tokens import ADMIN, READ
from semreg.errors import NotFound
from semreg.http import schemas as s
from semreg.http.endpoints import Endpoints, Param, Reply
from semreg.http.requests import bool_param, read_json
from semreg.http.responses import JSONResponse
from semreg.http.routes.common import cluster_of, knowledge_of, principal_of
from semreg.http.schemas import PrefixBody, validate
from semreg.http.state import app_state

API = Endpoints()
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
    body = validate(PrefixBody, await read_json(request, app_state(request).settings.json_body_limit_bytes))
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

