"""The write scenarios: what registering and uploading cost.

    register-1000-tags  PUT of one instance with 1,000 tags, created then replaced
    closure             PUT of DBpedia's ontology beside schema.org's (the closure of both and the
                        indexes), then small ontologies (SOSA, FOAF) beside the two
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import httpx

from semreg.bench import stores
from semreg.bench.context import BenchContext, expect, server_timings
from semreg.bench.peers import BenchError
from semreg.bench.report import Target
from semreg.bench.scenarios.common import scenario, thousand_tags
from semreg.bench.stats import ms_summary

SCHEMAORG = "schemaorg-30.0-current-https.ttl"
DBPEDIA = "dbpedia-ontology-2026.08.20.ttl"
SOSA = "sosa-2017-04-17.n3"
FOAF = "foaf-0.99.n3"


# -- 3. registering one instance with 1,000 tags ----------------------------------------------------------


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
    first, second, small, foaf = closure_ontologies(ctx)
    names = ("bench-schemaorg", "bench-dbpedia", "bench-sosa", "bench-foaf")
    rounds = ctx.settings.closure_rounds
    with ctx.own_semreg() as url, ctx.client(url, timeout_s=300) as http:
        try:
            with ctx.ui.step(f"uploading {first.name}"):
                first_s, first_server = put_ontology(ctx, http, names[0], first)
            uploads, deletes, server = upload_rounds(ctx, http, names[1], second, rounds)
            listed = {item["name"]: item for item in expect(http.get("/v1/ontologies")).json()
                      if item.get("name") in names}
            # a small ontology beside the two large ones: what its upload and deletion cost
            small_uploads, small_deletes, small_server = upload_rounds(ctx, http, names[2], small, max(3, rounds),
                                                                       " beside them")
            with ctx.ui.step(f"uploading {foaf.name} beside them, then again ({max(3, rounds)} times)"):
                foaf_s, foaf_server = put_ontology(ctx, http, names[3], foaf)
                reuploads = [put_ontology(ctx, http, names[3], foaf)[0] for _ in range(max(3, rounds))]
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


def closure_ontologies(ctx: BenchContext) -> list[Path]:
    """schema.org's, DBpedia's, SOSA's and FOAF's ontologies in `--shared-data`; BenchError when one is missing."""
    paths = [ctx.settings.shared_data / f for f in (SCHEMAORG, DBPEDIA, SOSA, FOAF)]
    for path in paths:
        if not path.is_file():
            raise BenchError(f"{path} is missing; pass --shared-data DIR (the directory holding {SCHEMAORG}, "
                             f"{DBPEDIA}, {SOSA} and {FOAF})")
    return paths


def put_ontology(ctx: BenchContext, http: httpx.Client, name: str, path: Path) -> tuple[float, dict]:
    """Upload `path` as `name`: the seconds it took and what the server reported of its own timings."""
    body = path.read_bytes()
    started = time.perf_counter()
    response = expect(http.put(f"/v1/ontologies/{name}", content=body, headers={"Content-Type": "text/turtle"}),
                      200, 201)
    ctx.uploaded_ontologies.add(name)
    return time.perf_counter() - started, server_timings(response)


def delete_ontology(ctx: BenchContext, http: httpx.Client, name: str) -> float:
    started = time.perf_counter()
    expect(http.delete(f"/v1/ontologies/{name}"), 204)
    ctx.uploaded_ontologies.discard(name)
    return time.perf_counter() - started


def upload_rounds(ctx: BenchContext, http: httpx.Client, name: str, path: Path, rounds: int,
                  where: str = "") -> tuple[list[float], list[float], list[dict]]:
    """`rounds` uploads of `path` as `name`, deleted between two: the upload seconds, the delete seconds and
    the server's own timings of each upload."""
    uploads: list[float] = []
    deletes: list[float] = []
    server: list[dict] = []
    for n in range(rounds):
        if n:
            deletes.append(delete_ontology(ctx, http, name))
        with ctx.ui.step(f"uploading {path.name}{where} ({n + 1}/{rounds})"):
            elapsed, timings = put_ontology(ctx, http, name, path)
        uploads.append(elapsed)
        server.append(timings)
    return uploads, deletes, server
