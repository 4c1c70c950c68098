"""The scale scenario: what one node costs and answers with `--instances` instances of 3 tags.

On a fresh server with a data directory, the synthetic ontology, then `--instances` instances in batches of
1,000 (progress on the terminal), their background writes settled. Then, in this order:

    memory       PSS of the process tree (server, SPARQL template, query processes): at the ontology alone,
                 with the instances once their writes settled, the same a minute later (the server gives
                 freed memory back every minute), and per instance
    sparql       the example queries of `queries/`, one at a time, and a count right after a registration
                 (`SEMREG_SPARQL_REPLICA=memory semreg bench ...` has the server keep its replica in memory)
    hot          the data set's discovery question asked again and again, one at a time
    cold         a question never asked before on every request (`match=all`), one at a time
    register     PUT of an instance with 1,000 tags, created, medians
    heartbeats   heartbeats as fast as 16 keep-alive connections send them, for 5 s, to 5,000 instances
    expiry       10,000 instances registered with a 5 s ttl left to lapse at once, while a client asks
                 /healthz every few milliseconds: the longest answer is the event loop's longest stall
    start-up     SIGTERM, then the seconds from the process's start on the data directory to /readyz 200,
                 split by the server's log (store opened, ontologies restored, records read, instances
                 restored, node open), and the tree's PSS once started; then the same after SIGKILL

It starts and stops its own server: with --semreg-url it fails with a BenchError. Compare a run at
10,000 with one at 100,000 or 1,000,000 for the "no slowdown" ratios (medians; the machine is shared).
"""
from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Collection
from typing import Any

import httpx

from semreg.bench.aio.connection import Connection
from semreg.bench.aio.loop import LoopThread
from semreg.bench.context import BenchContext, expect
from semreg.bench.dataset import class_iri, property_iri
from semreg.bench.peers import BenchError, PeerProcess
from semreg.bench.readings import log_milestones
from semreg.bench.report import Target
from semreg.bench.scenarios.common import register_batches, scenario, thousand_tags
from semreg.bench.scenarios.soak import KINDS, read_memory
from semreg.bench.scenarios.storage import SETTLE_S, STOP_S, check_held, register, start, stop
from semreg.bench.stats import ms_summary
from semreg.shipped import example_queries

MiB = 1 << 20
HOT_REQUESTS = 300
COLD_REQUESTS = 200
REGISTRATIONS = 10  # 1,000-tag instances created
SPARQL_ROUNDS = 10  # each example query asked this many times; registrations counted through /sparql
BEAT_INSTANCES = 5000
BEAT_CONNECTIONS = 16
BEAT_SECONDS = 5.0
EXPIRING = 10_000
EXPIRY_TTL_S = 5  # long enough that the batch is acknowledged before any of them lapses
EXPIRY_WATCH_S = 10.0  # how long /healthz is asked after the expiring instances are registered
LIVEZ_EVERY_S = 0.002
START_TIMEOUT_S = 900.0
# the server's start-up lines, in the order they come: where a start-up's seconds go
STARTUP_MILESTONES = ("store opened", "ontologies restored", "instance records read", "instances restored", "node open")
RELEASE_WAIT_S = 65.0  # past the server's interval for giving freed memory back (semreg.node.RELEASE_EVERY_S)


@scenario("scale", "--instances instances of 3 tags on one fresh server: PSS per instance over the process "
          "tree, hot and cold discovery, a 1,000-tag registration, heartbeats/s, the event loop's longest "
          "stall while 10,000 leases expire at once, and start-up to ready from the data directory",
          targets=(Target("PSS an instance, whole tree", "pss_total_per_instance_kib", "<=", 4.0, "KiB"),
                   Target("start-up to ready", "startup_s", "<=", 60.0, "s"),
                   Target("start-up to ready after kill -9", "startup_after_kill_s", "<=", 60.0, "s"),
                   Target("longest stall as leases lapse", "expiry.max_ms", "<=", 50.0, "ms")))
