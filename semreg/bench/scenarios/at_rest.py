"""The at-rest scenario: whether the data directory's RDF keeps up with registrations at a steady rate.

A fresh server with a data directory (the default configuration: SPARQL served from its replica on disk)
and the synthetic ontology; then `--at-rest-rate` registrations of 3 tags a second for `--at-rest-seconds`,
sent in four batches a second at fixed times (a batch due while the previous one is still being answered
goes as soon as it is answered, and one answered 503 is sent again after its Retry-After, as a client
would: the rate reached is reported beside the one asked, with the batches shed). Meanwhile `/metrics` is
read every `POLL_S`: `semreg_store_rdf_written` counts the registrations whose triples are at rest, and
the writer takes them in the order they were acknowledged, so the k-th acknowledged registration is at rest
once the count reaches k. Its lag is the time from its batch's acknowledgement to the first reading that
says so (`POLL_S` of resolution).

Also: the CPU the server process (the at-rest writer among its threads; the writer's own thread apart
where the server counts it, `semreg_store_rdf_cpu_seconds`, without the threads of its bulk loads) and its
children (the SPARQL template and query processes) spent from the first batch until everything was at
rest, per instance; and, after a clean stop, the data
directory's bytes per instance (the replica on disk is removed at a stop, so this is the records and
their RDF). The load average is read at both ends: the figures of a shared machine are read beside it.

It starts and stops its own server: with --semreg-url it fails with a BenchError.
"""
from __future__ import annotations

import functools
import os
import threading
import time
from typing import Any

import httpx

from semreg.bench.context import BenchContext, expect, patiently
from semreg.bench.dataset import Dataset
from semreg.bench.peers import BenchError, PeerProcess
from semreg.bench.readings import child_pids
from semreg.bench.report import Target
from semreg.bench.scenarios.common import scenario
from semreg.bench.scenarios.storage import POLL_S as START_POLL_S
from semreg.bench.scenarios.storage import SETTLE_S, stop, tree_bytes

TAGS = 3
BATCHES_PER_S = 4
RETRIES = 30  # times a batch answered 503 is sent again
POLL_S = 0.1  # how often the count of registrations at rest is read
WRITTEN = "semreg_store_rdf_written_total"
WRITER_CPU = "semreg_store_rdf_cpu_seconds_total"
LAG_S = 10.0  # the goal: every registration's triples at rest within this of its acknowledgement
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@scenario("at-rest", "--at-rest-rate registrations of 3 tags a second for --at-rest-seconds on a fresh server: "
          "how long after its acknowledgement each one's triples are at rest, the CPU the writer and the "
          "SPARQL template spend an instance, and the data directory's bytes an instance",
          targets=(Target("registrations a second reached", "rate_reached", ">=", 2000.0, "/s"),
                   Target("at rest after acknowledgement, p99", "lag_s.p99", "<=", LAG_S, "s")))
def at_rest(ctx: BenchContext) -> dict:
    if ctx.external:
        raise BenchError("at-rest stops its own server to weigh its data directory; run it without --semreg-url")
    s = ctx.settings
    per_batch = max(1, s.at_rest_rate // BATCHES_PER_S)
    n = per_batch * BATCHES_PER_S * s.at_rest_seconds
    data = Dataset(classes=s.classes, properties=s.properties, instances=n, tags_per_instance=TAGS,
                   answer_size=min(s.answer_size, n), seed=s.seed)
    with ctx.ui.step("starting a fresh semreg"):
        peer = ctx.peers.semreg(poll_s=START_POLL_S)
    try:
        ctx.upload_ontology(peer.url)
        with ctx.client(peer.url, timeout_s=300) as http:
            ctx.wait_settled(http, SETTLE_S)
            with ctx.ui.step(f"preparing {n:,} registrations"):
                batches = list(data.batches(per_batch))
            figures = steady(ctx, peer, http, batches)
    except BaseException:
        peer.stop()
        raise
    with ctx.ui.step("stopping semreg (SIGTERM)"):
        figures["stop_s"] = stop(peer)
    assert peer.data_dir is not None
    size = tree_bytes(peer.data_dir)
    figures["data_dir_mib"] = round(size / 2**20, 1)
    figures["data_dir_bytes_per_instance"] = round(size / n)
    ctx.ui.log(f"  {figures['rate_reached']:,}/s reached of {s.at_rest_rate:,}/s asked; at rest after "
               f"acknowledgement p50 {figures['lag_s']['p50']} s, p99 {figures['lag_s']['p99']} s; "
               f"{figures['data_dir_bytes_per_instance']:,} bytes an instance on disk; load "
               f"{figures['load_average']['before']} → {figures['load_average']['after']}")
    return figures


class AtRestCount:
    """A thread reading the node's count of registrations at rest every `POLL_S`, from `written0`, until `n` are:
    `readings` is (when, registrations at rest since)."""

    def __init__(self, ctx: BenchContext, url: str, n: int, written0: float) -> None:
        self.ctx, self.url, self.n, self.written0 = ctx, url, n, written0
        self.readings: list[tuple[float, float]] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._poll, name="bench-at-rest-poll", daemon=True)

    def _poll(self) -> None:
        with self.ctx.client(self.url) as metrics_http:
            while not self.done.is_set():
                seen = self.ctx.metrics(metrics_http)
                self.readings.append((time.perf_counter(), seen.get(WRITTEN, 0.0) - self.written0))
                if self.readings[-1][1] >= self.n:
                    return
                time.sleep(POLL_S)


