"""The SPARQL 1.1 Protocol query operation, read from an HTTP request (https://www.w3.org/TR/sparql11-protocol/).

    GET  /sparql?query=Q[&default-graph-uri=G]*[&named-graph-uri=G]*
    POST /sparql  Content-Type: application/x-www-form-urlencoded  (the same parameters in the body)
    POST /sparql  Content-Type: application/sparql-query           (the query as the body, UTF-8)

Graph parameters may also ride in the URL of a POST (the W3C protocol tests do so). A GET without
`query` (and without `update`) asks for the service description (SPARQL 1.1 Service Description: it is
what the endpoint answers when dereferenced); a POST without a query is a 400, since a POST is sent to
run one. Update is refused: 403.
"""
from __future__ import annotations

import codecs
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl

from pyoxigraph import NamedNode

from semreg.errors import BadRequest, Forbidden, UnsupportedMediaType

FORM = "application/x-www-form-urlencoded"
QUERY = "application/sparql-query"
UPDATE = "application/sparql-update"
READ_ONLY = "this endpoint is read-only; ontologies change through /v1/ontologies."


@dataclass(frozen=True, slots=True)
class QueryRequest:
    """One query operation; `query` None asks for the service description."""

    query: str | None
    default_graphs: tuple[NamedNode, ...] = ()
    named_graphs: tuple[NamedNode, ...] = ()

    @property
    def has_dataset(self) -> bool:
        """True when the protocol names the dataset, which then replaces any FROM/FROM NAMED."""
        return bool(self.default_graphs or self.named_graphs)


def query_request(method: str, query_string: bytes, content_type: str, body: bytes) -> QueryRequest:
    """The operation a request carries: its method, raw query string, Content-Type and whole body (the
    same rules for the server's ASGI route and the query processes' own connections)."""
    params = parse_params(query_string, "the URL")
    if method != "POST":
        return from_params(params)
    media_type, charset = split_content_type(content_type)
    if media_type == FORM:
        _require_utf8(charset)
        return _posted(from_params(params + parse_params(body, "the form body")))
    if media_type == QUERY:
        _require_utf8(charset)
        return from_params(params, body_query=_decode(body, "the query"))
    if media_type == UPDATE:
        raise Forbidden(READ_ONLY)
    if not media_type and not body:
        return _posted(from_params(params))
    raise UnsupportedMediaType(
        f"POST a query as {FORM} (query=...) or as {QUERY}, not as '{media_type or 'a body without Content-Type'}'.",
        accepted=[FORM, QUERY])


def _posted(operation: QueryRequest) -> QueryRequest:
    if operation.query is None:
        raise BadRequest(f"a POST to the SPARQL endpoint carries a query: send it as {QUERY}, or as query=... in "
                         f"a {FORM} body (GET without a query returns the service description).")
    return operation


def from_params(params: Sequence[tuple[str, str]], body_query: str | None = None) -> QueryRequest:
    """The operation named by protocol parameters (and a query given as the body)."""
    queries = [value for name, value in params if name == "query"]
    updates = [value for name, value in params if name == "update"]
    if body_query is not None:
        queries.append(body_query)
    if queries and updates:
        raise BadRequest("give either a query or an update, not both; and this endpoint takes queries only.")
    if updates:
        raise Forbidden(READ_ONLY)
    if len(queries) > 1:
        raise BadRequest(f"give exactly one query, not {len(queries)} (in the URL, the form or the body).")
    return QueryRequest(
        query=queries[0] if queries else None,
        default_graphs=_graphs(params, "default-graph-uri"),
        named_graphs=_graphs(params, "named-graph-uri"),
    )


def split_content_type(header: str) -> tuple[str, str | None]:
    """`'Application/SPARQL-Query; charset=UTF-8'` → `('application/sparql-query', 'utf-8')`."""
    media_type, *params = header.split(";")
    charset = None
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip('"').lower()
    return media_type.strip().lower(), charset


def _require_utf8(charset: str | None) -> None:
    if charset not in (None, "utf-8", "utf8"):
        raise UnsupportedMediaType(f"send the query in UTF-8, not in '{charset}'.", accepted_charset="utf-8")


def _decode(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"{what} is not valid UTF-8 (byte {exc.start}).") from exc


def parse_params(raw: bytes, where: str) -> list[tuple[str, str]]:
    if not raw:
        return []
    try:
        fast = _parse_ascii_params(raw)
        if fast is not None:
            return fast
        return parse_qsl(raw.decode("latin-1"), keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"the parameters in {where} are not valid percent-encoded UTF-8.") from exc
    except ValueError as exc:
        raise BadRequest(f"the parameters in {where} cannot be parsed: {exc}.") from exc


def _parse_ascii_params(raw: bytes) -> list[tuple[str, str]] | None:
    """What `parse_qsl(..., keep_blank_values=True, errors="strict")` makes of an ASCII query string, with
    the percent-escapes decoded in C (`codecs.escape_decode`): a SPARQL query in a URL is mostly escapes,
    and `urllib`'s Python loop over them was a fifth of a small query's time. None (use `parse_qsl`) for
    anything but well-formed escapes in ASCII."""
    if not raw.isascii() or b"\\" in raw:
        return None
    out = []
    for pair in raw.split(b"&"):
        if not pair:
            continue
        name, _, value = pair.partition(b"=")
        decoded_name, decoded_value = _unquote_plus(name), _unquote_plus(value)
        if decoded_name is None or decoded_value is None:
            return None
        out.append((decoded_name, decoded_value))
    return out


def _unquote_plus(raw: bytes) -> str | None:
    if b"+" in raw:
        raw = raw.replace(b"+", b" ")
    if b"%" in raw:
        try:
            raw = codecs.escape_decode(raw.replace(b"%", b"\\x"))[0]
        except ValueError:  # a malformed escape: parse_qsl keeps it as it is
            return None
    return raw.decode("utf-8")  # strict: UnicodeDecodeError, as from parse_qsl


def _graphs(params: Sequence[tuple[str, str]], name: str) -> tuple[NamedNode, ...]:
    graphs = []
    for name_, value in params:
        if name_ == name:
            try:
                graphs.append(NamedNode(value))
            except ValueError as exc:
                raise BadRequest(f"{name} '{value[:200]}' is not a valid absolute IRI: {exc}.", parameter=name) from exc
    return tuple(graphs)
