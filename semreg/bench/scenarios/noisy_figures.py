"""The noisy-neighbour scenarios' figures, from the rows their probes and the adversary recorded (pure).

A run has three phases, one after another: `reference` (the liveness load alone), `adversary` (the same
with the noisy neighbour) and `after` (the neighbour stopped, the node catching up). A heartbeat belongs to
the phase it was due in, a probe to the one it was sent in, a wake's latency to the one its write was
acknowledged in. Latencies are nearest-rank percentiles (`semreg.bench.stats`).
"""
from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from semreg.bench.aio.adversary import OUTCOMES, Outcome
from semreg.bench.aio.probes import WatchLog
from semreg.bench.stats import latency_stats

PHASES = ("reference", "adversary", "after")
MISSED_GRACE_S = 5.0  # a write acknowledged this long before the end that woke no read of its group was missed
LAPSED = ("faulty", "left")  # a member shown so by another lost its lease (or was said to leave)


@dataclass(frozen=True)
class Phases:
    """The phases' bounds, perf_counter seconds: reference [b0, b1), adversary [b1, b2), after [b2, b3)."""

    bounds: tuple[float, float, float, float]

    def of(self, t: float) -> str | None:
        n = bisect.bisect_right(self.bounds, t) - 1
        return PHASES[n] if 0 <= n < len(PHASES) else None

    def seconds(self, phase: str) -> float:
        n = PHASES.index(phase)
        return self.bounds[n + 1] - self.bounds[n]

    def split(self, rows: Iterable[tuple[float, Any]]) -> dict[str, list[Any]]:
        """(time, value) rows → the values of each phase."""
        out: dict[str, list[Any]] = {phase: [] for phase in PHASES}
        for t, value in rows:
            if (phase := self.of(t)) is not None:
                out[phase].append(value)
        return out


def heartbeat_figures(beats: Sequence[tuple[float, float, float, int]], phases: Phases) -> dict[str, dict]:
    """Per phase, from (due, sent, answered, status) rows: how many were sent and answered 200, the latency
    from when each was due and from when it was sent (answered ones), and how late the bench sent them."""
    by_phase = phases.split((row[0], row) for row in beats)
    out = {}
    for phase, rows in by_phase.items():
        ok = [r for r in rows if r[3] == 200]
        seconds = phases.seconds(phase)
        out[phase] = {
            "heartbeats": {"sent": len(rows), "answered": len(ok), "failed": len(rows) - len(ok),
                           "answered_per_s": round(len(ok) / seconds, 1) if seconds > 0 else None},
            "heartbeat_from_due": latency_stats([r[2] - r[0] for r in ok]),
            "heartbeat_from_sent": latency_stats([r[2] - r[1] for r in ok]),
            "heartbeat_lateness_at_sender": latency_stats([max(0.0, r[1] - r[0]) for r in rows]),
        }
    return out


def probe_figures(rows: Sequence[tuple[float, float, int]], phases: Phases) -> dict[str, dict]:
    """Per phase, from (sent, answered, status) rows: the latency of those answered 200, and how many were not."""
    out = {}
    for phase, values in phases.split((row[0], row) for row in rows).items():
        ok = [answered - sent for sent, answered, status in values if status == 200]
        out[phase] = {**latency_stats(ok), "failed": len(values) - len(ok)}
    return out


def match_wakes(writes: Sequence[tuple[float, float, bool]], wakes: Sequence[float], armed_at: float | None,
                end: float, grace_s: float = MISSED_GRACE_S) -> tuple[list[tuple[float, float, float]], list[float], int, int]:
    """One blocking read's wakes against the (sent, answered, acknowledged) writes to its group, both in time
    order.

    A wake answers every write sent before it that an earlier wake did not. When one of them was
    acknowledged, the wake's latency is from the first such one's acknowledgement (negative when the wake came
    first) and from its sending; when all were refused, the wake is counted apart (a refused write may have
    changed the answer). A wake with no such write is wrong. An acknowledged write the read was waiting for
    (sent after it was armed) that no wake answered, acknowledged `grace_s` before the end, is missed. Returns
    ((acknowledged, from the acknowledgement, from the sending) per rightful wake, the times of the wrong
    wakes, missed, wakes by refused writes)."""
    if armed_at is None:
        return [], list(wakes), 0, 0
    pending = [w for w in writes if w[0] >= armed_at]
    samples: list[tuple[float, float, float]] = []
    wrong: list[float] = []
    p = refused = 0
    for t in wakes:
        q = p
        while q < len(pending) and pending[q][0] < t:
            q += 1
        answered = [w for w in pending[p:q] if w[2]]
        p, was = q, p
        if q == was:
            wrong.append(t)
        elif not answered:
            refused += 1
        else:
            sent, acked, _ok = answered[0]
            samples.append((acked, t - acked, t - sent))
    missed = sum(1 for _sent, acked, ok in pending[p:] if ok and acked < end - grace_s)
    return samples, wrong, missed, refused