class Sending:
    """What sending the batches at their times was answered: (acknowledged at, registrations acknowledged so far)
    a batch, each batch's latency, and how many were answered 503 (the node shedding) and sent again."""

    def __init__(self) -> None:
        self.acks: list[tuple[float, int]] = []
        self.latencies: list[float] = []
        self.shed = 0

    def send(self, ctx: BenchContext, http: httpx.Client, batches: list[list[dict]], started: float) -> None:
        n = sum(len(b) for b in batches)
        with ctx.ui.step(f"registering {n:,} instances × {TAGS} tags at {len(batches[0]) * BATCHES_PER_S:,}/s",
                         total=n) as advance:
            total = 0
            for k, batch in enumerate(batches):
                if (wait := started + k / BATCHES_PER_S - time.perf_counter()) > 0:
                    time.sleep(wait)
                sent = time.perf_counter()
                expect(patiently(functools.partial(self._post, http, batch), RETRIES))
                acked = time.perf_counter()
                self.latencies.append(acked - sent)
                total += len(batch)
                self.acks.append((acked, total))
                advance(len(batch))

    def _post(self, http: httpx.Client, batch: list[dict]) -> httpx.Response:
        response = http.post("/v1/instances/batch", json={"instances": batch})
        self.shed += response.status_code == 503
        return response


def steady(ctx: BenchContext, peer: PeerProcess, http: httpx.Client, batches: list[list[dict]]) -> dict[str, Any]:
    """Send `batches`, `BATCHES_PER_S` a second, while a thread reads the count at rest; the figures once all are at rest."""
    assert peer.proc is not None
    n = sum(len(b) for b in batches)
    base = ctx.metrics(http)
    writer0 = base.get(WRITER_CPU)
    count = AtRestCount(ctx, peer.url, n, base.get(WRITTEN, 0.0))
    load_before = os.getloadavg()[0]
    cpu0 = tree_cpu(peer.proc.pid)
    sending = Sending()
    started = time.perf_counter()
    count.thread.start()
    try:
        sending.send(ctx, http, batches, started)
        sent_s = sending.acks[-1][0] - started + 1 / BATCHES_PER_S  # the last batch's tenth of a second included
        with ctx.ui.step("waiting for every registration's triples at rest"):
            count.thread.join(SETTLE_S)
            if count.thread.is_alive():
                raise BenchError(f"{n - count.readings[-1][1]:,.0f} registrations were not at rest {SETTLE_S:.0f} s "
                                 "after the last was acknowledged")
    finally:
        count.done.set()
    cpu1 = tree_cpu(peer.proc.pid)
    writer1 = ctx.metrics(http).get(WRITER_CPU)
    per_instance = {name: round((cpu1[name] - cpu0.get(name, 0.0)) / n * 1e6) for name in cpu1}
    if writer0 is not None and writer1 is not None:
        per_instance["at_rest_thread"] = round((writer1 - writer0) / n * 1e6)
    return {"instances": n, "tags_per_instance": TAGS, "rate_asked": len(batches[0]) * BATCHES_PER_S,
            "rate_reached": round(n / sent_s), "batch": len(batches[0]), "sent_s": round(sent_s, 2),
            "all_at_rest_s": round(count.readings[-1][0] - started, 2), "lag_s": lags_s(sending.acks, count.readings),
            "batches_shed": sending.shed, "batch_latency_ms": quantiles([x * 1000 for x in sending.latencies], 1),
            "cpu_us_per_instance": per_instance,
            "load_average": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)}}


def lags_s(acks: list[tuple[float, int]], readings: list[tuple[float, float]]) -> dict[str, float]:
    """Each acknowledged batch's lag until the count at rest covered it, weighed by its registrations."""
    lags: list[float] = []
    at = 0
    before = 0
    for acked, total in acks:
        while at < len(readings) and readings[at][1] < total:
            at += 1
        if at == len(readings):
            raise BenchError(f"registrations up to the {total:,}th never showed as at rest")
        lags += [max(0.0, readings[at][0] - acked)] * (total - before)
        before = total
    return quantiles(lags, 2)


def quantiles(values: list[float], digits: int) -> dict[str, float]:
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], digits)

    return {"p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": round(ordered[-1], digits)}


def tree_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user and system) of the server and of the processes below it (the SPARQL template and
    its query processes), as now."""
    out = {"server": process_cpu_s(pid) or 0.0, "children": 0.0}
    below = child_pids(pid)
    while below:
        child = below.pop()
        out["children"] += process_cpu_s(child) or 0.0
        below += child_pids(child)
    return out


def process_cpu_s(pid: int) -> float | None:
    """A process's user and system CPU seconds from /proc/<pid>/stat (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
