"""Consul's filter expressions (`?filter=`) as a syntax tree: the grammar of go-bexpr, the library Consul evaluates
them with, rule for rule (its `grammar.peg`, as Consul documents it: `==`, `!=`, `in`, `not in`, `contains`,
`not contains`, `is empty`, `is not empty`, `matches`, `not matches`, `and`, `or`, `not`, parentheses, dotted
selectors with `["key"]` indexes, values quoted with "..." (Go's escapes) or `...` (raw), or bare selectors
and numbers). What a selector means, and whether it exists, is `semreg.consul.filters`'s business.

The parser follows the PEG's ordered choices and their backtracking (`not in Tags` reads as `"not" in Tags`, as
go-bexpr reads it), memoised per rule and position so that backtracking stays linear. Where the PEG recurses
on `and`/`or` chains it loops here, so that a long chain does not deepen the stack. A failure says where (line,
column and offset, as go-bexpr says it) and what was expected there. Budgets, checked before any work grows
with them: an expression of at most `MAX_LENGTH` characters, nested (parentheses and `not`s) at most
`MAX_DEPTH` deep.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from semreg.consul.strconv import unquote

MAX_LENGTH = 4096
MAX_DEPTH = 32

EQUAL, NOT_EQUAL, IN, NOT_IN = "Equal", "Not Equal", "In", "Not In"
IS_EMPTY, IS_NOT_EMPTY, MATCHES, NOT_MATCHES = "Is Empty", "Is Not Empty", "Matches", "Not Matches"
_WS = " \t\r\n"
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_IDENT = _LETTERS | frozenset("0123456789_")
_DIGITS = frozenset("0123456789")


@dataclass(frozen=True)
class Match:
    """`selector op value`: the selector's path, the operator (one of the names above, go-bexpr's) and the value as
    written, unquoted (None for `is empty` and `is not empty`); `"v" in S` and `S contains "v"` are both `In`."""

    selector: tuple[str, ...]
    op: str
    value: str | None

    def __str__(self) -> str:
        return ".".join(self.selector)


@dataclass(frozen=True)
class Not:
    operand: Expression


@dataclass(frozen=True)
class And:
    operands: tuple[Expression, ...]


@dataclass(frozen=True)
class Or:
    operands: tuple[Expression, ...]


Expression = Match | Not | And | Or


class ExpressionError(ValueError):
    """An expression that does not parse, or passes a budget: the message says where and why."""


def parse(text: str) -> Expression:
    """The syntax tree of `text`, or an ExpressionError."""
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"the expression has {len(text)} characters; at most {MAX_LENGTH} are read")
    return _Parser(text).input()


T = TypeVar("T")


class _Fail(Exception):
    """A rule that did not match where it was tried (the PEG's failure: the caller may try another choice)."""


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.farthest = 0
        self.expected: set[str] = set()
        self.memo: dict[tuple[str, int], tuple[object, int] | None] = {}
        self.depth = 0

    # -- failure bookkeeping: the farthest position any terminal failed at, and what it wanted there

    def fail(self, pos: int, wanted: str) -> _Fail:
        if pos > self.farthest:
            self.farthest, self.expected = pos, {wanted}
        elif pos == self.farthest:
            self.expected.add(wanted)
        return _Fail()

    def error(self, pos: int, why: str) -> ExpressionError:
        line = self.text.count("\n", 0, pos) + 1
        column = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return ExpressionError(f"{line}:{column} ({pos}): {why}")

    def memoised(self, rule: str, pos: int, parse: Callable[[int], tuple[T, int]]) -> tuple[T, int]:
        key = (rule, pos)
        if key in self.memo:
            found = self.memo[key]
            if found is None:
                raise _Fail()
            return found  # type: ignore[return-value]
        try:
            result = parse(pos)
        except _Fail:
            self.memo[key] = None
            raise
        self.memo[key] = result
        return result

    # -- terminals

    def literal(self, pos: int, word: str) -> int:
        if self.text.startswith(word, pos):
            return pos + len(word)
        raise self.fail(pos, f'"{word}"')

    def ws(self, pos: int) -> int:
        """`_`: one or more blanks."""
        end = pos
        while end < len(self.text) and self.text[end] in _WS:
            end += 1
        if end == pos:
            raise self.fail(pos, "[ \\t\\r\\n]")
        return end

    def ws_opt(self, pos: int) -> int:
        """`_?`"""
        try:
            return self.ws(pos)
        except _Fail:
            return pos

    def keyword(self, pos: int, *words: str) -> int:
        """`_ "w1" _ "w2" ... _`-style sequences are spelled out by the callers; this is `"w"` after a blank."""
        for word in words:
            pos = self.literal(self.ws(pos), word)
        return pos

    # -- the grammar

    def input(self) -> Expression:
        try:
            pos = self.ws_opt(0)
            expr, pos = self.or_expression(pos)
            pos = self.ws_opt(pos)
            if pos != len(self.text):
                raise self.fail(pos, "end of input")
            return expr
        except _Fail:
            wanted = sorted(self.expected)
            listed = ", ".join(wanted[:-1]) + " or " + wanted[-1] if len(wanted) > 1 else "".join(wanted)
            found = self.text[self.farthest:self.farthest + 12]
            at = f'at "{found}"' if found else "at the end"
            raise self.error(self.farthest, f"no match found {at}, expected: {listed}") from None

    def or_expression(self, pos: int) -> tuple[Expression, int]:
        return self.memoised("or", pos, lambda p: self.chain(p, "or", self.and_expression, Or))

    def and_expression(self, pos: int) -> tuple[Expression, int]:
        return self.memoised("and", pos, lambda p: self.chain(p, "and", self.not_expression, And))

    def chain(self, pos: int, word: str, operand: Callable[[int], tuple[Expression, int]],
              node: Callable[[tuple[Expression, ...]], Expression]) -> tuple[Expression, int]:
        """`left _ word _ right / left`, right-recursive in the PEG: the longest chain of operands that parse."""
        first, pos = operand(pos)
        operands = [first]
        while True:
            try:
                after = self.ws(self.literal(self.ws(pos), word))
                more, after = operand(after)
            except _Fail:
                break
            operands.append(more)
            pos = after
        return (first if len(operands) == 1 else node(tuple(operands))), pos

    def not_expression(self, pos: int) -> tuple[Expression, int]:
        return self.memoised("not", pos, self._not_expression)

    def _not_expression(self, pos: int) -> tuple[Expression, int]:
        try:
            after = self.ws(self.literal(pos, "not"))
            with self.deeper(pos):
                operand, end = self.not_expression(after)
            # `not not x` is x, as go-bexpr folds it
            return (operand.operand if isinstance(operand, Not) else Not(operand)), end
        except _Fail:
            return self.parenthesized(pos)

    def parenthesized(self, pos: int) -> tuple[Expression, int]:
        if pos < len(self.text) and self.text[pos] == "(":
            with self.deeper(pos):
                inner, end = self.or_expression(self.ws_opt(pos + 1))
            end = self.ws_opt(end)
            if end < len(self.text) and self.text[end] == ")":
                return inner, end + 1
            self.fail(end, '")"')
            raise self.error(end, "Unmatched parentheses")
        self.fail(pos, '"("')
        return self.match(pos)

    def deeper(self, pos: int) -> _Depth:
        return _Depth(self, pos)

    def match(self, pos: int) -> tuple[Expression, int]:
        return self.memoised("match", pos, self._match)

    def _match(self, pos: int) -> tuple[Expression, int]:
        try:  # Selector (== / != / contains / not contains / matches / not matches) Value
            selector, after = self.selector(pos)
            op, after = self.operator_with_value(after)
            value, end = self.value(after)
            return Match(selector, op, value), end
        except _Fail:
            pass
        try:  # Selector (is empty / is not empty)
            selector, after = self.selector(pos)
            op, end = self.emptiness(after)
            return Match(selector, op, None), end
        except _Fail:
            pass
        # Value (in / not in) Selector
        value, after = self.value(pos)
        op, after = self.membership(after)
        try:
            selector, end = self.selector(after)
        except _Fail:
            raise self.error(after, "Invalid selector") from None
        return Match(selector, op, value), end

    def operator_with_value(self, pos: int) -> tuple[str, int]:
        for op, parse in ((EQUAL, lambda p: self.ws_opt(self.literal(self.ws_opt(p), "=="))),
                          (NOT_EQUAL, lambda p: self.ws_opt(self.literal(self.ws_opt(p), "!="))),
                          (IN, lambda p: self.ws(self.keyword(p, "contains"))),
                          (NOT_IN, lambda p: self.ws(self.keyword(p, "not", "contains"))),
                          (MATCHES, lambda p: self.ws(self.keyword(p, "matches"))),
                          (NOT_MATCHES, lambda p: self.ws(self.keyword(p, "not", "matches")))):
            try:
                return op, parse(pos)
            except _Fail:
                continue
        raise _Fail()

    def emptiness(self, pos: int) -> tuple[str, int]:
        for op, words in ((IS_EMPTY, ("is", "empty")), (IS_NOT_EMPTY, ("is", "not", "empty"))):
            try:
                return op, self.keyword(pos, *words)
            except _Fail:
                continue
        raise _Fail()

    def membership(self, pos: int) -> tuple[str, int]:
        for op, words in ((IN, ("in",)), (NOT_IN, ("not", "in"))):
            try:
                return op, self.ws(self.keyword(pos, *words))
            except _Fail:
                continue
        raise _Fail()

    def selector(self, pos: int) -> tuple[tuple[str, ...], int]:
        return self.memoised("selector", pos, self._selector)

    def _selector(self, pos: int) -> tuple[tuple[str, ...], int]:
        first, pos = self.identifier(pos)
        path = [first]
        while True:
            if pos < len(self.text) and self.text[pos] == ".":
                try:
                    name, pos = self.identifier(pos + 1)
                except _Fail:
                    break
                path.append(name)
            elif pos < len(self.text) and self.text[pos] == "[":
                key, pos = self.index(pos)
                path.append(key)
            else:
                self.fail(pos, '"."')
                self.fail(pos, '"["')
                break
        return tuple(path), pos

    def identifier(self, pos: int) -> tuple[str, int]:
        if pos >= len(self.text) or self.text[pos] not in _LETTERS:
            raise self.fail(pos, "[a-zA-Z]")
        end = pos + 1
        while end < len(self.text) and self.text[end] in _IDENT:
            end += 1
        self.fail(end, "[a-zA-Z0-9_]")
        return self.text[pos:end], end

    def index(self, pos: int) -> tuple[str, int]:
        """`[ "key" ]` (a string literal, either quoting)."""
        after = self.ws_opt(pos + 1)
        try:
            key, after = self.string(after)
        except _Fail:
            raise self.error(after, "Invalid index") from None
        after = self.ws_opt(after)
        if after < len(self.text) and self.text[after] == "]":
            return key, after + 1
        raise self.error(after, "Unclosed index expression")

    def value(self, pos: int) -> tuple[str, int]:
        """A bare selector (its dotted text), a number (its text) or a quoted string (unquoted)."""
        try:
            path, end = self.selector(pos)
            return ".".join(path), end
        except _Fail:
            pass
        try:
            return self.number(pos)
        except _Fail:
            pass
        return self.string(pos)

    def number(self, pos: int) -> tuple[str, int]:
        text, end = self.text, pos
        if end < len(text) and text[end] == "-":
            end += 1
        if end >= len(text) or text[end] not in _DIGITS:
            raise self.fail(end, "[0-9]")
        if text[end] == "0":
            end += 1
        else:
            while end < len(text) and text[end] in _DIGITS:
                end += 1
        if end + 1 < len(text) and text[end] == "." and text[end + 1] in _DIGITS:
            end += 1
            while end < len(text) and text[end] in _DIGITS:
                end += 1
        if end < len(text) and text[end] not in _WS and text[end] != ")":
            raise self.error(end, "Invalid number literal")
        return text[pos:end], end

    def string(self, pos: int) -> tuple[str, int]:
        text = self.text
        if pos >= len(text) or text[pos] not in '"`':
            self.fail(pos, '"\\""')
            raise self.fail(pos, '"`"')
        quote = text[pos]
        end = text.find(quote, pos + 1)
        if end < 0:
            raise self.error(pos, "Unterminated string literal")
        body = text[pos + 1:end]
        try:
            return (body.replace("\r", "") if quote == "`" else unquote(body)), end + 1
        except ValueError as exc:
            raise self.error(pos, f"invalid string literal: {exc}") from None


class _Depth:
    """Entering a `not` or a parenthesis: past MAX_DEPTH the expression is refused, not recursed into."""

    def __init__(self, parser: _Parser, pos: int) -> None:
        self.parser, self.pos = parser, pos

    def __enter__(self) -> None:
        self.parser.depth += 1
        if self.parser.depth > MAX_DEPTH:
            raise self.parser.error(self.pos, f"nested more than {MAX_DEPTH} deep (parentheses and nots)")

    def __exit__(self, *exc: object) -> None:
        self.parser.depth -= 1
