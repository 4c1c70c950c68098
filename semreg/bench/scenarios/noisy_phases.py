"""The noisy-neighbour scenarios' run: the liveness load and the probes started on the bench's event loop,
then three phases (reference, adversary in its child process, after), then the figures of what was seen
(`noisy_figures`)."""
from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from semreg.bench.aio import adversary as adv
from semreg.bench.aio.heartbeats import Heartbeater
from semreg.bench.aio.loop import LoopThread
from semreg.bench.aio.metrics import sample_metrics
from semreg.bench.aio.probes import (
    WatchLog,
    WriteLog,
    loop_lag,
    probe_health,
    rearmed_watch,
    sample_cluster,
    write_at_known_times,
)
from semreg.bench.context import BenchContext, expect, patiently
from semreg.bench.readings import process_rss_bytes, tree_cpu_seconds
from semreg.bench.scenarios import noisy_figures as nf
from semreg.bench.scenarios.common import mib, register_batches, wait_for
from semreg.bench.scenarios.noisy_load import BATCH, WATCH_WAIT_S, Member, NoisyLoad, flip, heartbeating, watch_target
from semreg.bench.stats import latency_stats

CRITICAL = 'semreg_instances{status="critical"}'


@dataclass
class Recorders:
    """Every row the probes append, on the bench's event loop."""

    health: list[tuple[float, float, int]]
    lag: list[tuple[float, float]]
    watches: list[WatchLog]
    writes: WriteLog
    metrics: dict[str, list[tuple[float, dict[str, float]]]]
    cluster: list[tuple[float, str, dict[str, str], str]]
    processes: list[tuple[float, str, float]]  # (when, member, RSS bytes), read by the scenario's thread


