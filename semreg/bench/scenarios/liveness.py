"""The liveness scenarios: discovery under wrk on a server also busy learning which instances are
alive, both ways semreg learns it.

    health-checks   1,000 active HTTP checks a second made by the server, against a target the bench runs
    heartbeat-load  5,000 instances heartbeating every 5 s (1,000 a second), sent by the bench

Each measures discovery without the load, then with it, on a server of its own.
"""
from __future__ import annotations

import contextlib
import time
from collections import Counter
from typing import Any
from urllib.parse import urlencode

from semreg.bench.aio.heartbeats import Heartbeater
from semreg.bench.aio.loop import LoopThread
from semreg.bench.aio.metrics import sample_metrics
from semreg.bench.aio.target import HealthTarget
from semreg.bench.context import BenchContext, Load, expect
from semreg.bench.peers import BenchError
from semreg.bench.readings import log_details
from semreg.bench.report import Target
from semreg.bench.scenarios.common import register_batches, remove_instances, scenario
from semreg.bench.stats import latency_stats

CHECK_TAG = {"s": "http://bench.semreg.example/load#Checked"}
HEARTBEAT_TAG = {"s": "http://bench.semreg.example/load#Beating"}
CRITICAL = 'semreg_instances{status="critical"}'


def checked_discovery_url(ctx: BenchContext, http, base_url: str) -> str:
    """The discovery scenario's URL on `base_url`, after checking it answers the data set's known instances."""
    query = ctx.dataset.discovery_query()
    url = base_url + "/v1/discover?" + urlencode(query)
    got = {view.get("id") for view in expect(http.get(url)).json().get("instances", [])}
    want = ctx.dataset.expected_answer_ids()
    if got != want:
        raise BenchError(f"the discovery query {query} answered {len(got)} instances, {len(got & want)} of the "
                         f"{len(want)} expected")
    return url



# -- 6. discovery beside active health checks -----------------------------------------------------------------
@scenario("health-checks", "discovery under wrk without and with 1,000 active HTTP checks a second on the server",
          needs=("wrk",),
          targets=(Target("p99 with / without checks", "p99_ratio", "<=", 2.0),
                   Target("checks/s", "checks_per_s", ">=", 900.0)))
