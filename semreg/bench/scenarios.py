"""The benchmark scenarios. Each is `fn(ctx) -> dict of figures`, registered with `@scenario`.

Figures: numbers (or small dicts/lists of numbers) by name; wrk results under `"peers"` by label; a
scenario that compares servers reports a ratio. Targets (`Target`) are checked by the runner and
shown, never asserted. To add a scenario, write a function here (or in a module imported by
`semreg.bench`) and decorate it; `--only NAME` selects it.
"""
from __future__ import annotations

import contextlib
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import orjson

from semreg.bench import stores, wrk
from semreg.bench.aio import (
    Connection,
    HealthTarget,
    Heartbeater,
    LoopThread,
    WatchCrowd,
    gather_limited,
    latency_stats,
    log_details,
    process_open_files_limit,
    process_rss_bytes,
    raise_open_files_limit,
    sample_metrics,
)
from semreg.bench.context import BenchContext, Load, expect, server_timings
from semreg.bench.dataset import NS, RDFS_SUBCLASSOF, class_iri, property_iri
from semreg.bench.peers import BenchError
from semreg.bench.report import Target

SCHEMAORG = "schemaorg-30.0-current-https.ttl"
DBPEDIA = "dbpedia-ontology-2026.08.20.ttl"
SOSA = "sosa-2017-04-17.n3"
FOAF = "foaf-0.99.n3"
SPARQL_JSON = "application/sparql-results+json"


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[BenchContext], dict]
    summary: str
    needs: tuple[str, ...] = ()  # tools besides semreg: "wrk", "etcd", "oxigraph"
    targets: tuple[Target, ...] = ()
    render: Callable[[dict], list[list[str]]] | None = None  # a table of its own (header row first)


SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str, summary: str, *, needs: tuple[str, ...] = (), targets: tuple[Target, ...] = (),
             render: Callable[[dict], list[list[str]]] | None = None):
    def register(fn: Callable[[BenchContext], dict]) -> Callable[[BenchContext], dict]:
        SCENARIOS[name] = Scenario(name, fn, summary, needs, targets, render)
        return fn
    return register


