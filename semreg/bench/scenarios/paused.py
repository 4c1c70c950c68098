"""The paused-owner scenario: registrations through a healthy node while another owner of every record is
stopped (SIGSTOP), against the same registrations with every node running.

A ring of three nodes holding every record on all three (k=3), so the paused node owns every instance
registered and a write needs two of the three. A stopped process still accepts connections (the kernel
queues them), so a request to it hangs until its timeout rather than failing at once: what a write waits
for then is the question. Each round stops the third node, registers one instance at a time through the
first, keeps the node stopped past the peers' write timeout (10 s), continues it, and waits until it holds
every instance registered (brought to it by the healthy nodes) and the first node reaches it again.
`caught_up_s` is how long it took to hold them all; `hints` counts the writes the first node saw it miss
and the records it took from them (fewer when it had applied its queued requests first).
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

import httpx

from semreg.bench.context import BenchContext, expect
from semreg.bench.dataset import class_iri, property_iri
from semreg.bench.peers import BenchError
from semreg.bench.report import Target
from semreg.bench.scenarios.common import scenario, wait_for
from semreg.bench.stats import latency_stats

if TYPE_CHECKING:
    from semreg.bench.localcluster import ClusterNode

NODES = 3
REPLICAS = 3
ROUNDS = 3
HOLD_S = 12.0  # how long each round keeps the owner stopped: past the peers' write timeout (10 s)
LEASE_S = 30  # members' lease: longer than a round's pause, so the stopped node stays on the ring
CATCH_UP_S = 45.0  # the longest a round waits for the resumed node: past one anti-entropy interval (30 s)
UP = 'semreg_instances{status="up"}'
HINTS = "semreg_cluster_hints"  # on the node registered through: writes the stopped node missed, records it took


@scenario("paused-owner", "registrations of one instance through a healthy node of three (k=3) while another "
          "owner is stopped (SIGSTOP), one at a time, against the same with every node running; how long the "
          "stopped node takes to hold them once continued",
          needs=("etcd",),
          targets=(Target("one owner stopped: registration p99", "paused.p99_ms", "<=", 100.0, "ms"),))
def paused_owner(ctx: BenchContext) -> dict:
    from semreg.bench.localcluster import LocalCluster

    per_round = 2 * ctx.settings.register_repeats
    rounds = 1 if ctx.settings.quick else ROUNDS
    cluster = LocalCluster(ctx.peers.workdir / "paused-owner", replicas=REPLICAS, lease_s=LEASE_S, name="paused")
    try:
        with ctx.ui.step(f"starting etcd and {NODES} semreg nodes (k={REPLICAS})"):
            healthy, _, stopped = cluster.start(NODES)
        with ctx.client(healthy.url) as http, ctx.client(stopped.url, timeout_s=5.0) as other:
            expect(http.get("/readyz"))
            steady = register(ctx, http, "steady", rounds * per_round, "with every node running")
            held = len(steady)
            paused: list[float] = []
            first: list[float] = []
            caught_up: list[float] = []
            for n in range(rounds):
                times, took = pause_round(ctx, http, other, stopped, f"paused{n}", per_round, held,
                                          f"round {n + 1} of {rounds}")
                paused += times
                held += len(times)
                first.append(round(times[0] * 1000, 2))
                caught_up.append(took)
            seen = ctx.metrics(http)
            hints = {"kept": int(seen.get(HINTS + "_kept_total", 0)), "delivered": int(seen.get(HINTS + "_delivered_total", 0))}
    finally:
        with ctx.ui.step("stopping the ring"):
            cluster.close()
    return {"steady": latency_stats(steady), "paused": latency_stats(paused), "paused_first_ms": first,
            "caught_up_s": caught_up, "hints": hints, "nodes": NODES, "replicas": REPLICAS, "held_s": HOLD_S}


def pause_round(ctx: BenchContext, http: httpx.Client, other: httpx.Client, stopped: ClusterNode, prefix: str,
                n: int, held: int, what: str) -> tuple[list[float], float]:
    """Stop `stopped`, register `n` instances through `http`, keep it stopped `HOLD_S` in all, continue it,
    and wait until it holds every instance and `http`'s node reaches it again: the registrations' seconds,
    and the seconds it took to hold them."""
    stopped.pause()
    began = time.perf_counter()
    try:
        times = register(ctx, http, prefix, n, f"{what}: {stopped.name} stopped")
        with ctx.ui.step(f"keeping {stopped.name} stopped {HOLD_S:g} s in all"):
            time.sleep(max(0.0, HOLD_S - (time.perf_counter() - began)))
    finally:
        stopped.resume()
    resumed = time.perf_counter()
    held += n
    with ctx.ui.step(f"waiting until {stopped.name} holds the {held} instances and is reached again"):
        if not wait_for(lambda: count(ctx, other) >= held, CATCH_UP_S, 0.1):
            raise BenchError(f"{stopped.name} held {count(ctx, other)} of the {held} instances {CATCH_UP_S:g} s "
                             f"after it was continued")
        took = round(time.perf_counter() - resumed, 2)
        if not wait_for(lambda: reached(http, stopped.name), CATCH_UP_S, 0.1):
            raise BenchError(f"the node registered through did not reach {stopped.name} again within "
                             f"{CATCH_UP_S:g} s")
    return times, took


def register(ctx: BenchContext, http: httpx.Client, prefix: str, n: int, what: str) -> list[float]:
    """`n` new instances registered one at a time (each must answer 201): the seconds each took."""
    times = []
    with ctx.ui.step(f"registering {n} instances, one at a time, {what}", total=n) as advance:
        for k in range(n):
            body = {"service": "paused-owner", "address": "127.0.0.1", "port": 9000 + k, "ttl": 0,
                    "tags": [{"s": class_iri(k % 50), "p": property_iri(0), "o": class_iri(50 + k % 50)}]}
            started = time.perf_counter()
            expect(http.put(f"/v1/instances/{prefix}-{k:04d}", json=body), 201)
            times.append(time.perf_counter() - started)
            advance()
    return times


def count(ctx: BenchContext, http: httpx.Client) -> int:
    """The instances this node holds itself (its own copies, not the ring's)."""
    try:
        return int(ctx.metrics(http).get(UP, 0))
    except httpx.HTTPError:
        return -1


def reached(http: httpx.Client, member: str) -> bool:
    """Whether this node lists `member` alive (it answered this node's last request)."""
    members = expect(http.get("/v1/cluster")).json()["members"]
    return any(m["id"] == member and m["status"] == "alive" for m in members)
