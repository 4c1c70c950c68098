"""The SPARQL 1.1 Protocol routes, as the router and the access rules know them and `/openapi.json`
documents them: the endpoint on `app_state(request).sparql` answers (`semreg.http.sparql`); the app
answers `GET /sparql` ahead of the router (`semreg.http.app.SparqlGet`)."""
from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from semreg.access.tokens import READ
from semreg.http.endpoints import Endpoints, Param, Reply
from semreg.http.state import app_state

API = Endpoints()
SPARQL_RESULTS = {t: {"schema": {"type": "string"}} for t in (
    "application/sparql-results+json", "application/sparql-results+xml", "text/csv", "text/tab-separated-values",
    "text/turtle", "application/n-triples", "application/ld+json", "application/rdf+xml")}
SPARQL_PARAMS = (Param("query", description="a SPARQL 1.1 query (without it: the service description)"),
                 Param("default-graph-uri"), Param("named-graph-uri"))


@API.route("GET", "/sparql", scope=READ, summary="SPARQL 1.1 Protocol query (GET)", params=SPARQL_PARAMS,
           open_query=True, replies=[Reply(200, description="results, by Accept", content=SPARQL_RESULTS)],
           errors=(406, 501, 503), every_environment=True)
async def sparql_get(request: Request) -> Response:
    return await app_state(request).sparql.handle(request)


@API.route("POST", "/sparql", scope=READ, summary="SPARQL 1.1 Protocol query (POST form or query body)",
           params=SPARQL_PARAMS[1:], body={"application/x-www-form-urlencoded": {"type": "string"},
                                           "application/sparql-query": {"type": "string"}}, body_required=False,
           open_query=True, replies=[Reply(200, description="results, by Accept", content=SPARQL_RESULTS)],
           errors=(406, 413, 415, 501, 503), every_environment=True)
async def sparql_post(request: Request) -> Response:
    return await app_state(request).sparql.handle(request)

