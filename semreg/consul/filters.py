"""Consul's `?filter=` over the entries an endpoint answers with (`semreg.consul.entries`): an expression
(`semreg.consul.expressions`) checked against the endpoint's type, then evaluated on each entry, as Consul does
with go-bexpr's typed filters.

Each endpoint's type is written below as the entries are built, field for field (a test holds the two
together), so a filter sees exactly what a client reads; `CreateIndex` and `ModifyIndex` are left out, as
Consul leaves them out of its filters. A selector that names no field of the type, an operator the field does
not take, or a value that does not read as the field's type is refused before anything is read, in
go-bexpr's words ("Failed to create boolean expression evaluator: Selector "Service.Foo" is not valid").

What each kind of field takes (go-bexpr's table, which Consul's documentation lists per endpoint):

| field | operators | value |
|---|---|---|
| string | `==`, `!=`, `in`/`contains` (a substring), `not in`, `matches`, `not matches` | text |
| whole number, boolean | `==`, `!=` | Go's `strconv.ParseInt` (base prefixes `0x`, `0o`, `0b`, `0`), `ParseBool` |
| list of strings (`Tags`) | `in`/`contains` (an element), `not in`, `is empty`, `is not empty` | text |
| map (`Meta`) | `in`/`contains` (a key), `not in`, `is empty`, `is not empty`; `Meta.KEY` is the value | text |
| list of objects (`Checks`) | `is empty`, `is not empty`; `Checks.Status` is true when any check's is | |

A missing map key is no value: `==`, `in`, `is not empty` and `matches` are false on it, their negations true.
`matches` is RE2, the syntax and semantics of Go's `regexp` (google-re2, in linear time whatever the pattern),
unanchored, on patterns of at most `MAX_PATTERN` characters.

A filter's cost grows with its length and the entries: the longest (4,096 characters, ~100 regular expressions)
took 0.75 s over 1,000 health entries. So a filter is applied as request work (`Filter.keep`, a checkpoint an
entry) and never holds the loop that answers heartbeats; its time limit and shedding are the lane's.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import re2

from semreg.consul import expressions as ex
from semreg.consul.strconv import parse_bool, parse_int
from semreg.work.lane import checkpoint

MAX_PATTERN = 1024
PREFIX = "Failed to create boolean expression evaluator: "

STRING, INT, BOOL = "string", "int", "bool"
STRINGS: list[Any] = [STRING]
STRING_MAP: dict[str, Any] = {"*": STRING}
WEIGHTS = {"Passing": INT, "Warning": INT}

NODE = {"ID": STRING, "Node": STRING, "Address": STRING, "Datacenter": STRING, "TaggedAddresses": STRING_MAP,
        "Meta": STRING_MAP}
AGENT_SERVICE = {"ID": STRING, "Service": STRING, "Tags": STRINGS, "Meta": STRING_MAP, "Port": INT, "Address": STRING,
                 "TaggedAddresses": {"*": {"Address": STRING, "Port": INT}}, "Weights": WEIGHTS,
                 "EnableTagOverride": BOOL, "Datacenter": STRING, "Namespace": STRING}
CHECK = {"Node": STRING, "CheckID": STRING, "Name": STRING, "Status": STRING, "Notes": STRING, "Output": STRING,
         "ServiceID": STRING, "ServiceName": STRING, "ServiceTags": STRINGS, "Type": STRING, "Namespace": STRING}
HEALTH_ENTRY = {"Node": NODE, "Service": AGENT_SERVICE, "Checks": [CHECK]}
CATALOG_SERVICE = {"ID": STRING, "Node": STRING, "Address": STRING, "Datacenter": STRING,
                   "TaggedAddresses": STRING_MAP, "NodeMeta": STRING_MAP, "ServiceKind": STRING, "ServiceID": STRING,
                   "ServiceName": STRING, "ServiceTags": STRINGS, "ServiceAddress": STRING, "ServicePort": INT,
                   "ServiceMeta": STRING_MAP, "ServiceWeights": WEIGHTS, "ServiceEnableTagOverride": BOOL,
                   "Namespace": STRING}

_EQUALITY = (ex.EQUAL, ex.NOT_EQUAL)
_MEMBERSHIP = (ex.IN, ex.NOT_IN)
_EMPTINESS = (ex.IS_EMPTY, ex.IS_NOT_EMPTY)
_REGEX = (ex.MATCHES, ex.NOT_MATCHES)
# the operators that are true of a missing map key (go-bexpr's NotPresentDisposition)
_TRUE_WHEN_MISSING = frozenset({ex.NOT_EQUAL, ex.NOT_IN, ex.IS_EMPTY, ex.NOT_MATCHES})
_NEGATED = {ex.NOT_EQUAL: ex.EQUAL, ex.NOT_IN: ex.IN, ex.IS_NOT_EMPTY: ex.IS_EMPTY, ex.NOT_MATCHES: ex.MATCHES}
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False

T = TypeVar("T")


class FilterError(ValueError):
    """A filter that does not parse or does not fit the endpoint's type; its message is Consul's answer."""


class _Compiled:
    """One match expression, checked: the field's type at the end of its selector and the value read as it."""

    def __init__(self, match: ex.Match, kinds: list[Any], value: Any) -> None:
        self.match, self.kinds, self.value = match, kinds, value


