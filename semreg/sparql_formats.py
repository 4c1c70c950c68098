"""The representations `/sparql` offers, and `Accept` negotiation among them (RFC 9110, section 12.5.1).

Each result kind has an ordered table of offers `(media type, pyoxigraph format)`; the first is the
default for a missing Accept or `*/*`. An alias (`application/json`, `application/xml`) is answered
under the name the client asked for, in the format it stands for.
"""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from pyoxigraph import QueryResultsFormat, RdfFormat

from semreg.errors import NotAcceptable


class Offer(NamedTuple):
    media_type: str
    format: QueryResultsFormat | RdfFormat

    @property
    def content_type(self) -> str:
        # Every offered format is text in UTF-8; saying so spares clients a guess.
        return self.media_type + "; charset=utf-8"


SOLUTIONS = "solutions"  # SELECT and ASK
GRAPH = "graph"  # CONSTRUCT and DESCRIBE, and the service description

OFFERS: dict[str, tuple[Offer, ...]] = {
    SOLUTIONS: (
        Offer("application/sparql-results+json", QueryResultsFormat.JSON),
        Offer("application/sparql-results+xml", QueryResultsFormat.XML),
        Offer("text/csv", QueryResultsFormat.CSV),
        Offer("text/tab-separated-values", QueryResultsFormat.TSV),
        Offer("application/json", QueryResultsFormat.JSON),
        Offer("application/xml", QueryResultsFormat.XML),
        Offer("text/xml", QueryResultsFormat.XML),
    ),
    GRAPH: (
        Offer("text/turtle", RdfFormat.TURTLE),
        Offer("application/n-triples", RdfFormat.N_TRIPLES),
        Offer("application/ld+json", RdfFormat.JSON_LD),
        Offer("application/rdf+xml", RdfFormat.RDF_XML),
        Offer("application/x-turtle", RdfFormat.TURTLE),
        Offer("application/json", RdfFormat.JSON_LD),
        Offer("application/xml", RdfFormat.RDF_XML),
    ),
}



def _main_media_types(offers: tuple[Offer, ...]) -> tuple[str, ...]:
    first: dict[QueryResultsFormat | RdfFormat, str] = {}
    for offer in offers:
        first.setdefault(offer.format, offer.media_type)
    return tuple(first.values())


# The main media type of each format (its first offer), for error messages.
CANONICAL = {kind: _main_media_types(offers) for kind, offers in OFFERS.items()}


class MediaRange(NamedTuple):
    type: str
    subtype: str
    q: float

    @property
    def specificity(self) -> int:
        """2 for `type/subtype`, 1 for `type/*`, 0 for `*/*`."""
        return (self.type != "*") + (self.subtype != "*")

    def matches(self, media_type: str) -> bool:
        type_, _, subtype = media_type.partition("/")
        return self.type in ("*", type_) and self.subtype in ("*", subtype)


def parse_accept(header: str) -> list[MediaRange]:
    """The media ranges of an Accept header; malformed ranges and q-values are skipped, not fatal."""
    ranges = []
    for item in header.split(","):
        media, *params = item.split(";")
        type_, slash, subtype = media.strip().lower().partition("/")
        if not slash or not type_ or not subtype or (type_ == "*" and subtype != "*"):
            continue
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value.strip())
                except ValueError:
                    q = -1.0
        if 0.0 <= q <= 1.0:
            ranges.append(MediaRange(type_, subtype, q))
    return ranges


def negotiate(accept: str | None, kind: str) -> Offer | None:
    """The offer of `kind` the client prefers, or None when it accepts none of them.

    An offer's quality is that of the most specific range matching it; the highest quality wins,
    then the more specific match (`application/json` over `*/*`), then the order of `OFFERS`.
    """
    # Clients repeat a handful of Accept headers; only short ones are cached, to bound the cache's memory.
    return _negotiate_cached(accept, kind) if accept is None or len(accept) <= 512 else _negotiate(accept, kind)


@lru_cache(maxsize=256)
def _negotiate_cached(accept: str | None, kind: str) -> Offer | None:
    return _negotiate(accept, kind)


def _negotiate(accept: str | None, kind: str) -> Offer | None:
    offers = OFFERS[kind]
    if accept is None or not accept.strip():
        return offers[0]
    ranges = parse_accept(accept)
    best: tuple[float, int, int] | None = None
    chosen = None
    for rank, offer in enumerate(offers):
        matching = [r for r in ranges if r.matches(offer.media_type)]
        if not matching:
            continue
        most_specific = max(matching, key=lambda r: (r.specificity, r.q))
        if most_specific.q <= 0.0:
            continue
        key = (most_specific.q, most_specific.specificity, -rank)
        if best is None or key > best:
            best, chosen = key, offer
    return chosen


def require(accept: str | None, kind: str, what: str) -> Offer:
    """`negotiate`, raising `NotAcceptable` with the offered types when nothing fits."""
    offer = negotiate(accept, kind)
    if offer is None:
        raise NotAcceptable(f"none of the media types in Accept '{_clip(accept or '')}' is available for {what}; "
                            f"this endpoint offers {', '.join(CANONICAL[kind])}.",
                            offered=list(CANONICAL[kind]))
    return offer


def require_some(accept: str | None) -> None:
    """Raise `NotAcceptable` before any work when `accept` takes no result of any query form."""
    if negotiate(accept, SOLUTIONS) is None and negotiate(accept, GRAPH) is None:
        raise NotAcceptable(f"none of the media types in Accept '{_clip(accept or '')}' is available for a query "
                            f"result; this endpoint offers {', '.join(CANONICAL[SOLUTIONS])} for SELECT and ASK, "
                            f"and {', '.join(CANONICAL[GRAPH])} for CONSTRUCT and DESCRIBE.",
                            offered=[*CANONICAL[SOLUTIONS], *CANONICAL[GRAPH]])


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"
