"""`/sparql` on a node started with `--no-sparql`, which keeps no SPARQL replica.

- **Alone** (`SparqlOff`): every `/sparql` request, the service description included, is a 501 saying the
  node was started without SPARQL, after the access gate (a caller without a valid token still gets 401). Not
  404: the route is in the contract and the URL is right; not 503: it will not come back by waiting.
- **In a ring** (`ForwardedSparql`): the request is read and checked here as a serving node reads it (body
  limit, protocol: 400, 413, 415 before anything is sent), then sent as it came to a member that serves
  SPARQL (`semreg.cluster.sparql_forward`), whose answer is passed on as it arrives: status, Content-Type,
  Content-Length, Vary, Retry-After and the body. The access gate in front of this route checked the caller
  (token, scope, a bound token refused, rate) as for a local query.
- **The serving side** (`answer_forwarded`, behind the internal route `POST /internal/v1/sparql`): the
  fields are checked (a malformed one is a 400), the caller's token is checked again by this node's own
  tokens, scopes, throttles and rate limit, exactly as the gate checks a request on the public port (the
  forwarding member holds the cluster secret, not the caller's rights), and the request is answered by this
  node's endpoint under its own limits, at the forwarding member's endpoint URL (the base IRI, and the
  description's `sd:endpoint`), so the answer is the one a node holding everything gives at that URL.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from semreg.cluster.sparql_forward import SERVED_HEADER, SparqlForward
from semreg.errors import BadRequest, NotServed, PayloadTooLarge, SemregError
from semreg.http.gate import admit
from semreg.http.requests import read_body
from semreg.http.responses import error_response
from semreg.http.sparql import MAX_BODY_BYTES, SparqlEndpoint, request_url
from semreg.sparql.protocol import query_request

if TYPE_CHECKING:
    from semreg.http.state import AppState

PATH = "/sparql"
METHODS = ("GET", "HEAD", "POST")
FIELDS = ("method", "query_string", "content_type", "body", "accept", "url", "authorization", "client")
MAX_FIELD_CHARS = 64 * 1024  # each field but the body and the query string: a URL, a header
MAX_LONG_FIELD_CHARS = MAX_BODY_BYTES  # the body and the query string (a GET carries its query there)
LONG_FIELDS = ("body", "query_string")
# the internal request's JSON: the long fields at their limit, each byte escaped at worst (\u00XX), and the others
MAX_FORWARDED_BYTES = 6 * (len(LONG_FIELDS) * MAX_LONG_FIELD_CHARS + len(FIELDS) * MAX_FIELD_CHARS) + 4096
PASSED_ON = ("content-type", "content-length", "vary", "retry-after", "www-authenticate")


class SparqlOff:
    """`/sparql` on a node alone started with `--no-sparql`."""

    async def handle(self, request: Request) -> Response:
        raise NotServed("this node does not serve SPARQL: it was started with --no-sparql. Ask a node started "
                        "with --sparql (the default).")


class ForwardedSparql:
    """`/sparql` on a ring member started with `--no-sparql`: answered by a member that serves it."""

    def __init__(self, forward: SparqlForward, max_body_bytes: int) -> None:
        self.forward = forward
        self.max_body_bytes = max_body_bytes

    async def handle(self, request: Request) -> Response:
        body = await read_body(request, self.max_body_bytes) if request.method == "POST" else b""
        query_string: bytes = request.scope.get("query_string", b"")
        content_type = request.headers.get("content-type", "")
        query_request(request.method, query_string, content_type, body)  # a 4xx here, as on a serving node
        client = request.client.host if request.client is not None else "unknown"
        fields = {"method": request.method, "query_string": query_string.decode("latin-1"),
                  "content_type": content_type, "body": body.decode("latin-1"),
                  "accept": request.headers.get("accept"), "url": request_url(request.scope, request.headers.get("host")),
                  "authorization": request.headers.get("authorization"), "client": client}
        answer = await self.forward.forward(fields)
        headers = {name: answer.head.headers[name] for name in PASSED_ON if name in answer.head.headers}
        return StreamingResponse(answer.body, status_code=answer.head.status, headers=headers)


async def answer_forwarded(state: AppState, fields: Any, now: float) -> Response:
    """The serving member's answer to a forwarded request (see the module's doc); every answer, an error
    included, says which member served it (`SERVED_HEADER`), which a member that does not serve SPARQL
    never says."""
    endpoint = state.sparql
    if not isinstance(endpoint, SparqlEndpoint):
        raise NotServed("this member does not serve SPARQL (--no-sparql).")
    try:
        method, query_string, content_type, body, accept, url, authorization, client = _checked(fields)
        admit(state.tokens, state.scopes, state.limiter, state.auth_failures, method, PATH, authorization, client, now)
        if len(body) > endpoint.max_body_bytes:
            raise PayloadTooLarge(f"the request body is {len(body)} bytes; the limit is {endpoint.max_body_bytes} "
                                  f"bytes.", limit_bytes=endpoint.max_body_bytes)
        operation = query_request(method, query_string, content_type, body)
        response = await endpoint.respond(operation, accept, url, time.monotonic() + endpoint.time_limit_s)
    except SemregError as exc:
        response = error_response(exc)
        if exc.status == 401:
            response.headers["WWW-Authenticate"] = 'Bearer realm="semreg"'
    response.headers[SERVED_HEADER] = state.settings.node_id or "alone"
    return response


def _checked(fields: Any) -> tuple[str, bytes, str, bytes, str | None, str, str | None, str]:
    """The forwarded request's fields, each of its type and size; a 400 naming the first that is not."""
    if not isinstance(fields, dict) or set(fields) != set(FIELDS):
        raise BadRequest(f"a forwarded SPARQL request has the fields {', '.join(FIELDS)}.")
    for name in FIELDS:
        value = fields[name]
        optional = name in ("accept", "authorization")
        if not (isinstance(value, str) or (optional and value is None)):
            raise BadRequest(f"the forwarded field '{name}' is not a string.")
        limit = MAX_LONG_FIELD_CHARS if name in LONG_FIELDS else MAX_FIELD_CHARS
        if value is not None and len(value) > limit and name != "body":  # the body's limit is the endpoint's 413
            raise BadRequest(f"the forwarded field '{name}' is longer than {limit} characters.")
    if fields["method"] not in METHODS:
        raise BadRequest("a forwarded SPARQL request is a GET, HEAD or POST.")
    try:
        query_string = fields["query_string"].encode("latin-1")
        body = fields["body"].encode("latin-1")
    except UnicodeEncodeError as exc:
        raise BadRequest("the forwarded query string and body carry bytes (characters up to U+00FF).") from exc
    return (fields["method"], query_string, fields["content_type"], body, fields["accept"], fields["url"],
            fields["authorization"], fields["client"])

