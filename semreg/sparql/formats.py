"""The representations `/sparql` offers, chosen by `Accept` (`semreg.rdf.negotiation`).

Each result kind has an ordered table of offers `(media type, pyoxigraph format)`; the first is the
default for a missing Accept or `*/*`. An alias (`application/json`, `application/xml`) is answered
under the name the client asked for, in the format it stands for.
"""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from pyoxigraph import QueryResultsFormat, RdfFormat

from semreg.errors import NotAcceptable
from semreg.rdf import negotiation


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


# Per kind: the offered media types in order (what negotiation chooses among), and each one's offer.
_MEDIA_TYPES = {kind: tuple(offer.media_type for offer in offers) for kind, offers in OFFERS.items()}
_BY_MEDIA_TYPE = {kind: {offer.media_type: offer for offer in offers} for kind, offers in OFFERS.items()}


@lru_cache(maxsize=256)  # clients send the same few Accept headers, twice a query
def negotiate(accept: str | None, kind: str) -> Offer | None:
    """The offer of `kind` the client prefers, or None when it accepts none of them."""
    chosen = negotiation.negotiate(accept, _MEDIA_TYPES[kind])
    return None if chosen is None else _BY_MEDIA_TYPE[kind][chosen]


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
