"""Retrieval measures of a ranked answer against relevance judgments, as the OWLS-TC literature reports them.

Binary: precision and recall of the retrieved set, and average precision (AP) of the ranking: the mean,
over every relevant item, of the precision at its rank (0 for a relevant item never retrieved).
Graded (grades 0-3): precision is the retrieved grades' sum over the most they could be (3 each), recall
the retrieved grades' sum over every judged grade's sum, and AP is Kishida's generalised average
precision: Σ over retrieved relevant ranks i of (Σ_{k≤i} g_k) / i, divided by the same sum over the
ideal ranking (every judged item, best grades first).
nDCG (graded): the discounted cumulated gain Σ (2^g_i − 1) / log2(i + 1) of the ranking over that of the ideal
ranking, both over every rank (Järvelin and Kekäläinen, with the exponential gain that rewards the top grades).
Macro averages are means over the requests.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import fmean

TOP_GRADE = 3


def binary(ranked: Sequence[str], relevant: frozenset[str] | set[str]) -> dict[str, float]:
    """P, R and AP of `ranked` (each item once) against the relevant set."""
    hits = 0
    precisions = 0.0
    for rank, item in enumerate(ranked, 1):
        if item in relevant:
            hits += 1
            precisions += hits / rank
    return {"P": hits / len(ranked) if ranked else 0.0, "R": hits / len(relevant) if relevant else 0.0,
            "AP": precisions / len(relevant) if relevant else 0.0}


def graded(ranked: Sequence[str], grades: Mapping[str, int]) -> dict[str, float]:
    """Graded P, R, generalised AP and nDCG of `ranked` against grades 0-`TOP_GRADE` (an unjudged item is 0)."""
    gains = [grades.get(item, 0) for item in ranked]
    total = sum(grades.values())
    return {"P": sum(gains) / (TOP_GRADE * len(ranked)) if ranked else 0.0,
            "R": sum(gains) / total if total else 0.0,
            "AP": _cumulated(gains) / _cumulated(sorted(grades.values(), reverse=True)) if total else 0.0,
            "nDCG": _dcg(gains) / _dcg(sorted(grades.values(), reverse=True)) if total else 0.0}


def _dcg(gains: Sequence[int]) -> float:
    return sum((2**gain - 1) / math.log2(rank + 1) for rank, gain in enumerate(gains, 1))


def _cumulated(gains: Sequence[int]) -> float:
    running = 0
    out = 0.0
    for rank, gain in enumerate(gains, 1):
        running += gain
        if gain:
            out += running / rank
    return out


def macro(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The mean of each measure over the requests, rounded to three places."""
    return {key: round(fmean(row[key] for row in rows), 3) for key in rows[0]} if rows else {}