def run(ctx: BenchContext, load: NoisyLoad, members: list[Member], prepared: dict[str, Any]) -> dict:
    """The load on `members` (the adversary on the first, which `prepared` was made on), phase by phase."""
    first = members[0]
    figures = dict(prepared)
    headers = ctx.auth_headers(first.url)
    rec = Recorders([], [], [WatchLog(w % load.groups) for w in range(load.watches)], WriteLog(),
                    {m.name: [] for m in members}, [], [])
    ids = [item["id"] for item in heartbeating(load.instances, load.ttl_s)]
    beaters = [Heartbeater(m.url, ids[k::len(members)], load.period_s, max(1, load.heartbeat_connections // len(members)),
                           headers, answers=True) for k, m in enumerate(members)]
    woken = list(range(load.groups - load.quiet_groups))
    plan = adv.AdversaryPlan(first.url, figures.pop("ontology_path"), figures.pop("backup_path"), dict(headers),
                             patterns=load.patterns, batch_instances=load.batch_instances,
                             sparql_at_once=load.sparql_at_once)
    with LoopThread("semreg-bench-noisy") as loop:
        with ctx.client(first.url) as http, ctx.ui.step(f"registering {load.instances:,} heartbeating instances"):
            register_batches(ctx, http, heartbeating(load.instances, load.ttl_s), BATCH)
        jobs = [loop.spawn(b.run()) for b in beaters]
        jobs += start_probes(loop, load, members, rec, headers)
        try:
            with ctx.ui.step("warming up: every read armed, every instance beaten once"):
                wait_for(lambda: all(w.armed_at is not None for w in rec.watches), 60.0, 0.1)
                # the writes start once the reads hold an index: a write racing a read's first answer would
                # wake it, or not, by chance
                jobs += start_writers(loop, load, members, rec, headers, woken)
                time.sleep(load.period_s)
            bounds, cpu, (outcomes, unfinished, error) = three_phases(ctx, load, members, rec, plan)
        finally:
            stop_load(beaters, jobs)
        with ctx.client(first.url, timeout_s=300) as http:
            listed = expect(patiently(lambda: http.get("/v1/instances", params={"service": "nn-hb", "tags": "false"}))
                            ).json()
    if error:
        figures["adversary_error"] = error
    phases = nf.Phases((bounds[0], bounds[1], bounds[2], bounds[3]))
    figures.update(summarise(load, members, rec, beaters, phases, cpu, listed, outcomes, unfinished,
                             ctx.settings.adversary_s))
    log_summary(ctx, figures)
    return figures


def three_phases(ctx: BenchContext, load: NoisyLoad, members: list[Member], rec: Recorders, plan: adv.AdversaryPlan
                 ) -> tuple[list[float], list[dict[str, float | None]], tuple[list[adv.Outcome], dict[str, int], str]]:
    """The reference, the adversary's minute in its child process, and the after: the phases' bounds, each
    member's CPU seconds at each bound, and what the adversary saw (outcomes, unfinished, error)."""
    seconds = ctx.settings.adversary_s
    bounds, cpu = [time.perf_counter()], [cpu_of(members)]
    with ctx.ui.step(f"reference: the liveness load alone ({load.reference_s:.0f} s)"):
        sample_for(load.reference_s, members, rec)
    bounds.append(time.perf_counter())
    cpu.append(cpu_of(members))
    neighbour = adv.Adversary(plan)
    neighbour.start()
    try:
        with ctx.ui.step(f"adversary on {members[0].name} ({seconds} s)"):
            sample_for(seconds, members, rec)
    finally:
        bounds.append(time.perf_counter())
        cpu.append(cpu_of(members))
        seen = neighbour.stop()
    with ctx.ui.step(f"after: the adversary stopped ({load.after_s:.0f} s)"):
        sample_for(max(0.0, bounds[-1] + load.after_s - time.perf_counter()), members, rec)
    bounds.append(time.perf_counter())
    cpu.append(cpu_of(members))
    return bounds, cpu, seen


def stop_load(beaters: list[Heartbeater], jobs: list) -> None:
    """The heartbeats stopped (those queued still sent), the probes cancelled: `jobs` starts with the beaters'."""
    for b in beaters:
        b.stop()
    for job in jobs[len(beaters):]:
        job.cancel()
    for job in jobs[:len(beaters)]:
        with contextlib.suppress(Exception):
            job.result(60)


def start_probes(loop: LoopThread, load: NoisyLoad, members: list[Member], rec: Recorders,
                 headers: dict[str, str]) -> list:
    jobs = [loop.spawn(loop_lag(0.01, rec.lag))]
    for m in members:
        jobs.append(loop.spawn(probe_health(m.url, load.healthz_every_s, rec.health, headers)))
        jobs.append(loop.spawn(sample_metrics(m.url, 1.0, rec.metrics[m.name], headers)))
        if len(members) > 1:
            jobs.append(loop.spawn(sample_cluster(m.url, m.name, 0.5, rec.cluster, headers)))
    for w, log in enumerate(rec.watches):
        m = members[w % len(members)]
        jobs.append(loop.spawn(rearmed_watch(m.url, watch_target(log.group), WATCH_WAIT_S, log, headers)))
    return jobs


def start_writers(loop: LoopThread, load: NoisyLoad, members: list[Member], rec: Recorders, headers: dict[str, str],
                  woken: list[int]) -> list:
    """One write every `write_every_s` in all, each member writing for its share of the questions."""
    jobs = []
    for k, m in enumerate(members):
        if mine := [g for g in woken if g % len(members) == k]:
            jobs.append(loop.spawn(write_at_known_times(m.url, mine, load.write_every_s * len(members), flip,
                                                        rec.writes, headers)))
    return jobs


def cpu_of(members: list[Member]) -> dict[str, float | None]:
    return {m.name: tree_cpu_seconds(m.pid) for m in members}


def sample_for(seconds: float, members: list[Member], rec: Recorders) -> None:
    """Wait `seconds`, reading each member's RSS every second meanwhile."""
    end = time.perf_counter() + seconds
    while (now := time.perf_counter()) < end:
        for m in members:
            rss = process_rss_bytes(m.pid)
            if rss is not None:
                rec.processes.append((now, m.name, float(rss)))
        time.sleep(min(1.0, max(0.0, end - time.perf_counter())))


def summarise(load: NoisyLoad, members: list[Member], rec: Recorders, beaters: list[Heartbeater], phases: nf.Phases,
              cpu: list[dict[str, float | None]], listed: list[dict], outcomes: list[adv.Outcome],
              unfinished: dict[str, int], seconds: int) -> dict[str, Any]:
    beats = [row for b in beaters for row in b.stats.beats]
    per_phase = nf.heartbeat_figures(beats, phases)
    health = nf.probe_figures(rec.health, phases)
    lag = phases.split(rec.lag)
    writes = phases.split(rec.writes.latencies_s)
    wakes = nf.wake_figures(rec.watches, rec.writes.writes, phases, phases.bounds[3])
    critical = {m: [(t, m, s.get(CRITICAL, 0.0)) for t, s in rows] for m, rows in rec.metrics.items()}
    critical_max = {m: nf.series_max(rows, phases) for m, rows in critical.items()}
    rss = {m.name: nf.series_max([r for r in rec.processes if r[1] == m.name], phases) for m in members}
    cpu_pct = {m.name: nf.cpu_percent([c[m.name] for c in cpu], phases) for m in members}
    one = len(members) == 1
    for phase in nf.PHASES:
        per_phase[phase].update({
            "seconds": round(phases.seconds(phase), 1), "healthz": health[phase],
            "bench_loop_lag": latency_stats(lag[phase]), "writes": latency_stats(writes[phase]),
            **wakes["per_phase"][phase],
            "critical_max": pick(one, {m: v[phase] for m, v in critical_max.items()}),
            "server_cpu_pct": pick(one, {m: v[phase] for m, v in cpu_pct.items()}),
            "server_rss_max_mib": pick(one, {m: mib(int(top)) if (top := v[phase]) else None for m, v in rss.items()})})
    seen_critical = max((int(v) for m in critical_max.values() for v in m.values() if v is not None), default=0)
    lapsed_beats = sum(b.stats.critical_answers for b in beaters)
    lapsed_instances = sum(len(b.stats.lapsed) for b in beaters)  # each beater's instances are its own
    not_up = Counter(str(view.get("status")) for view in listed if view.get("status") != "up")
    missing = load.instances - len(listed)
    adversary = nf.outcome_figures(outcomes)
    figures: dict[str, Any] = {
        "load": {"instances": load.instances, "ttl_s": load.ttl_s, "heartbeats_per_s": round(load.instances / load.period_s),
                 "watches": load.watches, "questions": load.groups, "quiet_questions": load.quiet_groups,
                 "restore_instances": load.restore_instances, "batch_instances": load.batch_instances,
                 "noisy_instances": load.noisy_instances, "patterns": load.patterns,
                 "sparql_at_once": load.sparql_at_once, "adversary_s": seconds, "members": len(members)},
        **{phase: per_phase[phase] for phase in nf.PHASES},
        "leases_lost": max(seen_critical, lapsed_instances, sum(not_up.values()) + max(0, missing)),
        "critical_max_sampled": seen_critical, "lapses_seen_by_heartbeats": lapsed_beats,
        "instances_lapsed_seen_by_heartbeats": lapsed_instances,
        "not_up_at_end": dict(not_up), "missing_at_end": max(0, missing),
        "wrong_wakes": wakes["wrong"], "watches": {k: v for k, v in wakes.items() if k != "per_phase"},
        "write_errors": dict(rec.writes.errors.most_common(3)),
        "heartbeat_errors": dict(sum((b.stats.errors for b in beaters), Counter()).most_common(3)),
        "adversary_requests": adversary["per_kind"], "adversary_outcomes": adversary["outcomes"],
        "adversary_failures": adversary["failures"], "adversary_unfinished": unfinished,
    }
    if not one:
        figures.update(nf.cluster_figures(rec.cluster, phases))
    return figures


def pick(one: bool, per_member: dict[str, Any]) -> Any:
    """A node's value alone, or every member's."""
    return next(iter(per_member.values())) if one else per_member


def log_summary(ctx: BenchContext, figures: dict[str, Any]) -> None:
    say: Callable[[str], None] = ctx.ui.log
    for phase in nf.PHASES:
        f = figures[phase]
        say(f"  {phase}: heartbeats {f['heartbeats']['answered']:,}/{f['heartbeats']['sent']:,} answered, from due "
            f"p99 {f['heartbeat_from_due'].get('p99_ms')} ms max {f['heartbeat_from_due'].get('max_ms')} ms; /healthz "
            f"max {f['healthz'].get('max_ms')} ms; wakes p99 {f['wakes'].get('p99_ms')} ms")
    say(f"  leases lost {figures['leases_lost']}, wrong wakes {figures['wrong_wakes']}, adversary "
        f"{figures['adversary_outcomes']}")