def health_checks(ctx: BenchContext) -> dict:
    s = ctx.settings
    with ctx.own_semreg() as url, ctx.client(url) as http, LoopThread("semreg-bench-target") as loop, \
            HealthTarget(loop) as target:
        figures: dict[str, Any] = ctx.load_dataset(url)
        figures["settle_s"] = ctx.wait_settled(http)
        load_url = checked_discovery_url(ctx, http, url)
        peers = ctx.measure([Load("without-checks", load_url)])
        check = {"http": f"{target.url}/health", "interval": s.check_interval_s, "timeout": 1}
        items: list[dict[str, Any]] = [{"id": f"bench-checked-{n:05d}", "service": "bench-checked", "address": "127.0.0.1",
                  "port": target.port, "ttl": 0, "tags": [CHECK_TAG], "check": check}
                 for n in range(s.checked_instances)]
        # registered over one interval, as instances arriving one after another would be: the checks spread
        slices = 10
        with ctx.ui.step(f"registering {len(items):,} instances with an HTTP check every {s.check_interval_s} s"):
            started = time.perf_counter()
            for k in range(slices):
                register_batches(ctx, http, items[k * len(items) // slices:(k + 1) * len(items) // slices])
                time.sleep(max(0.0, started + (k + 1) * s.check_interval_s / slices - time.perf_counter()))
            time.sleep(s.check_interval_s)  # a round before measuring
            idle_before, idle_t0 = ctx.metrics(http), time.perf_counter()
            time.sleep(2 * s.check_interval_s)  # the checks alone, without wrk
        before, hits_before, t0 = ctx.metrics(http), target.hits, time.perf_counter()
        peers.update(ctx.measure([Load("with-checks", load_url)]))
        after, hits_after, t1 = ctx.metrics(http), target.hits, time.perf_counter()
        remove_instances(ctx, loop, url, [item["id"] for item in items])
        failing = log_details(ctx.semreg_log(url), "check failing")
    elapsed = t1 - t0
    runs = after.get("semreg_checks_total", 0) - before.get("semreg_checks_total", 0)
    idle_runs = before.get("semreg_checks_total", 0) - idle_before.get("semreg_checks_total", 0)
    without, with_checks = peers["without-checks"], peers["with-checks"]
    figures.update({
        "checked_instances": len(items), "check_interval_s": s.check_interval_s,
        "checks_per_s": round(runs / elapsed, 1), "checks_per_s_without_wrk": round(idle_runs / (t0 - idle_t0), 1),
        "target_hits_per_s": round((hits_after - hits_before) / elapsed, 1),
        "check_failures": int(after.get("semreg_check_failures_total", 0)), "critical": int(after.get(CRITICAL, 0)),
        "target_connections": target.connections, "measured_s": round(elapsed, 1), "peers": peers,
        "check_failure_details": failing,
        "p99_ratio": round(with_checks["p99_ms"] / without["p99_ms"], 2) if without.get("p99_ms") else None,
        "requests_per_s_ratio": round(with_checks["requests_per_s"] / without["requests_per_s"], 3),
    })
    ctx.ui.log(f"  {figures['checks_per_s']:,.0f} checks/s; discovery p99 {without['p99_ms']} → "
               f"{with_checks['p99_ms']} ms")
    return figures


# -- 7. discovery beside 1,000 heartbeats a second ------------------------------------------------------------
@scenario("heartbeat-load", "5,000 instances heartbeating every 5 s (1,000 a second) while wrk runs discovery on "
          "the same server",
          needs=("wrk",),
          targets=(Target("heartbeats/s", "heartbeats_per_s", ">=", 950.0),
                   Target("instances gone critical", "critical_max", "<=", 0)))
def heartbeat_load(ctx: BenchContext) -> dict:
    s = ctx.settings
    with ctx.own_semreg() as url, ctx.client(url) as http, LoopThread("semreg-bench-heartbeats") as loop:
        figures: dict[str, Any] = ctx.load_dataset(url)
        figures["settle_s"] = ctx.wait_settled(http)
        load_url = checked_discovery_url(ctx, http, url)
        peers = ctx.measure([Load("without-heartbeats", load_url)])
        ids = [f"bench-hb-{n:05d}" for n in range(s.heartbeat_instances)]
        items = [{"id": i, "service": "bench-hb", "address": "127.0.0.1", "port": 7000 + n % 1000,
                  "ttl": s.heartbeat_ttl_s, "tags": [HEARTBEAT_TAG]} for n, i in enumerate(ids)]
        with ctx.ui.step(f"registering {len(ids):,} instances with a {s.heartbeat_ttl_s} s ttl"):
            register_batches(ctx, http, items)
        beater = Heartbeater(url, ids, s.heartbeat_period_s, s.heartbeat_connections, ctx.auth_headers(url))
        samples: list[tuple[float, dict[str, float]]] = []
        beating = loop.spawn(beater.run())
        sampling = loop.spawn(sample_metrics(url, 1.0, samples, ctx.auth_headers(url)))
        try:
            with ctx.ui.step(f"heartbeats at {len(ids) / s.heartbeat_period_s:,.0f}/s, warming up"):
                time.sleep(2.0)
            ok0, failed0, t0 = beater.stats.ok, beater.stats.failed, time.perf_counter()
            late0 = len(beater.stats.lateness_s)
            peers.update(ctx.measure([Load("with-heartbeats", load_url)]))
            ok1, failed1, t1 = beater.stats.ok, beater.stats.failed, time.perf_counter()
            late1 = len(beater.stats.lateness_s)
            final = ctx.metrics(http)
            listed = expect(http.get("/v1/instances", params={"service": "bench-hb"})).json()
        finally:
            beater.stop()
            sampling.cancel()
            with contextlib.suppress(Exception):
                beating.result(60)
        remove_instances(ctx, loop, url, ids)
    stats = beater.stats
    not_up = Counter(view.get("status") for view in listed if view.get("status") != "up")
    critical_seen = [int(series.get(CRITICAL, 0)) for _at, series in samples] + [int(final.get(CRITICAL, 0))]
    without, with_beats = peers["without-heartbeats"], peers["with-heartbeats"]
    figures.update({
        "heartbeat_instances": len(ids), "period_s": s.heartbeat_period_s, "ttl_s": s.heartbeat_ttl_s,
        "scheduled_per_s": round(len(ids) / s.heartbeat_period_s, 1),
        "heartbeats_per_s": round((ok1 - ok0) / (t1 - t0), 1), "measured_s": round(t1 - t0, 1),
        "heartbeats_ok": stats.ok, "heartbeats_failed": stats.failed, "failed_while_measured": failed1 - failed0,
        "heartbeat_statuses": dict(stats.statuses), "lateness": latency_stats(stats.lateness_s[late0:late1]),
        "critical_max": max(critical_seen), "critical_samples": len(samples),
        "listed": len(listed), "listed_not_up": dict(not_up), "peers": peers,
        "p99_ratio": round(with_beats["p99_ms"] / without["p99_ms"], 2) if without.get("p99_ms") else None,
        "requests_per_s_ratio": round(with_beats["requests_per_s"] / without["requests_per_s"], 3),
    })
    if stats.errors:
        figures["heartbeat_errors"] = dict(stats.errors.most_common(5))
    ctx.ui.log(f"  {figures['heartbeats_per_s']:,.0f} heartbeats/s ({stats.failed} failed, at most "
               f"{figures['critical_max']} critical); discovery {without['requests_per_s']:,.0f} → "
               f"{with_beats['requests_per_s']:,.0f} req/s")
    return figures

