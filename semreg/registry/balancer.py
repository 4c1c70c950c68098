"""Choosing an instance for a route: least-load, spillover, round-robin, with an optional capacity
limit. Pure functions over candidates; the caller records the route it hands out.

- least-load: effective load = last reported load + routes handed out since that report; the
  smallest `(effective load + 1) / weight` wins; ties go to the heavier weight, then the id.
  Weights 40, 20, 20, 20 and ten routes with no reports give 4, 2, 2, 2.
- spillover: ascending `meta.priority` (missing = last), the first whose effective load is below its
  capacity; when every one is full, the one with the most room left relative to its capacity.
- round-robin: candidates in id order, a counter per query.
With the limit on, an instance whose effective load has reached its capacity is not eligible.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from semreg.errors import BadRequest

LEAST_LOAD, SPILLOVER, ROUND_ROBIN, LIMIT = "least-load", "spillover", "round-robin", "limit"
POLICIES = (LEAST_LOAD, SPILLOVER, ROUND_ROBIN, LIMIT)


@dataclass(frozen=True)
class Candidate:
    id: str
    weight: int
    load: float
    routes_since_report: int
    capacity: int | None = None
    priority: float = math.inf

    @property
    def effective_load(self) -> float:
        return self.load + self.routes_since_report

    @property
    def full(self) -> bool:
        return self.capacity is not None and self.effective_load >= self.capacity


def parse_policy(value: str | None) -> tuple[str, bool]:
    """`policy=` → (policy, limit). `limit` is least-load with the capacity limit on."""
    if value is None or value == "":
        return LEAST_LOAD, False
    if value not in POLICIES:
        raise BadRequest(f"policy takes {', '.join(POLICIES)}, not '{value[:40]}'.", field="policy")
    return (LEAST_LOAD, True) if value == LIMIT else (value, False)


def priority_of(meta: dict[str, str]) -> float:
    try:
        return float(meta.get("priority", "inf"))
    except ValueError:
        return math.inf


def eligible(candidates: Sequence[Candidate], limit: bool) -> list[Candidate]:
    return [c for c in candidates if not (limit and c.full)]


def least_load(candidates: Sequence[Candidate]) -> Candidate | None:
    return min(candidates, key=lambda c: ((c.effective_load + 1) / c.weight, -c.weight, c.id), default=None)


def spillover(candidates: Sequence[Candidate]) -> Candidate | None:
    ordered = sorted(candidates, key=lambda c: (c.priority, c.id))
    for c in ordered:
        if not c.full:
            return c
    return min(ordered, key=lambda c: ((c.effective_load + 1) / (c.capacity or 1), c.priority, c.id), default=None)


def round_robin(candidates: Sequence[Candidate], counter: int) -> Candidate | None:
    ordered = sorted(candidates, key=lambda c: c.id)
    return ordered[counter % len(ordered)] if ordered else None


def choose(policy: str, candidates: Sequence[Candidate], *, limit: bool, counter: int = 0) -> Candidate | None:
    pool = eligible(candidates, limit)
    if policy == SPILLOVER:
        return spillover(pool)
    if policy == ROUND_ROBIN:
        return round_robin(pool, counter)
    return least_load(pool)