def scale(ctx: BenchContext) -> dict:
    if ctx.external:
        raise BenchError("scale measures the memory of a server of its own and restarts it; run it without "
                         "--semreg-url")
    servers: list[PeerProcess] = []
    n = ctx.dataset.instances
    try:
        with ctx.ui.step("starting a fresh semreg"):
            peer, _ = start(ctx, servers, extra=serve_options(ctx))
        ctx.upload_ontology(peer.url)
        with ctx.client(peer.url, timeout_s=600) as http:
            empty = tree_memory(peer)
            register_s = register(ctx, http, ctx.dataset).seconds
            settled_s = ctx.wait_settled(http, SETTLE_S * max(1, n // 100_000))
            check_held(ctx, http, n, "after registering them")
            settled = tree_memory(peer)
            wait_s = 0.0 if ctx.settings.quick else RELEASE_WAIT_S  # a smoke run reads the memory at once
            with ctx.ui.step(f"waiting {wait_s:.0f} s for the server to give freed memory back"):
                time.sleep(wait_s)
            full = tree_memory(peer)
            figures: dict[str, Any] = {
                "instances": n, "tags_per_instance": ctx.dataset.tags_per_instance, "sparql": ctx.settings.sparql,
                "register_s": round(register_s, 1), "register_per_s": round(n / register_s),
                "settled_s": settled_s, "memory_empty": empty, "memory_settled": settled, "memory": full,
                "pss_per_instance_kib": round((full["total_pss_mib"] - empty["total_pss_mib"]) * 1024 / n, 2),
                "pss_total_per_instance_kib": round(full["total_pss_mib"] * 1024 / n, 2),
            }
            ctx.ui.log(f"  {n:,} instances settled: {full['total_pss_mib']:,} MiB PSS, "
                       f"{figures['pss_total_per_instance_kib']} KiB an instance ({full})")  # kept if a later step fails
            figures["hot_discovery"] = hot_discovery(ctx, http)
            figures["cold_discovery"] = cold_discovery(ctx, http)
            figures["register_1000_tags"] = thousand_tag_registrations(ctx, http)
            if ctx.settings.sparql:
                figures["sparql_queries"] = sparql_queries(ctx, http)
        with LoopThread("semreg-bench-scale") as loop:
            figures["heartbeats"] = heartbeats(ctx, loop, peer.url)
            figures["expiry"] = expiry_stall(ctx, loop, peer.url)
        figures.update(restart(ctx, servers, peer, n))
    finally:
        with ctx.ui.step("stopping the servers"):
            for server in servers:
                server.stop(STOP_S)
    ctx.ui.log(f"  {n:,} instances: {figures['memory']['total_pss_mib']:,} MiB PSS "
               f"({figures['pss_total_per_instance_kib']} KiB an instance), start-up {figures['startup_s']} s "
               f"(after kill -9 {figures['startup_after_kill_s']} s), "
               f"hot {figures['hot_discovery']['median_ms']} ms, cold {figures['cold_discovery']['median_ms']} ms, "
               f"{figures['heartbeats']['per_s']:,} heartbeats/s, longest stall {figures['expiry']['max_ms']} ms")
    return figures


def serve_options(ctx: BenchContext) -> tuple[str, ...]:
    """`semreg serve` options of the scenario's server: `--no-sparql` when the run asked for it."""
    return () if ctx.settings.sparql else ("--no-sparql",)


def tree_memory(peer: PeerProcess) -> dict[str, Any]:
    """PSS and RSS of each kind of process of `peer`'s tree, in MiB."""
    assert peer.proc is not None
    memory = read_memory(peer.proc.pid)
    out: dict[str, Any] = {f"{kind}_pss_mib": round(memory[kind][0] / MiB, 1) for kind in KINDS}
    out["query_processes"] = memory["queries"][2]
    out["total_pss_mib"] = round(sum(memory[kind][0] for kind in KINDS) / MiB, 1)
    out["total_rss_mib"] = round(sum(memory[kind][1] for kind in KINDS) / MiB, 1)
    return out


def hot_discovery(ctx: BenchContext, http: httpx.Client) -> dict:
    """The data set's question, asked `HOT_REQUESTS` times one at a time (its answer cached after the first)."""
    params = ctx.dataset.discovery_query()
    expect(http.get("/v1/discover", params=params))
    samples = []
    with ctx.ui.step(f"hot discovery: one question {HOT_REQUESTS} times"):
        for _ in range(HOT_REQUESTS):
            started = time.perf_counter()
            expect(http.get("/v1/discover", params=params))
            samples.append(time.perf_counter() - started)
    return ms_summary(samples)


Question = tuple[str, str, str]
COLD_LIMIT = 100  # instances a new question asks for


def new_questions(ctx: BenchContext, seed: int, exclude: Collection[Question] = ()) -> list[Question]:
    """`COLD_REQUESTS` distinct (class, property, class) questions drawn with `seed`, none of `exclude`."""
    data = ctx.dataset
    rng = random.Random(ctx.settings.seed + seed)
    asked: set[Question] = set()
    while len(asked) < COLD_REQUESTS:
        q = (class_iri(rng.randrange(data.classes)), property_iri(rng.randrange(data.properties)),
             class_iri(rng.randrange(data.classes)))
        if q not in exclude:
            asked.add(q)
    return sorted(asked)


def new_question_params(q: Question) -> dict[str, Any]:
    """A new question's parameters: every logical degree, at most `COLD_LIMIT` instances."""
    return {"s": q[0], "p": q[1], "o": q[2], "match": "all", "limit": COLD_LIMIT}


def cold_discovery(ctx: BenchContext, http: httpx.Client, asked: list[Question] | None = None) -> dict:
    """`COLD_REQUESTS` distinct questions with every degree (`asked`, or drawn), each asked once."""
    asked = new_questions(ctx, 11) if asked is None else asked
    samples = []
    with ctx.ui.step(f"cold discovery: {len(asked)} new questions, match=all", total=len(asked)) as advance:
        for q in asked:
            started = time.perf_counter()
            expect(http.get("/v1/discover", params=new_question_params(q)))
            samples.append(time.perf_counter() - started)
            advance()
    return ms_summary(samples)


def thousand_tag_registrations(ctx: BenchContext, http: httpx.Client) -> dict:
    samples = []
    with ctx.ui.step(f"registering {REGISTRATIONS} instances of 1,000 tags"):
        for k in range(REGISTRATIONS):
            body = {"service": "bench-tags", "address": "127.0.0.1", "port": 9000 + k, "ttl": 0,
                    "tags": thousand_tags(ctx, k)}
            started = time.perf_counter()
            expect(http.put(f"/v1/instances/scale-tags-{k:02d}", json=body), 201)
            samples.append(time.perf_counter() - started)
    return ms_summary(samples)


def sparql_queries(ctx: BenchContext, http: httpx.Client) -> dict:
    """The example queries of `queries/` (the service one asked of a service the data set has), each
    `SPARQL_ROUNDS` times one at a time with a cache-defeating comment, and a count of instances asked right
    after each of `SPARQL_ROUNDS` registrations (read-your-writes: the replica must hold it): medians. A query
    past the endpoint's time limit is asked once and said so (`past_time_limit`: its `rows` are None)."""
    texts = {name: text.replace('"livros"', '"bench-svc-07"') for name, text in example_queries().items()}
    out: dict[str, Any] = {}
    headers = {"Accept": "application/sparql-results+json"}
    with ctx.ui.step(f"the {len(texts)} example SPARQL queries, {SPARQL_ROUNDS} times each"):
        for name, text in texts.items():
            samples: list[float] = []
            rows: int | None = 0
            for k in range(SPARQL_ROUNDS):
                started = time.perf_counter()
                answer = http.post("/sparql", content=f"{text}\n# {k}".encode(), headers={
                    **headers, "Content-Type": "application/sparql-query"})
                samples.append(time.perf_counter() - started)
                if answer.status_code == 503 and "time_limit_s" in answer.text:
                    rows = None  # past the endpoint's time limit: once is enough to know (each costs the limit)
                    break
                if answer.status_code == 400 and "result_limit" in answer.text:
                    rows = -1  # past the endpoint's result cap (every row read and counted first)
                else:
                    rows = len(expect(answer).json()["results"]["bindings"])
            out[name.removesuffix(".rq")] = {**ms_summary(samples), "rows": rows, "past_time_limit": rows is None}
    count = "PREFIX sr: <https://w3id.org/semreg#> SELECT (COUNT(?i) AS ?n) { ?i a sr:Instance ; sr:service %s }"
    samples = []
    with ctx.ui.step(f"{SPARQL_ROUNDS} registrations, each counted through /sparql at once"):
        for k in range(SPARQL_ROUNDS):
            expect(http.put(f"/v1/instances/scale-sparql-{k:02d}", json={
                "service": "scale-sparql", "address": "127.0.0.1", "port": 7100 + k, "ttl": 0}), 201)
            started = time.perf_counter()
            answer = expect(http.get("/sparql", params={"query": count % '"scale-sparql"'}, headers=headers))
            samples.append(time.perf_counter() - started)
            seen = int(answer.json()["results"]["bindings"][0]["n"]["value"])
            if seen != k + 1:
                raise BenchError(f"/sparql counted {seen} instances right after the {k + 1}th was acknowledged")
    out["after_a_write"] = ms_summary(samples)
    with ctx.ui.step(f"removing the {SPARQL_ROUNDS} instances counted"):
        for k in range(SPARQL_ROUNDS):
            expect(http.delete(f"/v1/instances/scale-sparql-{k:02d}"), 204)
    return out


def heartbeats(ctx: BenchContext, loop: LoopThread, url: str) -> dict:
    """Heartbeats back to back over `BEAT_CONNECTIONS` connections for `BEAT_SECONDS`: how many a second."""
    ids = [f"scale-hb-{k:05d}" for k in range(BEAT_INSTANCES)]
    with ctx.client(url) as http, ctx.ui.step(f"registering {len(ids):,} instances to heartbeat"):
        register_batches(ctx, http, [{"id": i, "service": "scale-hb", "address": "127.0.0.1", "port": 7000,
                                      "ttl": 60} for i in ids])
    headers = {**ctx.auth_headers(url), "Content-Type": "application/json"}
    counts = {"ok": 0, "failed": 0}

    async def beat(first: int, until: float) -> None:
        conn, k = Connection(url, headers), first
        try:
            while time.perf_counter() < until:
                response = await conn.request("PUT", f"/v1/instances/{ids[k % len(ids)]}/heartbeat", b"{}")
                counts["ok" if response.status == 200 else "failed"] += 1
                k += BEAT_CONNECTIONS
        finally:
            conn.close()

    async def run() -> float:
        started = time.perf_counter()
        until = started + BEAT_SECONDS
        await asyncio.gather(*(beat(c, until) for c in range(BEAT_CONNECTIONS)))
        return time.perf_counter() - started

    with ctx.ui.step(f"heartbeats as fast as {BEAT_CONNECTIONS} connections go, {BEAT_SECONDS:.0f} s"):
        elapsed = loop.run(run(), BEAT_SECONDS + 60)
    return {"per_s": round(counts["ok"] / elapsed), "failed": counts["failed"], "seconds": round(elapsed, 2)}


def expiry_stall(ctx: BenchContext, loop: LoopThread, url: str) -> dict:
    """`EXPIRING` instances whose 5 s ttl lapses at once, and /healthz asked every few milliseconds meanwhile:
    the slowest answers are the event loop's stalls."""
    ids = [f"scale-exp-{k:05d}" for k in range(EXPIRING)]
    items = [{"id": i, "service": "scale-exp", "address": "127.0.0.1", "port": 7100, "ttl": EXPIRY_TTL_S,
              "deregister_after": 3600, "tags": [{"s": class_iri(k % 50)}]} for k, i in enumerate(ids)]

    async def watch() -> list[float]:
        conn, samples = Connection(url, ctx.auth_headers(url)), []
        until = time.perf_counter() + EXPIRY_WATCH_S
        try:
            while time.perf_counter() < until:
                started = time.perf_counter()
                expect_status((await conn.request("GET", "/healthz")).status)
                samples.append(time.perf_counter() - started)
                await asyncio.sleep(LIVEZ_EVERY_S)
        finally:
            conn.close()
        return samples

    with ctx.client(url) as http:
        with ctx.ui.step(f"registering {EXPIRING:,} instances with a {EXPIRY_TTL_S} s ttl"):
            register_batches(ctx, http, items, size=EXPIRING)
        with ctx.ui.step(f"asking /healthz every {LIVEZ_EVERY_S * 1000:.0f} ms while their leases lapse"):
            samples = loop.run(watch(), EXPIRY_WATCH_S + 60)
        critical = sum(1 for view in expect(http.get("/v1/instances", params={"service": "scale-exp",
                                                                              "status": "critical"})).json())
    if critical != EXPIRING:
        raise BenchError(f"{critical:,} of the {EXPIRING:,} instances were critical after their ttl, not all")
    summary = ms_summary(samples)
    summary["p99_ms"] = round(sorted(samples)[int(len(samples) * 0.99)] * 1000, 2)
    summary["expired"] = critical
    return summary


def expect_status(status: int) -> None:
    if status != 200:
        raise BenchError(f"/healthz answered {status} while leases lapsed")


def restart(ctx: BenchContext, servers: list[PeerProcess], peer: PeerProcess, n: int) -> dict:
    """SIGTERM, then the start-up on the data directory to /readyz 200, timed, and the memory once started; then
    the same after `kill -9` (`startup_after_kill_s`)."""
    assert peer.data_dir is not None
    held_now = n + REGISTRATIONS + BEAT_INSTANCES + EXPIRING
    with ctx.ui.step(f"stopping semreg (SIGTERM) and starting it on its data directory ({n:,} instances)"):
        stop_s = stop(peer)
        fresh, startup_s, phases = start_again(ctx, servers, peer)
    with ctx.client(fresh.url, timeout_s=600) as http:
        check_held(ctx, http, held_now, "after the restart")
    figures = {"stop_s": stop_s, "startup_s": startup_s, "startup_phases_s": phases,
               "memory_restarted": tree_memory(fresh)}
    with ctx.ui.step(f"killing semreg (SIGKILL) and starting it on its data directory ({n:,} instances)"):
        fresh.kill()
        killed, figures["startup_after_kill_s"], figures["startup_after_kill_phases_s"] = start_again(ctx, servers, peer)
    with ctx.client(killed.url, timeout_s=600) as http:
        check_held(ctx, http, held_now, "after the kill and the start that followed")
    return figures


def start_again(ctx: BenchContext, servers: list[PeerProcess], peer: PeerProcess
                ) -> tuple[PeerProcess, float, dict[str, float]]:
    """A server on `peer`'s data directory: it, the seconds from its launch to /readyz 200, and where they went
    (from its log)."""
    started, launched = time.perf_counter(), time.time()
    fresh = ctx.peers.semreg(*serve_options(ctx), data=peer.data_dir, poll_s=0.05, ready_timeout_s=START_TIMEOUT_S)
    startup_s = round(time.perf_counter() - started, 2)
    servers.append(fresh)
    phases = log_milestones(fresh.log_tail(1 << 20), STARTUP_MILESTONES, launched)
    ctx.ui.log("  start-up, seconds from launch: " + ", ".join(f"{m} {s}" for m, s in phases.items()))
    return fresh, startup_s, phases