def wake_figures(logs: Sequence[WatchLog], writes: Mapping[int, Sequence[tuple[float, float, bool]]], phases: Phases,
                 end: float) -> dict[str, Any]:
    """Every read's wakes matched to its group's writes (`match_wakes`; a group never written to expects
    none): per phase the latency of the rightful wakes and the wrong ones, and overall what was expected,
    missed, which questions woke wrongly, and how many reads never armed. `waited_for` counts the
    (acknowledged write, read) pairs: a wake that answers several writes at once is one wake."""
    samples: list[tuple[float, float, float]] = []
    wrong: list[float] = []
    wrong_groups: Counter[int] = Counter()
    missed = waited_for = by_refused = 0
    for log in logs:
        mine = writes.get(log.group, [])
        got, bad, lost, refused = match_wakes(mine, log.wakes, log.armed_at, end)
        samples += got
        wrong += bad
        wrong_groups[log.group] += len(bad)
        missed += lost
        by_refused += refused
        if log.armed_at is not None:
            waited_for += sum(1 for sent, _acked, ok in mine if ok and sent >= log.armed_at)
    latency = phases.split((acked, (from_ack, from_sent)) for acked, from_ack, from_sent in samples)
    wrongly = phases.split((t, t) for t in wrong)
    per_phase = {phase: {"wakes": latency_stats([max(0.0, a) for a, _s in latency[phase]]),
                         "wakes_before_ack": sum(1 for a, _s in latency[phase] if a < 0),
                         "wakes_from_write": latency_stats([s for _a, s in latency[phase]]),
                         "wrong_wakes": len(wrongly[phase])} for phase in PHASES}
    return {"per_phase": per_phase, "waited_for": waited_for, "woken": len(samples), "missed": missed,
            "woken_by_refused_writes": by_refused, "wrong": len(wrong),
            "wrong_by_question": {f"{g:03d}": n for g, n in sorted(wrong_groups.items()) if n},
            "unarmed": sum(1 for log in logs if log.armed_at is None),
            "errors": dict(sum((log.errors for log in logs), Counter()).most_common(5))}


