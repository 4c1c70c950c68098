"""A lexical scan of a query for the two keywords the endpoint must see before pyoxigraph runs it.

- `SERVICE`: pyoxigraph's evaluator fetches `SERVICE <url>` over HTTP itself, so a federated query
  would make the server call any address a client names (including private ones). Federation is off:
  a query with the keyword is refused before it runs.
- `FROM` / `FROM NAMED`: pyoxigraph's `use_default_graph_as_union` replaces the query's own dataset,
  so the union default graph is applied only to queries without a dataset clause.

The scan skips strings, IRIs and comments, and does not count a keyword that continues a variable
(`?service`), a prefixed name (`sr:service`, `ex:my-service`), a blank node label or a language tag.
It errs towards seeing `SERVICE`: the rare prefixed name such as `ex:a.service` is refused too, which
is safer than letting a real keyword through. (pyoxigraph does not decode `\\u` escapes outside
strings and IRIs, so an escaped keyword cannot hide from the scan.)
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

_TOKEN = re.compile(
    r'''"""(?:[^"\\]|\\.|"(?!""))*"""'''
    r"""|'''(?:[^'\\]|\\.|'(?!''))*'''"""
    r'''|"(?:[^"\\\n\r]|\\.)*"'''
    r"""|'(?:[^'\\\n\r]|\\.)*'"""
    r'''|<[^<>"{}|^`\\\x00-\x20]*>'''
    r"|#[^\n\r]*"
    r"|(?P<keyword>service|from)(?![\w\-:])",
    re.IGNORECASE | re.DOTALL,
)
# Besides letters and digits, what a name may continue over; what precedes the run decides the token.
_NAME_PUNCTUATION = frozenset("_-\u00B7\u203F\u2040")


class Keywords(NamedTuple):
    service: bool
    dataset: bool


CACHED_QUERY_CHARS = 8192  # repeated queries are short; long ones would make the cache a memory sink


def scan(query: str) -> Keywords:
    """Which of SERVICE and FROM occur in `query` as keywords."""
    return _scan_cached(query) if len(query) <= CACHED_QUERY_CHARS else _scan(query)


@lru_cache(maxsize=1024)
def _scan_cached(query: str) -> Keywords:
    return _scan(query)


def _scan(query: str) -> Keywords:
    lowered = query.lower()
    if "service" not in lowered and "from" not in lowered:
        return Keywords(False, False)
    service = dataset = False
    for match in _TOKEN.finditer(query):
        word = match.group("keyword")
        if word is None or _continues_name(query, match.start()):
            continue
        if word.lower() == "service":
            service = True
        else:
            dataset = True
    return Keywords(service, dataset)


def _continues_name(query: str, start: int) -> bool:
    """True when the word at `start` is the tail of a variable, prefixed name, blank node or language tag."""
    before = start
    while before > 0 and (query[before - 1].isalnum() or query[before - 1] in _NAME_PUNCTUATION):
        before -= 1
    return before > 0 and query[before - 1] in "?$:@"
