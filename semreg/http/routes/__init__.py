"""The HTTP API's routes: each declared once (`semreg.http.endpoints`) with a thin handler: parse, call the
domain (the coordinator, the knowledge), shape the response. The router's table, the access rules and
`/openapi.json` are generated from these declarations.

A module a resource, each with its own `Endpoints`: `discovery`, `instances`, `ontologies`, `prefixes`,
`sparql`, `operations` (the token, health, the cluster, metrics, `/openapi.json`), `backups`, `overview`
(the counts and the changes a console's views read), `queries` (saved queries) and `prometheus` (its HTTP
service discovery); `common` holds the
parameters and helpers they share. The table (`API`) joins them here, in the one order the router tries.

Handlers find the node's parts through `semreg.http.state.app_state(request)`, typed (`AppState`):
`coordinator`, `knowledge`, `router`, `settings`, `tokens`, `known_queries`, `ready` and `starting`
(callables), `cluster` (None on a node alone), `endpoints` (this table), ...
"""
from __future__ import annotations

from semreg.http.endpoints import Endpoints
from semreg.http.routes import (
                                backups,
                                discovery,
                                instances,
                                ontologies,
                                operations,
                                overview,
                                prefixes,
                                prometheus,
                                queries,
                                sparql,
)

# The router tries routes in this order: the hot ones (discovery, routing, heartbeats) first.
HOT = (("GET", "/v1/discover"), ("GET", "/v1/route"), ("PUT", "/v1/instances/{id}/heartbeat"))
API = Endpoints.joined(discovery.API, instances.API, operations.API, ontologies.API, prefixes.API, sparql.API,
                       backups.API, overview.API, queries.API, prometheus.API, first=HOT)

DISCOVER = API.find("GET", "/v1/discover")
SPARQL_GET = API.find("GET", "/sparql")
