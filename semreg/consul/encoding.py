"""Compressed answers, as Consul gives them: its agent wraps every HTTP handler in a gzip handler with no minimum
size, and its clients ask for it (Go's HTTP transport sends `Accept-Encoding: gzip` and unpacks the answer
itself, so Prometheus, consul-template and the Go API client all read gzip). A read that asks for gzip gets the
same answer compressed, built once while the answer stands (`WatchHub.shaped`), with `Vary: Accept-Encoding`.

Free of HTTP frameworks: it reads the header's text and compresses bytes.
"""
from __future__ import annotations

import gzip

GZIP = "gzip"
LEVEL = 5  # the answers are JSON that repeats itself: level 5 keeps nearly all of 9's gain at a third of its time
MIN_BYTES = 256  # shorter answers are sent as they are: gzip's 18 bytes of framing would be most of the gain


def accepts_gzip(accept_encoding: str | None) -> bool:
    """Whether an `Accept-Encoding` header admits gzip (RFC 9110 §12.5.3): `gzip` or `x-gzip`, else `*`, with a
    weight above 0; an explicit `gzip;q=0` refuses it whatever `*` says."""
    if not accept_encoding:
        return False
    wildcard = named = None
    for item in accept_encoding.split(","):
        coding, _, params = item.partition(";")
        coding = coding.strip().lower()
        if coding not in (GZIP, "x-gzip", "*"):
            continue
        weight = 1.0
        for param in params.split(";"):
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    weight = float(value.strip())
                except ValueError:
                    weight = 0.0  # a weight that does not parse admits nothing
        if coding == "*":
            wildcard = weight if wildcard is None else max(wildcard, weight)
        else:
            named = weight if named is None else max(named, weight)
    chosen = named if named is not None else wildcard
    return chosen is not None and chosen > 0


def compressed(body: bytes) -> bytes:
    """`body` as a gzip member, the same bytes for the same body (no time in its header)."""
    return gzip.compress(body, compresslevel=LEVEL, mtime=0)
