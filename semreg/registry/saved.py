"""A saved query as the discovery it stands for: the checked, stored form of a body
(`{"s","p","o","match","environment","meta","limit"}`, or `{"all", "provided", ...}` for several patterns at
once), and the question (`semreg.registry.questions.Question`) a stored one asks.

Both go through the one parser of discovery questions (`semreg.registry.query_params`), so a saved query is
refused, or answered, exactly as the same `GET /v1/discover` would be. Terms are stored as full IRIs: a
prefix redefined later does not change what a saved query means.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from semreg.errors import BadRequest
from semreg.knowledge.knowledge import Knowledge
from semreg.knowledge.queries import SavedQuery
from semreg.rdf.terms import PrefixMap
from semreg.reasoning.matching import by_score, floor_of, match_text
from semreg.registry.query_params import META, Pairs, conjunctive_query, discover_query
from semreg.registry.questions import Question
from semreg.registry.selector import parse_selector

CONJUNCTIVE = "a saved query is one pattern (s, p, o) or several (all), not both: {names} cannot be given with all."


def pairs_of(query: Mapping[str, Any]) -> Pairs:
    """A stored (or submitted) query as the parameters of a `GET /v1/discover`."""
    pairs: list[tuple[str, str]] = []
    for key in ("s", "p", "o", "match", "min_similarity", "environment"):
        value = query.get(key)
        if value is not None:
            pairs.append((key, str(value)))
    for key, value in sorted((query.get("meta") or {}).items()):
        pairs.append((META + str(key), str(value)))
    if query.get("limit") is not None:
        pairs.append(("limit", str(query["limit"])))
    return Pairs(pairs)


def checked(body: Mapping[str, Any], prefixes: PrefixMap) -> tuple[dict[str, Any], Question]:
    """The stored form of a submitted query and the discovery it asks; a 400 naming the field at fault."""
    q: Question
    if body.get("all") is not None:
        both = [k for k in ("s", "p", "o") if body.get(k) is not None]
        if both:
            raise BadRequest(CONJUNCTIVE.format(names=", ".join(both)), field=both[0])
        q = conjunctive_query(body, prefixes)
        shape: dict[str, Any] = {"all": [t.as_json() for t in q.patterns]}
        if q.provided is not None:
            shape["provided"] = [t.as_json() for t in q.provided]
    else:
        if body.get("provided") is not None:
            raise BadRequest("provided goes with all (the conjunctive form): a saved query of one pattern has no "
                             "provided tags.", field="provided")
        if body.get("rank") is not None:
            raise BadRequest("rank goes with all (the conjunctive form): a saved query of one pattern ranks as "
                             "GET /v1/discover does.", field="rank")
        q = discover_query(pairs_of(body), prefixes)
        shape = {"s": q.tag.s, "p": q.tag.p, "o": q.tag.o}
    stored = {**shape, "match": match_text(q.match), "environment": q.selector.environment,
              "meta": dict(q.selector.meta), "limit": q.limit}
    if body.get("min_similarity") is not None:
        stored["min_similarity"] = floor_of(q.match)
    if by_score(q.match):
        stored["rank"] = "score"
    return stored, q


def discovery_of(saved: SavedQuery, prefixes: PrefixMap) -> Question:
    """The discovery a saved query asks (its terms are full IRIs, so the prefixes of now do not matter)."""
    if saved.query.get("all") is not None:
        return conjunctive_query(saved.query, prefixes)
    return discover_query(pairs_of(saved.query), prefixes)


class Questions:
    """The discovery each saved query asks, parsed once per change of the saved queries or the prefixes (DNS
    and the HTTP routes ask the same names again and again)."""

    MAX = 10_000

    def __init__(self, knowledge: Knowledge) -> None:
        self.knowledge = knowledge
        self._parsed: dict[tuple[str, str | None], tuple[int, int, Question]] = {}

    def of(self, saved: SavedQuery, environment: str | None = None) -> Question:
        """`saved`'s discovery, in `environment` instead of its own when given (a 400 if that is no name)."""
        versions = (self.knowledge.queries.version, self.knowledge.prefixes.version)
        key = (saved.name, environment)
        cached = self._parsed.get(key)
        if cached is not None and cached[:2] == versions:
            return cached[2]
        q = discovery_of(saved, self.knowledge.prefixes)
        if environment is not None:
            q = replace(q, selector=parse_selector(environment, q.selector.meta))
        if len(self._parsed) >= self.MAX:
            self._parsed.clear()
        self._parsed[key] = (*versions, q)
        return q
