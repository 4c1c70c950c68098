"""`/openapi.json`, generated from the pydantic models the handlers validate with (`semreg.schemas`),
so the published contract cannot drift from what the server enforces."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from semreg import __version__
from semreg import schemas as s
from semreg.http import JSONResponse

REF = "#/components/schemas/"
ERRORS = {"400": "bad input: the error names the field or term", "401": "no valid token",
          "403": "the token lacks the scope or does not own the instance", "429": "past the caller's rate"}


def _param(name: str, where: str = "query", required: bool = False, schema: dict | None = None,
           description: str = "") -> dict[str, Any]:
    return {"name": name, "in": where, "required": required, "schema": schema or {"type": "string"},
            "description": description}


ID = _param("id", "path", True, {"type": "string", "pattern": s.ID_PATTERN}, "instance id")
TERM = {"type": "string", "minLength": 1, "description": "a full IRI, <IRI> or CURIE"}
PATTERN = [_param("s", required=True, schema=TERM, description="subject term"),
           _param("p", schema=TERM, description="predicate term (omitted: any)"),
           _param("o", schema=TERM, description="object term (omitted: any)"),
           _param("match", description="comma list of exact, narrower, broader, overlap; or all")]
WATCH = [_param("index", schema={"type": "integer", "minimum": 0}, description="X-Semreg-Index of the last read"),
         _param("wait", description="how long to block, e.g. 30s (cap 300 s)")]
INDEX_HEADER = {"X-Semreg-Index": {"schema": {"type": "integer", "minimum": 1}}}
RDF_TYPES = ["text/turtle", "application/rdf+xml", "application/ld+json", "application/n-triples"]


def _json(model: type[BaseModel] | dict, description: str = "", headers: dict | None = None) -> dict[str, Any]:
    schema = {"$ref": REF + model.__name__} if isinstance(model, type) else model
    out: dict[str, Any] = {"description": description or "ok", "content": {"application/json": {"schema": schema}}}
    if headers:
        out["headers"] = headers
    return out


def _errors(*codes: str) -> dict[str, Any]:
    out = {code: _json(s.ErrorView, ERRORS.get(code, "error")) for code in ("400", "401", "403", "429")}
    for code in codes:
        out[code] = _json(s.ErrorView, {"404": "not found", "406": "no acceptable representation",
                                        "413": "body too large", "415": "unsupported media type",
                                        "503": "nothing eligible, or a time limit passed"}.get(code, "error"))
    return out


def _body(model: type[BaseModel]) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": {"$ref": REF + model.__name__}}}}


def _op(summary: str, responses: dict, params: list | None = None, body: dict | None = None, **extra) -> dict:
    op: dict[str, Any] = {"summary": summary, "responses": responses}
    if params:
        op["parameters"] = params
    if body:
        op["requestBody"] = body
    op.update(extra)
    return op


def _paths() -> dict[str, Any]:
    inst_list = {"type": "array", "items": {"$ref": REF + "InstanceView"}}
    rdf_body = {"required": True, "content": {t: {"schema": {"type": "string"}} for t in RDF_TYPES}}
    return {
        "/healthz": {"get": _op("alive", {"200": _json({"type": "object"})})},
        "/readyz": {"get": _op("ready: store open, closure built", {"200": _json({"type": "object"}),
                                                                   "503": _json(s.ErrorView, "starting")})},
        "/v1/cluster": {"get": _op("cluster members", {"200": _json(s.ClusterView), **_errors()})},
        "/v1/instances": {
            "get": _op("list instances", {"200": _json(inst_list, headers=INDEX_HEADER), **_errors()},
                       [_param("service"), *WATCH]),
            "post": _op("register with a server-chosen id", {"201": _json(s.InstanceView), **_errors("413", "415")},
                        body=_body(s.InstanceBody))},
        "/v1/instances/batch": {"post": _op("register many, all or nothing",
                                            {"200": _json(s.RegisteredView), **_errors("413", "415")},
                                            body=_body(s.BatchBody))},
        "/v1/instances/{id}": {
            "get": _op("one instance", {"200": _json(s.InstanceView), **_errors("404")}, [ID]),
            "put": _op("create or replace", {"200": _json(s.InstanceView, "replaced"),
                                             "201": _json(s.InstanceView, "created"), **_errors("413", "415")},
                       [ID], _body(s.InstanceBody)),
            "delete": _op("deregister", {"204": {"description": "deregistered"}, **_errors("404")}, [ID])},
        "/v1/instances/{id}/heartbeat": {"put": _op(
            "renew the lease; optionally report load and status",
            {"200": _json(s.HeartbeatView), **_errors("404", "413", "415")}, [ID],
            {"required": False, "content": {"application/json": {"schema": {"$ref": REF + "HeartbeatBody"}}}})},
        "/v1/discover": {"get": _op("discover by meaning", {"200": _json(s.DiscoverView, headers=INDEX_HEADER),
                                                             **_errors()},
                                    [*PATTERN, _param("service"), _param("status", schema={"enum": ["up", "any"]}),
                                     _param("limit", schema={"type": "integer", "minimum": 1}), *WATCH])},
        "/v1/discover/tags": {"post": _op("exact multi-tag lookup", {"200": _json(s.PeersView),
                                                                     **_errors("413", "415")},
                                          body=_body(s.TagsBody))},
        "/v1/tags": {"get": _op("every registered tag", {"200": _json(s.TagsView, headers=INDEX_HEADER), **_errors()},
                                WATCH)},
        "/v1/expand": {"get": _op("what a query expands to", {"200": _json(s.ExpandView), **_errors()}, PATTERN)},
        "/v1/route": {"get": _op("redirect to a chosen instance",
                                 {"307": {"description": "redirect", "headers": {
                                     "Location": {"schema": {"type": "string"}},
                                     "X-Semreg-Instance": {"schema": {"type": "string"}}}},
                                  **_errors("503")},
                                 [*PATTERN, _param("service"),
                                  _param("policy", schema={"enum": ["least-load", "spillover", "round-robin", "limit"]}),
                                  _param("path", schema={"type": "string", "pattern": r"^(/[^\s#]*)?$"})])},
        "/v1/concepts/{term}": {"get": _op("a concept of the hierarchy", {"200": _json(s.ConceptView),
                                                                          **_errors("404")},
                                           [_param("term", "path", True)])},
        "/v1/ontologies": {"get": _op("uploaded ontologies", {"200": _json(
            {"type": "array", "items": {"$ref": REF + "OntologyView"}}), **_errors()})},
        "/v1/ontologies/{name}": {
            "get": _op("an ontology as RDF, by Accept", {"200": {"description": "RDF", "content": {
                t: {"schema": {"type": "string"}} for t in RDF_TYPES}}, **_errors("404", "406")},
                [_param("name", "path", True)]),
            "put": _op("upload or replace; re-reasons", {"200": _json(s.OntologyStored), "201": _json(s.OntologyStored),
                                                         **_errors("413", "415")},
                       [_param("name", "path", True, {"type": "string", "pattern": r"^[A-Za-z0-9._-]{1,128}$"})],
                       rdf_body),
            "delete": _op("remove; re-reasons", {"204": {"description": "removed"}, **_errors("404")},
                          [_param("name", "path", True)])},
        "/v1/prefixes": {"get": _op("known CURIE prefixes", {"200": _json(
            {"type": "object", "additionalProperties": {"type": "string"}}), **_errors()})},
        "/v1/prefixes/{prefix}": {
            "get": _op("one prefix", {"200": _json(s.PrefixView), **_errors("404")}, [_param("prefix", "path", True)]),
            "put": _op("set a prefix", {"200": _json(s.PrefixView), "201": _json(s.PrefixView),
                                        **_errors("413", "415")}, [_param("prefix", "path", True)],
                       _body(s.PrefixBody)),
            "delete": _op("remove a client-set prefix", {"204": {"description": "removed"}, **_errors("404")},
                          [_param("prefix", "path", True)])},
    }


MODELS: list[type[BaseModel]] = [s.InstanceBody, s.BatchBody, s.HeartbeatBody, s.TagsBody, s.PrefixBody, s.Check,
                                 s.InstanceView, s.TagView, s.MatchView, s.DiscoverView, s.TagCount, s.TagsView,
                                 s.PeersView, s.RegisteredView, s.HeartbeatView, s.ExpandView, s.ExpansionRow,
                                 s.MatchedTag, s.ConceptView, s.OntologyView, s.OntologyStored, s.PrefixView,
                                 s.ErrorView, s.ClusterView, s.MemberView]


def document() -> dict[str, Any]:
    components: dict[str, Any] = {}
    for model in MODELS:
        schema = model.model_json_schema(ref_template=REF + "{model}", mode="validation")
        for name, sub in schema.pop("$defs", {}).items():
            components.setdefault(name, sub)
        components[model.__name__] = schema
    return {"openapi": "3.1.0",
            "info": {"title": "semreg", "version": __version__,
                     "description": "A semantic service registry: discovery by meaning over RDF ontologies."},
            "paths": _paths(),
            "components": {"schemas": components,
                           "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
            "security": [{}, {"bearer": []}]}


_CACHE: dict[str, bytes] = {}


async def openapi_endpoint(request: Request) -> Response:
    if "doc" not in _CACHE:
        import orjson

        _CACHE["doc"] = orjson.dumps(document())
    return JSONResponse(_CACHE["doc"])
