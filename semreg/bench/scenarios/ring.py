"""The ring scenario: three nodes, each record on two, against one node in the same run.

A repeated discovery through a node that holds a third of the answer, a new question on every request
(under wrk, and one at a time), a 1,000-tag registration through the ring, and memory per node.
"""
from __future__ import annotations

import random
import time
from urllib.parse import urlencode

import orjson

from semreg.bench import stores, wrk
from semreg.bench.context import BenchContext, Load, expect
from semreg.bench.dataset import class_iri, property_iri
from semreg.bench.peers import BenchError
from semreg.bench.readings import process_rss_bytes
from semreg.bench.report import Target
from semreg.bench.scenarios.common import mib, scenario, thousand_tags
from semreg.bench.scenarios.discovery import COLD_SAMPLE, cold_params
from semreg.bench.stats import ms_summary

# -- a ring of three nodes against one node ----------------------------------------------------------------
RING_NODES = 3
RING_REPLICAS = 2


@scenario("ring", "three nodes (each record on two) against one node in the same run: a repeated discovery through "
          "a node that holds a third of the answer, a new question on every request, a 1,000-tag registration "
          "through the ring, and memory per node",
          needs=("wrk", "etcd"),
          targets=(Target("repeated: ring/single req/s", "ratio_repeated_ring_single", ">=", 0.7),
                   Target("distinct: ring/single p50", "ratio_distinct_p50_ring_single", "<=", 3.0),
                   Target("1,000-tag registration median", "register_1000_tags.median_ms", "<=", 50.0, "ms")))
def ring(ctx: BenchContext) -> dict:
    from semreg.bench.localcluster import LocalCluster

    single = ctx.semreg()
    figures = {"single": {**ctx.ensure_ontology(), **ctx.ensure_instances()}}
    cluster = LocalCluster(ctx.peers.workdir / "ring", replicas=RING_REPLICAS, lease_s=10, name="bench")
    try:
        with ctx.ui.step(f"starting etcd and {RING_NODES} semreg nodes (k={RING_REPLICAS})"):
            nodes = cluster.start(RING_NODES)
        first, second = nodes[0].url, nodes[1].url
        figures["ring"] = {**ctx.upload_ontology(first), **ctx.register_dataset(first)}
        with ctx.client(second) as http:
            ctx.wait_settled(http)
        data = ctx.dataset
        query = urlencode(data.discovery_query())
        want = data.expected_answer_ids()
        for url in (single, second):
            with ctx.client(url) as http:
                got = {v["id"] for v in expect(http.get("/v1/discover?" + query)).json()["instances"]}
            if got != want:
                raise BenchError(f"{url} answered {len(got)} instances to the discovery query, not the "
                                 f"{len(want)} expected")
        held = {}
        for node in nodes:
            with ctx.client(node.url) as http:
                held[node.name] = int(ctx.metrics(http).get('semreg_instances{status="up"}', 0))
        figures["records_per_node"] = held
        cold = cold_params(data.classes)
        sample = "/v1/discover?" + urlencode({"s": class_iri(0), "p": property_iri(0), "o": class_iri(0)})
        peers = ctx.measure([
            Load("single-repeated", single + "/v1/discover?" + query),
            Load("ring-repeated", second + "/v1/discover?" + query),
            Load("single-distinct", single + sample, base=single,
                 script=wrk.lua_random_script("/v1/discover", cold, ctx.auth_headers(single))),
            Load("ring-distinct", second + sample, base=second,
                 script=wrk.lua_random_script("/v1/discover", cold, {})),
        ])
        figures["distinct_one_at_a_time"] = one_at_a_time(ctx, {"single": single, "ring": second})
        figures["register_1000_tags"] = ring_registrations(ctx, first)
        figures["rss_mib"] = {"single": mib(process_rss_bytes(ctx.semreg_pid(single))),
                              **{n.name: mib(process_rss_bytes(n.pid)) for n in nodes}}
    finally:
        with ctx.ui.step("stopping the ring"):
            cluster.close()
    alone = figures["distinct_one_at_a_time"]
    return {**figures, "peers": peers,
            "ratio_repeated_ring_single": round(peers["ring-repeated"]["requests_per_s"]
                                                / peers["single-repeated"]["requests_per_s"], 3),
            "ratio_distinct_p50_ring_single": round(alone["ring"]["median_ms"] / alone["single"]["median_ms"], 3),
            "ratio_distinct_p50_under_load": round(float(peers["ring-distinct"]["p50_ms"])
                                                   / float(peers["single-distinct"]["p50_ms"]), 3),
            "ratio_distinct_ring_single": round(peers["ring-distinct"]["requests_per_s"]
                                                / peers["single-distinct"]["requests_per_s"], 3)}


def one_at_a_time(ctx: BenchContext, servers: dict[str, str]) -> dict:
    """New questions asked one at a time of each server in turn (the same questions, none asked before):
    what one question costs, without the queueing of a loaded server."""
    data = ctx.dataset
    rng = random.Random(ctx.settings.seed + 7)
    questions = [{"s": class_iri(rng.randrange(100, min(data.classes, 400))), "p": property_iri(rng.randrange(data.properties)),
                  "o": class_iri(rng.randrange(10, 35))} for _ in range(COLD_SAMPLE)]
    times: dict[str, list[float]] = {label: [] for label in servers}
    clients = {label: ctx.client(url) for label, url in servers.items()}
    try:
        with ctx.ui.step(f"asking {len(questions)} new questions of each, one at a time", total=len(questions)) as advance:
            for http in clients.values():
                expect(http.get("/readyz"))
            for q in questions:
                answers = set()
                for label, http in clients.items():
                    started = time.perf_counter()
                    body = expect(http.get("/v1/discover", params=q)).json()
                    times[label].append(time.perf_counter() - started)
                    answers.add((tuple(i["id"] for i in body["instances"]), orjson.dumps(body["matches"])))
                if len(answers) != 1:
                    raise BenchError(f"the ring and the single node answer {q} differently")
                advance()
    finally:
        for http in clients.values():
            http.close()
    return {label: ms_summary(samples) for label, samples in times.items()}


def ring_registrations(ctx: BenchContext, base_url: str) -> dict:
    """PUTs of 1,000-tag instances through one node of the ring (each stored on two nodes before it answers)."""
    times = []
    with ctx.client(base_url) as http, ctx.ui.step(f"registering {ctx.settings.register_repeats} instances of "
                                                   f"{ctx.settings.register_tags} tags through the ring",
                                                   total=ctx.settings.register_repeats) as advance:
        expect(http.get("/readyz"))
        for n in range(ctx.settings.register_repeats):
            content = stores.json_bytes({"service": "bench-tags", "address": "127.0.0.1", "port": 9000 + n, "ttl": 0,
                                         "tags": thousand_tags(ctx, n)})
            started = time.perf_counter()
            expect(http.put(f"/v1/instances/bench-ring-tags-{n:03d}", content=content,
                            headers={"Content-Type": "application/json"}), 201)
            times.append(time.perf_counter() - started)
            advance()
    return ms_summary(times)
