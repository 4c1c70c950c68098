"""Ontologies: the uploaded ones (watchable), one as RDF in the representation the caller accepts, and the
upload or removal that re-reasons (on every member of a cluster)."""
from __future__ import annotations

import time
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from semreg.access.tokens import ADMIN, READ
from semreg.errors import NotFound
from semreg.http import schemas as s
from semreg.http.endpoints import Endpoints, Param, Reply
from semreg.http.requests import read_body
from semreg.http.responses import JSONResponse
from semreg.http.routes.common import INDEX_HEADER, WATCH, cluster_of, coordinator_of, knowledge_of, watched
from semreg.http.state import app_state
from semreg.rdf import parsing
from semreg.registry.watch import Topic

API = Endpoints()
RDF_TYPES = list(parsing.REPRESENTATIONS)
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

        # numbered by the changes of everything alone: the ontologies are no environment's
        return await hub.topic(("ontologies",), compute, lambda changes: False, orjson.dumps, frozenset())

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
    body = await read_body(request, app_state(request).settings.ontology_body_limit_bytes, "the ontology")
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

