"""`Accept` negotiation (RFC 9110, section 12.5.1): which of a route's offered media types a client prefers.

An offer's quality is that of the most specific media range matching it, so `text/csv;q=0` refuses
CSV even beside `text/*`, and `*/*;q=0.1, text/turtle` ranks Turtle above everything else. The
highest quality wins, then the more specific match (`application/json` over `*/*`), then the order
of the offers. A missing or blank `Accept` takes the first offer. Malformed ranges and q-values are
skipped, not fatal; media type parameters other than `q` are ignored (no offer has any).
"""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

MAX_CACHED_HEADER = 512  # longer headers are negotiated afresh each time, bounding the cache's memory


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
    """The media ranges of an Accept header, lower-cased; malformed ranges and q-values are skipped."""
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


def negotiate(accept: str | None, offers: tuple[str, ...]) -> str | None:
    """The offer (a lower-case `type/subtype`) the client prefers, or None when it accepts none of them."""
    # Clients repeat a handful of Accept headers: short ones are answered from a cache.
    return _negotiate_cached(accept, offers) if accept is None or len(accept) <= MAX_CACHED_HEADER \
        else _negotiate(accept, offers)


@lru_cache(maxsize=256)
def _negotiate_cached(accept: str | None, offers: tuple[str, ...]) -> str | None:
    return _negotiate(accept, offers)


def _negotiate(accept: str | None, offers: tuple[str, ...]) -> str | None:
    if accept is None or not accept.strip():
        return offers[0] if offers else None
    ranges = parse_accept(accept)
    best: tuple[float, int, int] | None = None
    chosen = None
    for rank, offer in enumerate(offers):
        matching = [r for r in ranges if r.matches(offer)]
        if not matching:
            continue
        most_specific = max(matching, key=lambda r: (r.specificity, r.q))
        if most_specific.q <= 0.0:
            continue
        key = (most_specific.q, most_specific.specificity, -rank)
        if best is None or key > best:
            best, chosen = key, offer
    return chosen
