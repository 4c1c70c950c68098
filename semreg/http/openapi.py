"""`/openapi.json`, generated from the route declarations (`semreg.http.endpoints`, the table in
`semreg.http.routes`) and the pydantic models the handlers validate with (`semreg.http.schemas`), so the
published contract cannot drift from what the server enforces."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from pydantic import BaseModel

from semreg import __version__
from semreg.http import conjunctive_schemas, console_schemas, instance_views
from semreg.http import schemas as s
from semreg.http.endpoints import REF, Endpoint, openapi_paths

ERRORS = {400: "bad input: the error names the field or term", 401: "no valid token",
          403: "the token lacks the scope or does not own the instance", 404: "not found",
          406: "no acceptable representation", 409: "the change contradicts an ontology's declaration",
          413: "body too large", 415: "unsupported media type",
          429: "past the caller's rate", 503: "nothing eligible, or a time limit passed"}

MODELS: list[type[BaseModel]] = [
    s.InstanceBody, s.BatchBody, s.HeartbeatBody, s.TagsBody, s.PrefixBody, s.Check, s.InstanceView, *instance_views.MODELS,
    s.TagView, s.InstanceRef, s.BestMatch, s.MatchView, s.RankedView, s.DiscoverView, s.TagCount,
    s.TagsView, s.PeersView,
    s.RegisteredView, s.HeartbeatView, s.ExpandView, s.ExpansionRow, s.MatchedTag, s.ConceptView, s.OntologyView,
    s.OntologyStored, s.PrefixView, s.ErrorView, s.ClusterView, s.MemberView, s.TermWarningView,
    s.RegisteredInstanceView, s.RestoredView, *console_schemas.MODELS, *conjunctive_schemas.MODELS]


def _error(status: int) -> dict[str, Any]:
    return {"description": ERRORS.get(status, "error"),
            "content": {"application/json": {"schema": {"$ref": REF + "ErrorView"}}}}


def document(endpoints: Sequence[Endpoint]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of these declared routes."""
    components: dict[str, Any] = {}
    for model in MODELS:
        schema = model.model_json_schema(ref_template=REF + "{model}", mode="validation")
        for name, sub in schema.pop("$defs", {}).items():
            components.setdefault(name, sub)
        components[model.__name__] = schema
    return {"openapi": "3.1.0",
            "info": {"title": "semreg", "version": __version__,
                     "description": "A semantic service registry: discovery by meaning over RDF ontologies."},
            "paths": openapi_paths(endpoints, _error),
            "components": {"schemas": components,
                           "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
            "security": [{}, {"bearer": []}]}


def document_bytes(endpoints: Sequence[Endpoint]) -> bytes:
    return orjson.dumps(document(endpoints))