def ms_summary(samples_s: list[float]) -> dict:
    """Median, p90, min and max of durations in seconds, as milliseconds."""
    ms = sorted(s * 1000.0 for s in samples_s)
    p90 = ms[max(0, -(-len(ms) * 9 // 10) - 1)]  # nearest rank
    return {"median_ms": round(statistics.median(ms), 2), "p90_ms": round(p90, 2), "min_ms": round(ms[0], 2),
            "max_ms": round(ms[-1], 2), "n": len(ms)}


# -- 1. discovery against an etcd prefix read of the same records -----------------------------------------
STAGING = "staging"  # as long as "default", and "stage-" as "bench-": the two answers are the same size


def staged_copies(ctx: BenchContext) -> list[dict]:
    """The discovery answer's instances again, in another environment (the same tags, ids of the same length)."""
    data = ctx.dataset
    return [{**data.instance(i), "id": "stage-" + data.instance_id(i).removeprefix("bench-"), "environment": STAGING}
            for i in sorted(data.answer_indexes)]


@scenario("discovery", "GET /v1/discover answered by reasoning vs etcd's range read of the same records; the same "
          "question narrowed to another environment holding the same tags vs the default one",
          needs=("wrk", "etcd"),
          targets=(Target("semreg/etcd req/s", "ratio_semreg_etcd", ">=", 2.0),
                   Target("semreg p99", "peers.semreg.p99_ms", "<=", 10.0, "ms"),
                   Target("environment=/unfiltered req/s", "ratio_environment_unfiltered", ">=", 0.9)))
def discovery(ctx: BenchContext) -> dict:
    figures = {**ctx.ensure_ontology(), **ctx.ensure_instances()}
    data = ctx.dataset
    query = data.discovery_query()
    url = ctx.semreg() + "/v1/discover?" + urlencode(query)
    staged = staged_copies(ctx)
    environment_url = url + "&" + urlencode({"environment": STAGING})
    with ctx.client(ctx.semreg()) as http:
        with ctx.ui.step(f"registering the {len(staged)} answer instances again in the environment {STAGING}"):
            register_batches(ctx, http, staged)
        try:
            response = expect(http.get(url))
            views = response.json().get("instances", [])
            got, want = {view.get("id") for view in views}, data.expected_answer_ids()
            if got != want:
                raise BenchError(f"the discovery query {query} answered {len(got)} instances, {len(got & want)} of "
                                 f"the {len(want)} expected (missing e.g. {sorted(want - got)[:3]}, extra "
                                 f"{sorted(got - want)[:3]})")
            narrowed = expect(http.get(environment_url))
            if {view.get("id") for view in narrowed.json().get("instances", [])} != {i["id"] for i in staged}:
                raise BenchError(f"the discovery query in the environment {STAGING} did not answer its own copies")
            ctx.ui.log(f"  the query answers {len(views)} instances as expected ({len(response.content):,} bytes; "
                       f"{len(narrowed.content):,} in {STAGING})")
            etcd = ctx.etcd()
            with ctx.ui.step(f"storing the {len(views)} instance views in etcd"):
                prefix = stores.etcd_put_views(etcd, "/semreg-bench/discovery/", views)
            results = ctx.measure([
                Load("semreg", url),
                Load("semreg-environment", environment_url),
                Load("etcd-range", etcd + "/v3/kv/range", "POST", stores.etcd_range_body(prefix),
                     {"Content-Type": "application/json"}),
                Load("etcd-get", etcd + "/v3/kv/range", "POST", stores.etcd_get_body(prefix + views[0]["id"]),
                     {"Content-Type": "application/json"}),
            ])
        finally:
            with ctx.ui.step(f"removing the {len(staged)} copies"):
                for item in staged:
                    http.delete(f"/v1/instances/{item['id']}")
                    ctx.registered_ids.discard(item["id"])
    semreg_rps = results["semreg"]["requests_per_s"]
    return {"query": query, "answer_instances": len(views), "semreg_response_bytes": len(response.content),
            "environment_response_bytes": len(narrowed.content),
            "etcd_range_values_bytes": sum(len(stores.json_bytes(v)) for v in views), **figures,
            "peers": results,
            "ratio_semreg_etcd": round(semreg_rps / results["etcd-range"]["requests_per_s"], 3),
            "ratio_environment_unfiltered": round(results["semreg-environment"]["requests_per_s"] / semreg_rps, 3)}


# -- 1b. discovery with five 1,000-tag instances among the matches -------------------------------------
BIG_TAGS = 1000
BIG_MATCHING = 10  # of each big instance's tags, inside the query's reach


def big_instance(ctx: BenchContext, n: int) -> dict:
    """An instance of `BIG_TAGS` distinct tags, `BIG_MATCHING` of them matching the discovery query."""
    data = ctx.dataset
    inside = [class_iri(i) for i in sorted(data.descendants(data.target_class))]
    outside = data.outside_classes()
    tags = []
    for k in range(BIG_TAGS):
        pool = inside if k < BIG_MATCHING else outside
        tags.append({"s": pool[(k * 7 + n) % len(pool)], "p": property_iri(k % data.properties),
                     "o": class_iri((k * 31 + n * 17) % data.classes)})
    if len({(t["s"], t["p"], t["o"]) for t in tags}) != len(tags):
        raise BenchError("the ontology is too small for distinct 1,000-tag instances; raise --classes")
    return {"id": f"bench-big-{n}", "service": "bench-big", "address": "10.250.0.1", "port": 9000 + n, "ttl": 0,
            "tags": tags, "meta": {"bench": "many-tags"}}


@scenario("many-tags", "GET /v1/discover with five 1,000-tag instances among the matches vs etcd's prefix read of "
          "the same records", needs=("wrk", "etcd"),
          targets=(Target("semreg/etcd req/s", "ratio_semreg_etcd", ">=", 2.0),
                   Target("semreg p99", "peers.semreg.p99_ms", "<=", 10.0, "ms"),
                   Target("answer size", "semreg_response_bytes", "<=", 400_000, "bytes")))
def many_tags(ctx: BenchContext) -> dict:
    figures = {**ctx.ensure_ontology(), **ctx.ensure_instances()}
    data = ctx.dataset
    url = ctx.semreg() + "/v1/discover?" + urlencode(data.discovery_query())
    big = [big_instance(ctx, n) for n in range(5)]
    with ctx.client(ctx.semreg()) as http:
        with ctx.ui.step(f"registering {len(big)} instances of {BIG_TAGS} tags"):
            expect(http.post("/v1/instances/batch", json={"instances": big}))
            ctx.registered_ids.update(b["id"] for b in big)
        try:
            response = expect(http.get(url))
            body = response.json()
            got = {view["id"] for view in body["instances"]}
            want = data.expected_answer_ids() | {b["id"] for b in big}
            if got != want:
                raise BenchError(f"the discovery answered {len(got)} instances, not the {len(want)} expected")
            # the records an etcd-based registry would hold for these instances: each in full, tags and all
            records = [expect(http.get(f"/v1/instances/{iid}")).json() for iid in sorted(got)]
            ctx.ui.log(f"  {len(got)} instances, {len(response.content):,} bytes ({len(body['matches'])} tags listed, "
                       f"truncated: {body['truncated']})")
            etcd = ctx.etcd()
            with ctx.ui.step(f"storing the {len(records)} instance records in etcd"):
                prefix = stores.etcd_put_views(etcd, "/semreg-bench/many-tags/", records)
            results = ctx.measure([
                Load("semreg", url),
                Load("etcd-range", etcd + "/v3/kv/range", "POST", stores.etcd_range_body(prefix),
                     {"Content-Type": "application/json"}),
            ])
        finally:
            for b in big:
                http.delete(f"/v1/instances/{b['id']}")
                ctx.registered_ids.discard(b["id"])
    return {"answer_instances": len(got), "semreg_response_bytes": len(response.content),
            "matches_listed": len(body["matches"]), "truncated": body["truncated"],
            "etcd_range_values_bytes": sum(len(stores.json_bytes(r)) for r in records), **figures, "peers": results,
            "ratio_semreg_etcd": round(results["semreg"]["requests_per_s"] / results["etcd-range"]["requests_per_s"], 3)}


# -- 1c. questions never asked before ---------------------------------------------------------------------
COLD_SAMPLE = 25  # questions timed one at a time on each server, and checked to agree


def cold_params(data_classes: int) -> tuple[wrk.RandomParam, ...]:
    """s from C0-C99, p from p00-p19, o from C0-C9: 20,000 distinct questions."""
    return (wrk.RandomParam("s", NS + "C%05d", ((0, min(99, data_classes - 1)),)),
            wrk.RandomParam("p", NS + "p%02d", ((0, 19),)),
            wrk.RandomParam("o", NS + "C%05d", ((0, min(9, data_classes - 1)),)))


def discovery_sparql(s: str, p: str, o: str) -> str:
    """The question as SPARQL over the registry vocabulary and the closure (exact or narrower, up only)."""
    return ("PREFIX sr: <https://w3id.org/semreg#> PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> "
            "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> SELECT DISTINCT ?id WHERE { "
            "?i a sr:Instance ; sr:id ?id ; sr:status \"up\" ; sr:tag ?t . "
            "?t rdf:subject ?s ; rdf:predicate ?p ; rdf:object ?o . "
            f"{{ ?s rdfs:subClassOf <{s}> }} UNION {{ VALUES ?s {{ <{s}> }} }} "
            f"{{ ?p rdfs:subPropertyOf <{p}> }} UNION {{ VALUES ?p {{ <{p}> }} }} "
            f"{{ ?o rdfs:subClassOf <{o}> }} UNION {{ VALUES ?o {{ <{o}> }} }} }}")


@scenario("cold-discovery", "GET /v1/discover with a question never asked before on every request, and the same "
          "questions as SPARQL on the Oxigraph server holding semreg's graphs and closure",
          needs=("wrk", "oxigraph"),
          targets=(Target("distinct questions/s", "peers.semreg-cold.requests_per_s", ">=", 2000.0),
                   Target("oxigraph SPARQL / semreg per question", "ratio_oxigraph_semreg_ms", ">=", 100.0)))
def cold_discovery(ctx: BenchContext) -> dict:
    figures = {**ctx.ensure_ontology(), **ctx.ensure_instances()}
    semreg, oxigraph = ctx.semreg(), ctx.oxigraph()
    data = ctx.dataset
    rng = random.Random(ctx.settings.seed + 1)
    # questions outside the range wrk draws from, so each is cold when timed here
    sample = [(class_iri(rng.randrange(100, min(data.classes, 400))), property_iri(rng.randrange(data.properties)),
               class_iri(rng.randrange(10, 35))) for _ in range(COLD_SAMPLE)]
    with ctx.ui.step("copying semreg's graphs into the Oxigraph server"), ctx.client(semreg) as http:
        stores.copy_graphs(http, oxigraph)
    semreg_ms, oxigraph_ms, agree = [], [], 0
    with ctx.client(semreg) as http, httpx.Client(base_url=oxigraph, timeout=120) as ox, \
            ctx.ui.step(f"asking {len(sample)} new questions of both, one at a time", total=len(sample)) as advance:
        expect(http.get("/readyz"))
        for s_, p_, o_ in sample:
            started = time.perf_counter()
            answer = expect(http.get("/v1/discover", params={"s": s_, "p": p_, "o": o_}))
            semreg_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            rows = expect(ox.get("/query", params={"query": discovery_sparql(s_, p_, o_)},
                                 headers={"Accept": SPARQL_JSON})).json()["results"]["bindings"]
            oxigraph_ms.append((time.perf_counter() - started) * 1000)
            agree += {v["id"] for v in answer.json()["instances"]} == {r["id"]["value"] for r in rows}
            advance()
    base = ctx.semreg()
    load = Load("semreg-cold", base + "/v1/discover?" + urlencode({"s": class_iri(0), "p": property_iri(0),
                                                                   "o": class_iri(0)}),
                base=base, script=wrk.lua_random_script("/v1/discover", cold_params(data.classes),
                                                        ctx.auth_headers(base)))
    peers = ctx.measure([load])
    semreg_median = statistics.median(semreg_ms)
    oxigraph_median = statistics.median(oxigraph_ms)
    result = {**figures, "peers": peers, "sample_questions": len(sample), "sample_agree": agree,
              "semreg_one_at_a_time_ms": ms_summary([m / 1000 for m in semreg_ms]),
              "oxigraph_sparql_one_at_a_time_ms": ms_summary([m / 1000 for m in oxigraph_ms]),
              "ratio_oxigraph_semreg_ms": round(oxigraph_median / semreg_median, 1)}
    if agree != len(sample):
        result["warning"] = f"semreg and the SPARQL formulation disagree on {len(sample) - agree} questions"
        ctx.ui.log(f"[yellow]  warning: {result['warning']}")
    return result


# -- 2. a one-pattern SPARQL query against the Oxigraph server --------------------------------------------
def distinct_sparql(classes: int) -> tuple[wrk.RandomParam, ...]:
    """`SELECT ?x WHERE { ?x rdfs:subClassOf bench:C<random> } LIMIT <random>`: a new query each request."""
    template = (f"SELECT ?x WHERE {{ ?x <{RDFS_SUBCLASSOF}> <{NS}C%05d> }} LIMIT %d")
    return (wrk.RandomParam("query", template, ((0, classes - 1), (1, 1000))),)


@scenario("sparql", "one-pattern SELECT on /sparql vs the Oxigraph server holding the same graphs: the same query "
          "repeated (semreg answers from its cache) and a new query on every request",
          needs=("wrk", "oxigraph"),
          targets=(Target("repeated: semreg/oxigraph req/s", "ratio_semreg_oxigraph", ">=", 0.5),
                   Target("distinct: semreg/oxigraph req/s", "ratio_distinct_semreg_oxigraph", ">=", 0.5)))
def sparql(ctx: BenchContext) -> dict:
    figures = {**ctx.ensure_ontology(), **ctx.ensure_instances()}
    semreg, oxigraph = ctx.semreg(), ctx.oxigraph()
    with ctx.ui.step("copying semreg's graphs into the Oxigraph server"), ctx.client(semreg) as http:
        copied = stores.copy_graphs(http, oxigraph)
    query = ctx.dataset.sparql_query()
    headers = {"Accept": SPARQL_JSON}
    semreg_url = f"{semreg}/sparql?{urlencode({'query': query})}"
    oxigraph_url = f"{oxigraph}/query?{urlencode({'query': query})}"
    rows = {}
    with ctx.client(semreg) as http:
        for label, url in (("semreg", semreg_url), ("oxigraph", oxigraph_url)):
            rows[label] = len(expect(http.get(url, headers=headers)).json()["results"]["bindings"])
        sample = {}
        for k in (0, ctx.dataset.sparql_class, ctx.dataset.classes - 1):
            q = f"SELECT ?x WHERE {{ ?x <{RDFS_SUBCLASSOF}> <{class_iri(k)}> }} ORDER BY ?x LIMIT 50"
            answers = [sorted(b["x"]["value"] for b in expect(http.get(u, params={"query": q}, headers=headers))
                              .json()["results"]["bindings"]) for u in (f"{semreg}/sparql", f"{oxigraph}/query")]
            sample[class_iri(k)] = answers[0] == answers[1]
    result = {"query": query, "rows": rows, "graphs_copied": copied, "distinct_sample_agrees": sample, **figures}
    if rows["semreg"] != rows["oxigraph"] or not all(sample.values()):
        result["warning"] = f"the two servers answer differently: rows {rows}, sample {sample}"
        ctx.ui.log(f"[yellow]  warning: {result['warning']}")
    distinct = distinct_sparql(ctx.dataset.classes)
    semreg_headers = {**ctx.auth_headers(semreg), **headers}
    peers = ctx.measure([
        Load("semreg", semreg_url, headers=headers), Load("oxigraph", oxigraph_url, headers=headers),
        Load("semreg-distinct", semreg_url, headers=headers, base=semreg,
             script=wrk.lua_random_script("/sparql", distinct, semreg_headers)),
        Load("oxigraph-distinct", oxigraph_url, headers=headers, base=oxigraph,
             script=wrk.lua_random_script("/query", distinct, headers)),
    ])
    return {**result, "peers": peers,
            "ratio_semreg_oxigraph": round(peers["semreg"]["requests_per_s"] / peers["oxigraph"]["requests_per_s"], 3),
            "ratio_distinct_semreg_oxigraph": round(peers["semreg-distinct"]["requests_per_s"]
                                                    / peers["oxigraph-distinct"]["requests_per_s"], 3)}


# -- 3. registering one instance with 1,000 tags ----------------------------------------------------------
def thousand_tags(ctx: BenchContext, variant: int) -> list[dict]:
    """`register_tags` distinct tags over classes outside the discovery answer; a new object per variant."""
    classes = ctx.dataset.outside_classes()
    n_props, n_classes = ctx.dataset.properties, ctx.dataset.classes
    tags = [{"s": classes[k % len(classes)], "p": property_iri(k // len(classes) % n_props),
             "o": class_iri((k * 13 + variant * 101 + 1) % n_classes)} for k in range(ctx.settings.register_tags)]
    if len({(t["s"], t["p"], t["o"]) for t in tags}) != len(tags):
        raise BenchError(f"the ontology is too small for {len(tags)} distinct tags; raise --classes")
    return tags


@scenario("register-1000-tags", "PUT /v1/instances/{id} of one instance with 1,000 tags, over HTTP",
          targets=(Target("create median", "create.median_ms", "<=", 50.0, "ms"),
                   Target("replace median", "replace.median_ms", "<=", 50.0, "ms")))
def register_1000_tags(ctx: BenchContext) -> dict:
    ctx.ensure_ontology()
    s = ctx.settings
    created: list[float] = []
    replaced: list[float] = []
    statuses: dict[str, int] = {}
    body_bytes = 0
    ids = [f"bench-tags-{n:03d}" for n in range(s.register_repeats)]
    with ctx.client(ctx.semreg()) as http, \
            ctx.ui.step(f"registering {len(ids)} + {s.register_replacements} instances of {s.register_tags} tags",
                        total=len(ids) + s.register_replacements) as advance:
        expect(http.get("/readyz"))  # the connection is open before the first timed request
        plan = [(i, n) for n, i in enumerate(ids)] + [(ids[0], len(ids) + k) for k in range(s.register_replacements)]
        for step, (instance_id, variant) in enumerate(plan):
            body = {"service": "bench-tags", "address": "127.0.0.1", "port": 9000 + variant, "ttl": 0,
                    "tags": thousand_tags(ctx, variant), "meta": {"bench": "register-1000-tags"}}
            content = stores.json_bytes(body)
            body_bytes = len(content)
            started = time.perf_counter()
            response = http.put(f"/v1/instances/{instance_id}", content=content,
                                headers={"Content-Type": "application/json"})
            elapsed = time.perf_counter() - started
            expect(response, 201 if step < len(ids) else 200)
            ctx.registered_ids.add(instance_id)
            statuses[str(response.status_code)] = statuses.get(str(response.status_code), 0) + 1
            (created if step < len(ids) else replaced).append(elapsed)
            advance()
        stored = expect(http.get(f"/v1/instances/{ids[-1]}")).json()
        if len(stored.get("tags", [])) != s.register_tags:
            raise BenchError(f"instance {ids[-1]} came back with {len(stored.get('tags', []))} tags, "
                             f"not {s.register_tags}")
        for instance_id in ids:
            expect(http.delete(f"/v1/instances/{instance_id}"), 204, 404)
            ctx.registered_ids.discard(instance_id)
    figures = {"tags": s.register_tags, "body_bytes": body_bytes, "statuses": statuses, "create": ms_summary(created)}
    if replaced:
        figures["replace"] = ms_summary(replaced)
    return figures


# -- 4. the closure of two real ontologies, and small ones beside them -----------------------------------
@scenario("closure", "PUT of DBpedia's ontology beside schema.org's: closure of both and indexes; then small ontologies "
          "(SOSA, FOAF) beside the two",
          targets=(Target("second upload median", "second_upload.median_ms", "<=", 2000.0, "ms"),
                   Target("small upload median", "small_upload.median_ms", "<=", 500.0, "ms")))
def closure(ctx: BenchContext) -> dict:
    paths = [ctx.settings.shared_data / f for f in (SCHEMAORG, DBPEDIA, SOSA, FOAF)]
    for path in paths:
        if not path.is_file():
            raise BenchError(f"{path} is missing; pass --shared-data DIR (the directory holding {SCHEMAORG}, "
                             f"{DBPEDIA}, {SOSA} and {FOAF})")
    first, second, small, foaf = paths
    names = ("bench-schemaorg", "bench-dbpedia", "bench-sosa", "bench-foaf")
    rounds = ctx.settings.closure_rounds
    with ctx.own_semreg() as url, ctx.client(url, timeout_s=300) as http:
        def put(name: str, path: Path) -> tuple[float, dict]:
            body = path.read_bytes()
            started = time.perf_counter()
            response = expect(http.put(f"/v1/ontologies/{name}", content=body, headers={"Content-Type": "text/turtle"}),
                              200, 201)
            ctx.uploaded_ontologies.add(name)
            return time.perf_counter() - started, server_timings(response)

        def delete(name: str) -> float:
            started = time.perf_counter()
            expect(http.delete(f"/v1/ontologies/{name}"), 204)
            ctx.uploaded_ontologies.discard(name)
            return time.perf_counter() - started

        uploads, deletes, server = [], [], []
        small_uploads, small_deletes, small_server, reuploads = [], [], [], []
        try:
            with ctx.ui.step(f"uploading {first.name}"):
                first_s, first_server = put(names[0], first)
            for n in range(rounds):
                if n:
                    deletes.append(delete(names[1]))
                with ctx.ui.step(f"uploading {second.name} ({n + 1}/{rounds})"):
                    elapsed, timings = put(names[1], second)
                uploads.append(elapsed)
                server.append(timings)
            listed = {item["name"]: item for item in expect(http.get("/v1/ontologies")).json()
                      if item.get("name") in names}
            # a small ontology beside the two large ones: what its upload and deletion cost
            for n in range(max(3, rounds)):
                if n:
                    small_deletes.append(delete(names[2]))
                with ctx.ui.step(f"uploading {small.name} beside them ({n + 1}/{max(3, rounds)})"):
                    elapsed, timings = put(names[2], small)
                small_uploads.append(elapsed)
                small_server.append(timings)
            with ctx.ui.step(f"uploading {foaf.name} beside them, then again ({max(3, rounds)} times)"):
                foaf_s, foaf_server = put(names[3], foaf)
                for _ in range(max(3, rounds)):
                    reuploads.append(put(names[3], foaf)[0])
        finally:
            for name in names:  # an external server keeps only what it had; a fresh one is stopped anyway
                if ctx.external and name in ctx.uploaded_ontologies:
                    http.delete(f"/v1/ontologies/{name}")
                ctx.uploaded_ontologies.discard(name)
    figures = {"first_upload": {"ms": round(first_s * 1000, 1), **first_server},
               "second_upload": ms_summary(uploads), "ontologies": listed,
               "small_upload": ms_summary(small_uploads), "small_delete": ms_summary(small_deletes),
               "foaf_upload": {"ms": round(foaf_s * 1000, 1), **foaf_server}, "foaf_reupload": ms_summary(reuploads)}
    if deletes:
        figures["delete_second"] = ms_summary(deletes)
    for figure, timings_list in (("second_upload", server), ("small_upload", small_server)):
        for key in sorted({key for timings in timings_list for key in timings}):  # e.g. server_reasoning_ms
            figures[figure][key] = statistics.median(t[key] for t in timings_list if key in t)
    return figures


# -- shared by the scenarios of load beside discovery ---------------------------------------------------------
MiB = 1024 * 1024
WATCH_NS = "http://bench.semreg.example/watch#"
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


def register_batches(ctx: BenchContext, http, items: list[dict], size: int = 1000) -> None:
    for start in range(0, len(items), size):
        batch = items[start:start + size]
        expect(http.post("/v1/instances/batch", json={"instances": batch}))
        ctx.registered_ids.update(item["id"] for item in batch)


def remove_instances(ctx: BenchContext, loop: LoopThread, base_url: str, ids: list[str]) -> None:
    """On an external server, delete what a scenario registered (16 connections); a fresh one is stopped anyway."""
    if not ctx.external or not ids:
        return
    headers = ctx.auth_headers(base_url)
    connections = [Connection(base_url, headers) for _ in range(16)]

    async def delete_all() -> None:
        async def worker(conn: Connection, mine: list[str]) -> None:
            for instance_id in mine:
                await conn.request("DELETE", f"/v1/instances/{instance_id}")
            conn.close()
        await gather_limited([worker(c, ids[n::len(connections)]) for n, c in enumerate(connections)], 16)

    with ctx.ui.step(f"removing {len(ids):,} instances"):
        loop.run(delete_all(), 300)
    ctx.registered_ids.difference_update(ids)


def mib(value: int | None) -> float | None:
    return round(value / MiB, 1) if value is not None else None


def watch_groups(watches: int, groups: int) -> list[int]:
    """The query group of each blocking read: round robin, so group sizes differ by at most one."""
    return [n % groups for n in range(watches)]


def watch_group_iri(group: int) -> str:
    return f"{WATCH_NS}G{group:03d}"


def wait_for(condition: Callable[[], bool], timeout_s: float, every_s: float = 0.005) -> bool:
    deadline = time.perf_counter() + timeout_s
    while not condition():
        if time.perf_counter() > deadline:
            return False
        time.sleep(every_s)
    return True


# -- 5. 10,000 blocking reads ---------------------------------------------------------------------------------
@scenario("watches", "10,000 blocking reads (?index=&wait=) held on one server: memory, who wakes on a write, "
          "how fast",
          targets=(Target("wake p99", "wake.p99_ms", "<=", 100.0, "ms"),
                   Target("irrelevant wakes", "irrelevant_wakes", "<=", 0),
                   Target("missed or extra wakes", "wrong_wakes", "<=", 0)))
def watches(ctx: BenchContext) -> dict:
    s = ctx.settings
    n, groups = s.watches, min(s.watch_groups, s.watches)
    soft, hard = raise_open_files_limit()
    if soft < n + 256:
        raise BenchError(f"this process may open {soft} files (hard limit {hard}), too few for {n:,} connections; "
                         f"raise the hard limit (ulimit -Hn) or pass --watches under {max(0, soft - 256)}")
    plan = watch_groups(n, groups)
    woken_group = 0
    expected = plan.count(woken_group)
    with ctx.own_semreg() as url, ctx.client(url) as http, LoopThread("semreg-bench-watches") as loop:
        pid = ctx.semreg_pid(url)
        server_files = process_open_files_limit(pid)
        base: list[dict[str, Any]] = [
            {"id": f"bench-watch-{g:03d}", "service": "bench-watch", "address": "127.0.0.1", "port": 9000 + g,
             "ttl": 0, "tags": [{"s": watch_group_iri(g)}]} for g in range(groups)]
        register_batches(ctx, http, base)
        indexes = {}
        for g in range(groups):  # each query's own index: a read blocks while nothing it answers changes
            indexes[g] = int(expect(http.get("/v1/discover", params={"s": watch_group_iri(g)})).headers["x-semreg-index"])
        ctx.wait_settled(http)
        rss_before = process_rss_bytes(pid)
        targets = [(g, "/v1/discover?" + urlencode({"s": watch_group_iri(g), "index": indexes[g],
                                                    "wait": f"{s.watch_wait_s}s"})) for g in plan]
        crowd = WatchCrowd(url, targets, ctx.auth_headers(url))
        held = 0
        started = time.perf_counter()
        loop.run(crowd.start())
        timeout_s = min(120.0, s.watch_wait_s / 2)
        with ctx.ui.step(f"opening {n:,} blocking reads over {groups} queries", total=n) as advance:
            while True:
                now_held = int(ctx.metrics(http).get("semreg_watches", 0))
                advance(max(0, now_held - held))
                held = now_held
                if held + crowd.failed + len(crowd.wakes) >= n:
                    break
                if time.perf_counter() - started > timeout_s:
                    break
                time.sleep(0.1)
        established_s = time.perf_counter() - started
        figures: dict[str, Any] = {"watches": n, "groups": groups, "wait_s": s.watch_wait_s, "watches_held": held,
                   "establish_s": round(established_s, 2),
                   "client_sent_s": round(crowd.all_sent - started, 2) if crowd.all_sent else None,
                   "connect_errors": crowd.failed, "open_files_limit": {"bench": soft, "server": server_files}}
        if crowd.errors:
            figures["connect_error_messages"] = dict(crowd.errors.most_common(5))
        if held < n:
            tail = ctx.semreg_log(url, 1500)
            ctx.ui.log(f"[yellow]  only {held:,} of {n:,} blocking reads held after {established_s:.0f} s "
                       f"({crowd.failed} connections failed: {dict(crowd.errors.most_common(3))})")
            figures["server_log_tail"] = tail[-1500:]
            if held == 0:
                raise BenchError(f"the server held none of {n:,} blocking reads: {dict(crowd.errors.most_common(3))}"
                                 f"\n{tail}")
        rss_with = process_rss_bytes(pid)
        figures.update({"server_rss_before_mib": mib(rss_before), "server_rss_with_mib": mib(rss_with),
                        "bytes_per_watch": round((rss_with - rss_before) / held) if rss_before and rss_with and held
                        else None})
        premature = len(crowd.wakes)

        # one write relevant to one query group: exactly that group's reads answer
        def write(instance_id: str, tags: list[dict]) -> tuple[float, float]:
            body = {"service": "bench-watch", "address": "127.0.0.1", "port": 9999, "ttl": 0, "tags": tags}
            sent = time.perf_counter()
            expect(http.put(f"/v1/instances/{instance_id}", json=body), 200, 201)
            ctx.registered_ids.add(instance_id)
            return sent, time.perf_counter()

        expect(http.get("/healthz"))  # the keep-alive connection is open before the timed write
        before = len(crowd.wakes)
        sent, acked = write("bench-watch-one", [{"s": watch_group_iri(woken_group)}])
        wait_for(lambda: len(crowd.wakes) - before >= expected, 10.0)
        time.sleep(0.5)  # a wake past the group's count would show up here
        woken = crowd.wakes[before:]
        mine = [w for w in woken if w.group == woken_group]
        figures.update({
            "premature_wakes": premature, "write_ms": round((acked - sent) * 1000, 2),
            "woken": len(woken), "expected_woken": expected,
            "wrong_wakes": (len(woken) - len(mine)) + abs(expected - len(mine)),
            "wake": latency_stats([max(0.0, w.at - acked) for w in mine]),
            "wake_from_write": latency_stats([w.at - sent for w in mine]),
            "answered_before_ack": sum(1 for w in mine if w.at < acked),
            "non_200_wakes": sum(1 for w in woken if w.status != 200),
        })
        figures["watches_after_wake"] = int(ctx.metrics(http).get("semreg_watches", 0))

        # one write relevant to none: nothing answers within a second
        before = len(crowd.wakes)
        write("bench-watch-other", [{"s": WATCH_NS + "Unwatched"}])
        time.sleep(1.0)
        figures["irrelevant_wakes"] = len(crowd.wakes) - before

        # one write relevant to every query: every read still waiting answers (and the server is left idle)
        before = len(crowd.wakes)
        waiting = held - len(mine)
        sent, acked = write("bench-watch-all", [{"s": watch_group_iri(g)} for g in range(groups)])
        with ctx.ui.step(f"waking the other {waiting:,} reads at once"):
            wait_for(lambda: len(crowd.wakes) - before >= waiting, 60.0, 0.01)
        everyone = crowd.wakes[before:]
        figures["wake_all"] = {**latency_stats([max(0.0, w.at - acked) for w in everyone]),
                               "expected": waiting, "write_ms": round((acked - sent) * 1000, 2)}
        loop.run(crowd.aclose(), 60)
        remove_instances(ctx, loop, url, [item["id"] for item in base]
                         + ["bench-watch-one", "bench-watch-other", "bench-watch-all"])
    ctx.ui.log(f"  {held:,} reads held, {figures['bytes_per_watch']} bytes each; a write woke {len(mine)} "
               f"(p99 {figures['wake'].get('p99_ms')} ms), an irrelevant one {figures['irrelevant_wakes']}")
    return figures


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


# -- the thesis's tables on rings of 2 and 5 nodes (semreg bench cluster) ------------------------------------
from semreg.bench import thesis  # noqa: E402,F401  (registers `cluster` last; it uses the helpers above)