class Filter:
    """A filter checked against one endpoint's type; called on an entry of that type, it says whether to keep it."""

    def __init__(self, text: str, schema: dict[str, Any]) -> None:
        try:
            tree = ex.parse(text)
        except ex.ExpressionError as exc:
            raise FilterError(PREFIX + str(exc)) from None
        self.text = text  # what it was given: the same text keeps the same entries of the same answer
        self.schema = schema
        self.tree = self._check(tree)

    def __call__(self, entry: Mapping[str, Any]) -> bool:
        return _evaluate(self.tree, entry)

    def keep(self, items: Iterable[T], entry_of: Callable[[T], Mapping[str, Any]] | None = None) -> list[T]:
        """The items whose entries (`entry_of(item)`, or the items themselves) the filter keeps, with a checkpoint
        before each: run as request work (`semreg.work.lane`), a long filter over many entries takes the event
        loop a slice at a time."""
        kept = []
        for item in items:
            checkpoint()
            if self(entry_of(item) if entry_of is not None else item):  # type: ignore[arg-type]
                kept.append(item)
        return kept

    def keep_values(self, entries: Mapping[str, T]) -> dict[str, T]:
        return dict(self.keep(entries.items(), lambda kv: kv[1]))  # type: ignore[arg-type,return-value]

    def _check(self, node: Any) -> Any:
        if isinstance(node, ex.Not):
            return ex.Not(self._check(node.operand))
        if isinstance(node, ex.And | ex.Or):
            return type(node)(tuple(self._check(o) for o in node.operands))
        return self._compile(node)

    def _compile(self, match: ex.Match) -> _Compiled:
        kinds = _kinds(self.schema, match.selector)
        kind = kinds[-1]
        if match.op not in _operators(kind):
            raise FilterError(f'{PREFIX}Invalid match operator "{match.op}" for selector {_quote(str(match))}')
        if match.value is None:
            return _Compiled(match, kinds, None)
        element = kind[0] if isinstance(kind, list) else STRING if isinstance(kind, dict) else kind
        try:
            value: Any = _coerce(element, match.value)
        except ValueError as exc:
            raise FilterError(f"{PREFIX}Failed to coerce value {_quote(match.value)} for selector "
                              f"{_quote(str(match))}: {exc}") from None
        if match.op in _REGEX:
            value = _regex(match.value)
        return _Compiled(match, kinds, value)


