"""A lexical scan of a query for what the endpoint must see before pyoxigraph runs it.

- `SERVICE`: pyoxigraph's evaluator fetches `SERVICE <url>` over HTTP itself, so a federated query
  would make the server call any address a client names (including private ones). Federation is off:
  a query with the keyword is refused before it runs. (The query processes cannot open outbound
  connections either, whatever the text says: see `semreg.sparql.sandbox`.)
- `FROM` / `FROM NAMED`: pyoxigraph's `use_default_graph_as_union` replaces the query's own dataset,
  so the union default graph is applied only to queries without a dataset clause.
- a trailing `LIMIT n`: lets a small result skip the pass that counts solutions (`semreg.sparql.runner`
  still checks what it produced).

The scan splits the text into the SPARQL 1.1 grammar's terminals (section 19.8): IRIREF (with `\\u`
escapes), the four string forms, comments, variables, blank node labels, language tags, prefixed names
whose local part holds `\\#`-style escapes and `%xx`, numbers, words and punctuation. Each lexeme is read
as a whole, so a `#` or a quote inside a prefixed name (`ex:x\\#`) neither starts a comment nor a string.

pyoxigraph matches keywords without a word boundary (`SERVICEex:x {}` and `SERVICESILENT<u> {}` are
federated queries), so a bare word is the SERVICE keyword when it starts with `service` in any case,
and a prefixed name is when it starts so and the rest of the text reads as SERVICE's operands
(`SILENT? VarOrIri {`). Where the scan cannot read a lexeme it moves on by one character, so text it
misreads is still searched: it errs towards seeing SERVICE.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

_BASE = ("A-Za-z\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u02FF\u0370-\u037D\u037F-\u1FFF\u200C-\u200D\u2070-\u218F"
         "\u2C00-\u2FEF\u3001-\uD7FF\uF900-\uFDCF\uFDF0-\uFFFD\U00010000-\U000EFFFF")
_CHARS_U = _BASE + "_"
_CHARS = _CHARS_U + "\\-0-9\u00B7\u0300-\u036F\u203F-\u2040"
_PLX = r"%[0-9A-Fa-f]{2}|\\[_~.\-!$&'()*+,;=/?#@%]"
_PREFIX = f"[{_BASE}](?:[{_CHARS}.]*[{_CHARS}])?"
_LOCAL = f"(?:[{_CHARS_U}:0-9]|{_PLX})(?:(?:[{_CHARS}.:]|{_PLX})*(?:[{_CHARS}:]|{_PLX}))?"
_PNAME = f"(?:{_PREFIX})?:(?:{_LOCAL})?"
_VAR = f"[?$][{_CHARS_U}0-9][{_CHARS_U}0-9\u00B7\u0300-\u036F\u203F-\u2040]*"
_IRI = r'<(?:[^<>"{}|^`\\\x00-\x20]|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8})*>'
_SKIP = r"(?:[\x20\t\r\n]+|#[^\r\n]*)*"

_WORD = f"[{_CHARS_U}][{_CHARS_U}0-9]*"
_NOTED = "(?i:service|from|limit|offset)"  # the words the scan looks at; the rest pass in runs
_PLAIN = "|".join([
    r"[\x20\t\r\n]+|#[^\r\n]*",
    _IRI,
    r'''"""(?:(?:"|"")?(?:[^"\\]|\\.))*"""''',
    r"""'''(?:(?:'|'')?(?:[^'\\]|\\.))*'''""",
    r'''"(?:[^"\\\n\r]|\\.)*"''',
    r"""'(?:[^'\\\n\r]|\\.)*'""",
    _VAR,
    f"_:[{_CHARS_U}0-9](?:[{_CHARS}.]*[{_CHARS}])?",  # a blank node label
    r"@[a-zA-Z]+(?:-[a-zA-Z0-9]+)*(?:--[a-zA-Z]+)?",  # a language tag
    f"(?!{_NOTED}){_PNAME}",
    f"(?!{_NOTED}){_WORD}",
    r"[0-9]+\.[0-9]*[eE][+-]?[0-9]+|\.[0-9]+[eE][+-]?[0-9]+|[0-9]+[eE][+-]?[0-9]+|[0-9]*\.[0-9]+|[0-9]+",
    f"[^{_CHARS_U}:]",  # punctuation, or a character that starts no lexeme
])
# One match is a run of lexemes the scan need not look at, or one prefixed name or word it must.
_LEXEME = re.compile(f"(?:{_PLAIN})+|(?P<pname>{_PNAME})|(?P<word>{_WORD})|.", re.DOTALL)
_TAIL = re.compile(f"(?:(?i:limit){_SKIP}([0-9]{{1,18}}){_SKIP}(?:(?i:offset){_SKIP}[0-9]+{_SKIP})?"
                   f"|(?i:offset){_SKIP}[0-9]+{_SKIP}(?i:limit){_SKIP}([0-9]{{1,18}}){_SKIP})")
