"""The parameters of a discovery question, read from any map of strings: `GET /v1/discover`'s query string,
a saved query's stored form (`semreg.registry.saved`), a DNS name's question. One parser, so that a question
asked any of these ways is validated the same way (a 400 naming the parameter at fault otherwise)."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from semreg.errors import BadRequest
from semreg.rdf.terms import ANY, PrefixMap, Tag, parse_component, parse_tag
from semreg.reasoning.matching import parse_match, with_ranking
from semreg.registry.conjunctive import MAX_PATTERNS, ConjunctiveQuery
from semreg.registry.discovery import DiscoverQuery
from semreg.registry.selector import Selector, parse_selector

ENVIRONMENT = "environment"
META = "meta."  # meta.KEY=VALUE, repeatable
LIMIT_MAX = 1_000_000


class Params(Protocol):
    """A query string's view: one value by name, and every pair in order (Starlette's `QueryParams` is one)."""

    def get(self, key: str, /) -> str | None: ...

    def multi_items(self) -> list[tuple[str, str]]: ...


class Pairs:
    """`Params` over a list of pairs (a stored question)."""

    def __init__(self, pairs: Iterable[tuple[str, str]]) -> None:
        self.pairs = list(pairs)

    def get(self, key: str, /) -> str | None:
        return next((v for k, v in self.pairs if k == key), None)

    def multi_items(self) -> list[tuple[str, str]]:
        return list(self.pairs)


def int_value(params: Params, name: str, low: int, high: int) -> int | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number, not '{raw[:50]}'.", field=name) from None
    if not low <= value <= high:
        raise BadRequest(f"{name} must be between {low} and {high}.", field=name)
    return value


def bool_value(params: Params, name: str, default: bool) -> bool:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise BadRequest(f"{name} takes true or false, not '{raw[:40]}'.", field=name)


def pattern_of(params: Params, prefixes: PrefixMap, purpose: str = "discover") -> Tag:
    """The pattern `s`, `p`, `o` of a query; `purpose` says what it is for in the sentence when `s` is missing."""
    s_ = params.get("s")
    if s_ is None or not s_.strip():
        raise BadRequest(f"s is required: the subject term of the pattern to {purpose} (p and o are optional).",
                         field="s")
    p, o = params.get("p") or None, params.get("o") or None
    return Tag(parse_component(s_, prefixes), parse_component(p, prefixes, predicate=True),
               parse_component(o, prefixes))


def selector_from(params: Params) -> Selector:
    """The read's `environment=` and `meta.KEY=VALUE` filters (the caller checks the token may read it)."""
    return parse_selector(params.get(ENVIRONMENT),
                          [(k[len(META):], v) for k, v in params.multi_items() if k.startswith(META)])


def discover_query(params: Params, prefixes: PrefixMap) -> DiscoverQuery:
    """The query of a `GET /v1/discover` (a 400 naming the parameter at fault otherwise). The caller checks
    that the token may read its environment."""
    status = params.get("status")
    if status not in (None, "", "up", "any"):
        raise BadRequest(f"status takes 'up' (the default) or 'any', not '{status[:40]}'.", field="status")
    match = parse_match(params.get("match"), params.get("min_similarity"))
    return DiscoverQuery(pattern_of(params, prefixes), match, params.get("service") or None,
                         status == "any", int_value(params, "limit", 1, LIMIT_MAX), bool_value(params, "tags", False),
                         selector_from(params))


def patterns_of(values: Any, name: str, prefixes: PrefixMap, needs_predicate: bool = False) -> tuple[Tag, ...]:
    """The tags of a conjunctive question's `all` or `provided`: a list of 1 to `MAX_PATTERNS` tags; a 400 naming
    the one at fault (`all[2]: ...`)."""
    if not isinstance(values, list) or not values:
        raise BadRequest(f"{name} must be a non-empty list of tags (strings of one or three terms, or objects with "
                         f"s, p, o).", field=name)
    if len(values) > MAX_PATTERNS:
        raise BadRequest(f"{name} holds {len(values)} tags; at most {MAX_PATTERNS} are taken.", field=name)
    tags = []
    for n, value in enumerate(values):
        try:
            tag = parse_tag(value, prefixes)
        except BadRequest as exc:
            raise BadRequest(f"{name}[{n}]: {exc.message}", field=f"{name}[{n}]") from None
        if needs_predicate and tag.p == ANY:
            raise BadRequest(f"{name}[{n}]: a provided tag needs a predicate: it stands for the instance's tags on "
                             f"that predicate (and its sub-properties).", field=f"{name}[{n}]")
        tags.append(tag)
    return tuple(tags)


def conjunctive_query(fields: Mapping[str, Any], prefixes: PrefixMap) -> ConjunctiveQuery:
    """The question of a `POST /v1/discover` body, or of a saved query's `all` (already of the JSON types of
    its schema): a 400 naming the field at fault otherwise. The caller checks the token may read its
    environment."""
    provided = fields.get("provided")
    pairs = Pairs((k, str(v)) for k, v in fields.items()
                  if k in ("match", "min_similarity", "limit", "status", "service") and v is not None)
    q = discover_query(Pairs([("s", ANY), *pairs.pairs]), prefixes)
    selector = parse_selector(fields.get("environment"), sorted((fields.get("meta") or {}).items()))
    rank = fields.get("rank")
    match = with_ranking(q.match, None if rank is None else str(rank))
    return ConjunctiveQuery(patterns_of(fields.get("all"), "all", prefixes),
                            match, None if provided is None else patterns_of(provided, "provided", prefixes, True),
                            q.service, q.any_status, q.limit, bool(fields.get("tags")), selector)
