"""The discovery scenarios: `GET /v1/discover` against what an etcd-based registry or a SPARQL store
would do for the same question.

    discovery       the data set's query, against etcd's range read of the same records, and narrowed
                    to another environment holding the same tags
    many-tags       the same with five 1,000-tag instances among the matches
    cold-discovery  a question never asked before on every request, against the same questions as
                    SPARQL on the Oxigraph server
"""
from __future__ import annotations

import random
import statistics
import time
from urllib.parse import urlencode

import httpx

from semreg.bench import stores, wrk
from semreg.bench.context import BenchContext, Load, expect
from semreg.bench.dataset import NS, class_iri, property_iri
from semreg.bench.peers import BenchError
from semreg.bench.report import Target
from semreg.bench.scenarios.common import SPARQL_JSON, register_batches, scenario
from semreg.bench.stats import ms_summary

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
SIMILAR_SAMPLE = 101  # new questions with match=all,similar, timed one at a time


def similar_questions(ctx: BenchContext, semreg: str, rng: random.Random) -> dict:
    """New questions naming `similar` (`match=all,similar`), one at a time, after a first one (timed apart: it
    builds the similarity index of the ontology, once per upload)."""
    data = ctx.dataset
    top = min(data.classes, 3000)
    questions = [(class_iri(rng.randrange(400, max(401, top))), property_iri(rng.randrange(data.properties)),
                  class_iri(rng.randrange(35, min(data.classes, 400)))) for _ in range(SIMILAR_SAMPLE + 1)]
    times, near = [], 0
    with ctx.client(semreg) as http, ctx.ui.step(f"asking {len(questions)} new questions with similar, one at a "
                                                 f"time", total=len(questions)) as advance:
        for s_, p_, o_ in questions:
            started = time.perf_counter()
            answer = expect(http.get("/v1/discover", params={"s": s_, "p": p_, "o": o_, "match": "all,similar"}))
            times.append(time.perf_counter() - started)
            near += any(m["degree"] == "similar" for m in answer.json()["matches"])
            advance()
    return {"similar_first_question_ms": round(times[0] * 1000, 2),
            "similar_one_at_a_time_ms": ms_summary(times[1:]), "similar_questions_with_near_misses": near}


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
                   Target("oxigraph SPARQL / semreg per question", "ratio_oxigraph_semreg_ms", ">=", 100.0),
                   Target("new question with similar, median", "similar_one_at_a_time_ms.median_ms", "<=", 10.0,
                          " ms")))
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
    similar = similar_questions(ctx, semreg, rng)
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
              "ratio_oxigraph_semreg_ms": round(oxigraph_median / semreg_median, 1), **similar}
    if agree != len(sample):
        result["warning"] = f"semreg and the SPARQL formulation disagree on {len(sample) - agree} questions"
        ctx.ui.log(f"[yellow]  warning: {result['warning']}")
    return result
