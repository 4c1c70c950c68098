"""What one queried term expands to: the terms that match it, each with its degree and distance.

The one derivation of a component's expansion, used by discovery (restricted to the terms some tag
registers, `semreg.registry.catalogue`) and shown whole by `GET /v1/expand`. Per queried term `q`:
- exact: `q` and its equivalents (distance 0);
- narrower: every term below `q` (when the degrees asked for need it), at its distance;
- broader: every term above `q`, and the wildcard `sr:Any` (distance 0).
A wildcard query component matches every term; `candidates` returns None for it.
"""
from __future__ import annotations

from collections.abc import Collection

from semreg.rdf.terms import ANY
from semreg.reasoning.matching import BROADER, EXACT, NARROWER
from semreg.reasoning.reasoner import Hierarchy

Candidates = dict[str, tuple[str, int]]  # term → (degree, distance)


def candidates(h: Hierarchy, q: str, want_narrower: bool, want_broader: bool,
               within: Collection[str] | None = None) -> Candidates | None:
    """The terms `q` expands to in the directions asked (`matching.needs_directions`; None for the
    wildcard); with `within`, only those terms (walking whichever of the two sets is smaller)."""
    if q == ANY:
        return None
    out: Candidates = {}
    for term in h.equivalents(q) | {q}:
        if within is None or term in within:
            out[term] = (EXACT, 0)
    if want_narrower:
        _take(out, h.narrower_distances(q), within, NARROWER)
    if want_broader:
        _take(out, h.broader_distances(q), within, BROADER)
        if within is None or ANY in within:
            out[ANY] = (BROADER, 0)
    return out


def _take(out: Candidates, distances: dict[str, int], within: Collection[str] | None, degree: str) -> None:
    if within is None or len(distances) <= len(within):
        for term, d in distances.items():
            if (within is None or term in within) and term not in out:
                out[term] = (degree, d)
    else:
        for term in within:
            found = distances.get(term)
            if found is not None and term not in out:
                out[term] = (degree, found)