def _kinds(schema: dict[str, Any], selector: tuple[str, ...]) -> list[Any]:
    """The type at each step of `selector` (the schema itself first), or a FilterError naming the first step that
    is no field. A list of objects lends its objects' fields: `Checks.Status` is each check's."""
    kinds: list[Any] = [schema]
    kind: Any = schema
    for n, name in enumerate(selector):
        inner = kind[0] if isinstance(kind, list) and isinstance(kind[0], dict) else kind
        if isinstance(inner, dict) and "*" in inner:
            kind = inner["*"]
        elif isinstance(inner, dict) and name in inner:
            kind = inner[name]
        else:
            raise FilterError(f"{PREFIX}Selector {_quote('.'.join(selector[:n + 1]))} is not valid")
        kinds.append(kind)
    return kinds


def _operators(kind: Any) -> tuple[str, ...]:
    if kind == STRING:
        return _EQUALITY + _MEMBERSHIP + _REGEX
    if kind in (INT, BOOL):
        return _EQUALITY
    if isinstance(kind, list):
        return _EMPTINESS if isinstance(kind[0], dict) else _MEMBERSHIP + _EMPTINESS
    if "*" in kind:
        return _EMPTINESS + _MEMBERSHIP
    return ()  # an object: only its fields are compared


def _coerce(kind: Any, raw: str) -> Any:
    if kind == INT:
        return parse_int(raw)
    if kind == BOOL:
        return parse_bool(raw)
    return raw


def _regex(pattern: str) -> Any:
    if len(pattern) > MAX_PATTERN:
        raise FilterError(f"{PREFIX}the regular expression has {len(pattern)} characters; at most {MAX_PATTERN} "
                          "are read")
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        why = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise FilterError(f"{PREFIX}Failed to compile regular expression {_quote(pattern)}: {why}") from None


def _quote(text: str) -> str:
    """As Go's %q quotes, near enough: double quotes, backslash escapes."""
    return json.dumps(text, ensure_ascii=False)


def _evaluate(node: Any, entry: Mapping[str, Any]) -> bool:
    if isinstance(node, ex.Not):
        return not _evaluate(node.operand, entry)
    if isinstance(node, ex.And):
        return all(_evaluate(o, entry) for o in node.operands)
    if isinstance(node, ex.Or):
        return any(_evaluate(o, entry) for o in node.operands)
    return _match(node, 0, entry)


def _match(c: _Compiled, depth: int, value: Any) -> bool:
    """go-bexpr's walk: down the selector through objects and map keys; across a list (any element will do)."""
    kind = c.kinds[depth]
    selector = c.match.selector
    if isinstance(kind, list) and depth < len(selector):
        items = value if isinstance(value, list) else []
        return any(_step(c, depth, item) for item in items)
    if depth == len(selector):
        return _operate(c, _as(kind, value))
    return _step(c, depth, value)


def _step(c: _Compiled, depth: int, value: Any) -> bool:
    name = c.match.selector[depth]
    fields = value if isinstance(value, dict) else {}
    kind = c.kinds[depth]
    inner = kind[0] if isinstance(kind, list) else kind
    if "*" in inner and name not in fields:
        return c.match.op in _TRUE_WHEN_MISSING
    return _match(c, depth + 1, fields.get(name))


def _as(kind: Any, value: Any) -> Any:
    """The value as its type says, its zero value where it is absent or of another type."""
    expected = {STRING: str, INT: int, BOOL: bool}.get(kind) if isinstance(kind, str) else type(kind)
    if expected is not None and isinstance(value, expected) and not (expected is int and isinstance(value, bool)):
        return value
    return {STRING: "", INT: 0, BOOL: False}.get(kind) if isinstance(kind, str) else type(kind)()


def _operate(c: _Compiled, value: Any) -> bool:
    op = c.match.op
    if op in _NEGATED:
        return not _positive(_NEGATED[op], c.value, value)
    return _positive(op, c.value, value)


def _positive(op: str, wanted: Any, value: Any) -> bool:
    if op == ex.EQUAL:
        return bool(value == wanted)
    if op == ex.IN:
        return wanted in value  # a substring, an element or a key
    if op == ex.IS_EMPTY:
        return len(value) == 0
    return wanted.search(value) is not None  # MATCHES
