"""The benchmark scenarios. Each is `fn(ctx) -> dict of figures`, registered with `@scenario`.

Figures: numbers (or small dicts/lists of numbers) by name; wrk results under `"peers"` by label; a
scenario that compares servers reports a ratio. Targets (`Target`) are checked by the runner and
shown, never asserted. To add a scenario, write a function here (or in a module imported by
`semreg.bench`) and decorate it; `--only NAME` selects it.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from semreg.bench import stores
from semreg.bench.context import BenchContext, Load, expect, server_timings
from semreg.bench.dataset import class_iri, property_iri
from semreg.bench.peers import BenchError
from semreg.bench.report import Target

SCHEMAORG = "schemaorg-30.0-current-https.ttl"
DBPEDIA = "dbpedia-ontology-2026.08.20.ttl"
SPARQL_JSON = "application/sparql-results+json"


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[BenchContext], dict]
    summary: str
    needs: tuple[str, ...] = ()  # tools besides semreg: "wrk", "etcd", "oxigraph"
    targets: tuple[Target, ...] = ()


SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str, summary: str, *, needs: tuple[str, ...] = (), targets: tuple[Target, ...] = ()):
    def register(fn: Callable[[BenchContext], dict]) -> Callable[[BenchContext], dict]:
        SCENARIOS[name] = Scenario(name, fn, summary, needs, targets)
        return fn
    return register


def ms_summary(samples_s: list[float]) -> dict:
    """Median, p90, min and max of durations in seconds, as milliseconds."""
    ms = sorted(s * 1000.0 for s in samples_s)
    p90 = ms[max(0, -(-len(ms) * 9 // 10) - 1)]  # nearest rank
    return {"median_ms": round(statistics.median(ms), 2), "p90_ms": round(p90, 2), "min_ms": round(ms[0], 2),
            "max_ms": round(ms[-1], 2), "n": len(ms)}


# -- 1. discovery against an etcd prefix read of the same records -----------------------------------------
@scenario("discovery", "GET /v1/discover answered by reasoning vs etcd's range read of the same records",
          needs=("wrk", "etcd"),
          targets=(Target("semreg/etcd req/s", "ratio_semreg_etcd", ">=", 2.0),
                   Target("semreg p99", "peers.semreg.p99_ms", "<=", 10.0, "ms")))
def discovery(ctx: BenchContext) -> dict:
    figures = {**ctx.ensure_ontology(), **ctx.ensure_instances()}
    data = ctx.dataset
    query = data.discovery_query()
    url = ctx.semreg() + "/v1/discover?" + urlencode(query)
    with ctx.client(ctx.semreg()) as http:
        response = expect(http.get(url))
    views = response.json().get("instances", [])
    got, want = {view.get("id") for view in views}, data.expected_answer_ids()
    if got != want:
        raise BenchError(f"the discovery query {query} answered {len(got)} instances, {len(got & want)} of the "
                         f"{len(want)} expected (missing e.g. {sorted(want - got)[:3]}, extra {sorted(got - want)[:3]})")
    ctx.ui.log(f"  the query answers {len(views)} instances as expected ({len(response.content):,} bytes)")
    etcd = ctx.etcd()
    with ctx.ui.step(f"storing the {len(views)} instance views in etcd"):
        prefix = stores.etcd_put_views(etcd, "/semreg-bench/discovery/", views)
    results = ctx.measure([
        Load("semreg", url),
        Load("etcd-range", etcd + "/v3/kv/range", "POST", stores.etcd_range_body(prefix),
             {"Content-Type": "application/json"}),
        Load("etcd-get", etcd + "/v3/kv/range", "POST", stores.etcd_get_body(prefix + views[0]["id"]),
             {"Content-Type": "application/json"}),
    ])
    return {"query": query, "answer_instances": len(views), "semreg_response_bytes": len(response.content),
            "etcd_range_values_bytes": sum(len(stores.json_bytes(v)) for v in views), **figures,
            "peers": results,
            "ratio_semreg_etcd": round(results["semreg"]["requests_per_s"] / results["etcd-range"]["requests_per_s"], 3)}


# -- 2. a one-pattern SPARQL query against the Oxigraph server --------------------------------------------
@scenario("sparql", "one-pattern SELECT on /sparql vs the Oxigraph server holding the same graphs",
          needs=("wrk", "oxigraph"),
          targets=(Target("semreg/oxigraph req/s", "ratio_semreg_oxigraph", ">=", 0.5),))
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
    result = {"query": query, "rows": rows, "graphs_copied": copied, **figures}
    if rows["semreg"] != rows["oxigraph"]:
        result["warning"] = f"the two servers answer different row counts: {rows}"
        ctx.ui.log(f"[yellow]  warning: {result['warning']}")
    peers = ctx.measure([Load("semreg", semreg_url, headers=headers), Load("oxigraph", oxigraph_url, headers=headers)])
    return {**result, "peers": peers,
            "ratio_semreg_oxigraph": round(peers["semreg"]["requests_per_s"] / peers["oxigraph"]["requests_per_s"], 3)}


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
    created, replaced, statuses, body_bytes = [], [], {}, 0
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


# -- 4. the closure of two real ontologies -----------------------------------------------------------------
@scenario("closure", "PUT of DBpedia's ontology beside schema.org's: closure of both and indexes",
          targets=(Target("second upload median", "second_upload.median_ms", "<=", 2000.0, "ms"),))
def closure(ctx: BenchContext) -> dict:
    first, second = ctx.settings.shared_data / SCHEMAORG, ctx.settings.shared_data / DBPEDIA
    for path in (first, second):
        if not path.is_file():
            raise BenchError(f"{path} is missing; pass --shared-data DIR (the directory holding {SCHEMAORG} "
                             f"and {DBPEDIA})")
    names = ("bench-schemaorg", "bench-dbpedia")
    with ctx.own_semreg() as url, ctx.client(url, timeout_s=300) as http:
        def put(name: str, path: Path) -> tuple[float, dict]:
            body = path.read_bytes()
            started = time.perf_counter()
            response = expect(http.put(f"/v1/ontologies/{name}", content=body, headers={"Content-Type": "text/turtle"}),
                              200, 201)
            ctx.uploaded_ontologies.add(name)
            return time.perf_counter() - started, server_timings(response)

        uploads, deletes, server = [], [], []
        try:
            with ctx.ui.step(f"uploading {first.name}"):
                first_s, first_server = put(names[0], first)
            for n in range(ctx.settings.closure_rounds):
                if n:
                    started = time.perf_counter()
                    expect(http.delete(f"/v1/ontologies/{names[1]}"), 204)
                    deletes.append(time.perf_counter() - started)
                with ctx.ui.step(f"uploading {second.name} ({n + 1}/{ctx.settings.closure_rounds})"):
                    elapsed, timings = put(names[1], second)
                uploads.append(elapsed)
                server.append(timings)
            listed = {item["name"]: item for item in expect(http.get("/v1/ontologies")).json()
                      if item.get("name") in names}
        finally:
            for name in names:  # an external server keeps only what it had; a fresh one is stopped anyway
                if ctx.external and name in ctx.uploaded_ontologies:
                    http.delete(f"/v1/ontologies/{name}")
                ctx.uploaded_ontologies.discard(name)
    figures = {"first_upload": {"ms": round(first_s * 1000, 1), **first_server},
               "second_upload": ms_summary(uploads), "ontologies": listed}
    if deletes:
        figures["delete_second"] = ms_summary(deletes)
    for key in sorted({key for timings in server for key in timings}):  # e.g. server_reasoning_ms
        figures["second_upload"][key] = statistics.median(t[key] for t in server if key in t)
    return figures