# What follows `SERVICE` in a ServiceGraphPattern: `SILENT? VarOrIri {`, keywords matched without a boundary.
_SERVICE_OPERANDS = re.compile(f"{_SKIP}(?:silent{_SKIP})?(?:{_VAR}|{_IRI}|{_PNAME}){_SKIP}\\{{", re.IGNORECASE)


# An IRI (the grammar's IRIREF), what outside one could hide a word from a plain search (a comment, a
# string, an escape), and LIMIT or OFFSET as a word of its own (not part of a name or a variable)
_IRIREF = re.compile(r'<[^<>"{}|^`\\\x00-\x20]*>')
_HIDING = re.compile(r"[#'\"\\]")
_CLAUSE = re.compile(r"(?<![\w:?$.\-/])(?i:limit|offset)(?![\w:\-])")


class Keywords(NamedTuple):
    service: bool
    dataset: bool
    limit: int | None = None  # the outermost LIMIT, when the query ends with one


CACHED_QUERY_CHARS = 8192  # repeated queries are short; long ones would make the cache a memory sink


def scan(query: str) -> Keywords:
    """Which of SERVICE and FROM occur in `query` as keywords, and the LIMIT it ends with."""
    return _scan_cached(query) if len(query) <= CACHED_QUERY_CHARS else _scan(query)


@lru_cache(maxsize=1024)
def _scan_cached(query: str) -> Keywords:
    return _scan(query)


def _scan(query: str) -> Keywords:
    lowered = query.lower()
    if "service" not in lowered and "from" not in lowered:
        if "limit" not in lowered:
            return Keywords(False, False)
        rest = _IRIREF.sub("", query) if "<" in query else query
        if not _HIDING.search(rest):
            # outside IRIs no comment, string or escape can hide a word, and an IRI holds no whitespace: the
            # LIMIT and OFFSET a trailing clause may start at are found without reading every lexeme (the
            # trailing LIMIT only picks how a result is serialised; the runner counts what is produced)
            return Keywords(False, False, _trailing_limit(rest, [m.start() for m in _CLAUSE.finditer(rest)][-2:]))
    service = dataset = False
    clauses: list[int] = []  # where LIMIT and OFFSET start
    for match in _LEXEME.finditer(query):
        kind = match.lastgroup
        if kind is None:
            continue
        word = match.group().lower()
        if word.startswith("service") and (kind == "word" or _SERVICE_OPERANDS.match(query, match.start() + 7)):
            service = True
        elif kind == "word" and word.startswith("from"):
            dataset = True
        elif kind == "word" and (word.startswith("limit") or word.startswith("offset")):
            clauses.append(match.start())
    return Keywords(service, dataset, _trailing_limit(query, clauses[-2:]))


def _trailing_limit(query: str, clauses: list[int]) -> int | None:
    """n when the query ends with `LIMIT n`, `LIMIT n OFFSET m` or `OFFSET m LIMIT n` (comments aside)."""
    for start in clauses:
        found = _TAIL.fullmatch(query, start)
        if found:
            return int(found.group(1) or found.group(2))
    return None