def outcome_figures(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """Per kind of adversary request: how many, each outcome's count, latency, and the commonest answers
    that were not 2xx; and the outcomes over all kinds."""
    kinds: dict[str, list[Outcome]] = {}
    for o in outcomes:
        kinds.setdefault(o.kind, []).append(o)
    per_kind = {}
    for kind, mine in kinds.items():
        counts = Counter(o.outcome for o in mine)
        details = Counter(o.detail for o in mine if o.detail)
        per_kind[kind] = {"n": len(mine), **{name: counts[name] for name in OUTCOMES if counts[name]},
                          "latency": latency_stats([o.seconds for o in mine]),
                          **({"answers": dict(details.most_common(3))} if details else {})}
    totals = Counter(o.outcome for o in outcomes)
    return {"per_kind": per_kind, "outcomes": {name: totals[name] for name in OUTCOMES if totals[name]},
            "failures": totals["other-5xx"]}


def series_max(samples: Sequence[tuple[float, str, float]], phases: Phases) -> dict[str, float | None]:
    """Per phase, the largest value sampled (None when none was)."""
    return {phase: (max(values) if values else None)
            for phase, values in phases.split((t, v) for t, _who, v in samples).items()}


def cluster_figures(rows: Sequence[tuple[float, str, Mapping[str, str], str]], phases: Phases) -> dict[str, Any]:
    """From (when, observer, {member: status}, checksum) rows: the members some observer showed lapsed (faulty
    or left) or suspect, and how many times each observer's ring checksum changed, per phase."""
    lapsed: set[tuple[str, str]] = set()
    suspect: set[tuple[str, str]] = set()
    changes: Counter[str] = Counter()
    last: dict[str, str] = {}
    first_lapse: dict[str, float] = {}
    for t, observer, statuses, checksum in rows:
        for member, status in statuses.items():
            if status in LAPSED:
                lapsed.add((observer, member))
                first_lapse.setdefault(member, t)
            elif status == "suspect":
                suspect.add((observer, member))
        if observer in last and last[observer] != checksum:
            changes[phases.of(t) or "outside"] += 1
        last[observer] = checksum
    return {"members_lapsed": len({member for _o, member in lapsed}),
            "lapsed_seen": sorted(f"{o} saw {m}" for o, m in lapsed),
            "first_lapse_phase": {m: phases.of(t) for m, t in sorted(first_lapse.items())},
            "suspect_seen": len(suspect), "ring_changes": sum(changes.values()),
            "ring_changes_per_phase": {phase: changes[phase] for phase in PHASES}}


def cpu_percent(cpu_s: Sequence[float | None], phases: Phases) -> dict[str, float | None]:
    """Per phase, the CPU a process tree used as a percentage of one core, from its CPU seconds at each bound."""
    out: dict[str, float | None] = {}
    for n, phase in enumerate(PHASES):
        a, b = cpu_s[n], cpu_s[n + 1]
        seconds = phases.seconds(phase)
        out[phase] = round(100 * (b - a) / seconds, 1) if a is not None and b is not None and seconds > 0 else None
    return out


ROWS = (  # (label, path in a phase's figures, target on the adversary phase)
    ("heartbeats sent", "heartbeats.sent", ""), ("heartbeats answered", "heartbeats.answered", ""),
    ("heartbeats answered/s", "heartbeats.answered_per_s", ""),
    ("heartbeat from due p50 ms", "heartbeat_from_due.p50_ms", ""),
    ("heartbeat from due p99 ms", "heartbeat_from_due.p99_ms", "<= 20"),
    ("heartbeat from due max ms", "heartbeat_from_due.max_ms", "<= 200"),
    ("heartbeat from sent p99 ms", "heartbeat_from_sent.p99_ms", ""),
    ("heartbeat from sent max ms", "heartbeat_from_sent.max_ms", ""),
    ("bench: heartbeat lateness p99 ms", "heartbeat_lateness_at_sender.p99_ms", ""),
    ("bench: loop lag max ms", "bench_loop_lag.max_ms", ""),
    ("/healthz p99 ms", "healthz.p99_ms", ""), ("/healthz max ms", "healthz.max_ms", "<= 200"),
    ("expected wakes", "wakes.n", ""), ("wake p50 ms", "wakes.p50_ms", ""),
    ("wake p99 ms", "wakes.p99_ms", "<= 100"), ("wake max ms", "wakes.max_ms", ""),
    ("wake from the write's sending p99 ms", "wakes_from_write.p99_ms", ""),
    ("wrong wakes", "wrong_wakes", "0"), ("writes p99 ms", "writes.p99_ms", ""),
    ("instances critical (max sampled)", "critical_max", "0"),
    ("server CPU % of a core", "server_cpu_pct", ""), ("server RSS max MiB", "server_rss_max_mib", ""),
)


def _at(figures: Mapping[str, Any], path: str) -> Any:
    value: Any = figures
    for key in path.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, Mapping):  # per member
        return " ".join(f"{k} {_cell(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:,.1f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def render(figures: Mapping[str, Any]) -> list[list[str]]:
    """The phases side by side: one row a figure, the issue's goal beside the adversary's column."""
    header = ["figure", "reference", "adversary", "after", "goal (adversary)"]
    return [header, *([label, *(_cell(_at(figures.get(phase) or {}, path)) for phase in PHASES), goal]
                      for label, path, goal in ROWS)]
