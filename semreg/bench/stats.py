"""Summaries of measured durations: nearest-rank percentiles, in milliseconds.

`ms_summary` (median, p90, min, max) is what the timed one-at-a-time requests of the scenarios report;
`latency_stats` (p50, p99, min, max) is what the load the bench makes itself reports (wakes, lateness).
"""
from __future__ import annotations

import statistics
from collections.abc import Sequence


def ms_summary(samples_s: list[float]) -> dict:
    """Median, p90, min and max of durations in seconds, as milliseconds."""
    ms = sorted(s * 1000.0 for s in samples_s)
    p90 = ms[max(0, -(-len(ms) * 9 // 10) - 1)]  # nearest rank
    return {"median_ms": round(statistics.median(ms), 2), "p90_ms": round(p90, 2), "min_ms": round(ms[0], 2),
            "max_ms": round(ms[-1], 2), "n": len(ms)}


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ascending sequence (q in 0..100)."""
    if not ordered:
        raise ValueError("no samples")
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n·q/100), at least 1
    return ordered[min(len(ordered), int(rank)) - 1]


def latency_stats(samples_s: Sequence[float]) -> dict:
    """n, p50, p99, min and max of durations in seconds, as milliseconds; only n when there are none."""
    if not samples_s:
        return {"n": 0}
    ms = sorted(s * 1000.0 for s in samples_s)
    return {"n": len(ms), "p50_ms": round(percentile(ms, 50), 2), "p99_ms": round(percentile(ms, 99), 2),
            "min_ms": round(ms[0], 2), "max_ms": round(ms[-1], 2)}
