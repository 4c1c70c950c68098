"""owlstc: service retrieval on OWLS-TC 3's development half, asked of a semreg server over HTTP.

The collection (`semreg.bench.owlstc`) sits beside the real ontologies (`--shared-data`/../owls-tc3). A fresh
server gets the domain ontologies (as N-Triples), one instance per service with a tag `(O sr:output)` per output
class and `(I sr:input)` per input class, then each of the 14 requests, once per variant:
- logic: `match=all`, one `GET /v1/discover` per output of the request (per input for the one request naming
  no output); an instance qualifies when it matches every one, its degree the worst, its distance the sum;
- similar: the same with `match=all,similar` (ranked after the logical matches, by similarity);
- similar+inputs: as similar, and within a degree the instances whose inputs are closest to the request's
  come first (one more discovery per request input, `(I sr:input)`, `match=all,similar`, read for ranking only).
Each variant reports P, R and AP macro-averaged for binary and graded relevance (`semreg.bench.retrieval`),
and the response time of the discoveries (median, p90).
"""
from __future__ import annotations

import time
from pathlib import Path

import httpx

from semreg.bench import retrieval
from semreg.bench.context import BenchContext, expect
from semreg.bench.owlstc import Collection, Request, ontology_ntriples, read_collection
from semreg.bench.peers import BenchError
from semreg.bench.report import Target
from semreg.bench.scenarios.common import register_batches, scenario
from semreg.bench.stats import ms_summary

SR = "https://w3id.org/semreg#"
OUTPUT, INPUT = SR + "output", SR + "input"
RANK = {"exact": 0, "narrower": 1, "broader": 2, "overlap": 3, "similar": 4}
VARIANTS = {"logic": "all", "similar": "all,similar", "similar+inputs": "all,similar"}
Key = tuple[int, float, int]  # (degree rank, −similarity, distance)


def collection_dir(ctx: BenchContext) -> Path:
    directory = ctx.settings.shared_data.parent / "owls-tc3"
    if not (directory / "owls-tc3-dev.xml").is_file():
        raise BenchError(f"{directory} holds no OWLS-TC 3 (owls-tc3-dev.xml); pass --shared-data DIR beside it")
    return directory


def load(ctx: BenchContext, http: httpx.Client, collection: Collection) -> None:
    with ctx.ui.step(f"uploading {len(collection.ontologies)} ontologies"):
        for path in collection.ontologies:
            expect(http.put(f"/v1/ontologies/owlstc-{path.stem}", content=ontology_ntriples(path),
                            headers={"Content-Type": "application/n-triples"}), 200, 201)
            ctx.uploaded_ontologies.add(f"owlstc-{path.stem}")
    items = [{"id": s.instance_id, "service": "owlstc", "address": "127.0.0.1", "port": 9000, "ttl": 0,
              "tags": [{"s": o, "p": OUTPUT} for o in s.outputs] + [{"s": i, "p": INPUT} for i in s.inputs]}
             for s in collection.services]
    with ctx.ui.step(f"registering {len(items)} services"):
        register_batches(ctx, http, items, 250)


def best_per_instance(http: httpx.Client, term: str, predicate: str, match: str, times: list[float]) -> dict[str, Key]:
    """One discovery: each instance's best match as a ranking key."""
    started = time.perf_counter()
    body = expect(http.get("/v1/discover", params={"s": term, "p": predicate, "match": match,
                                                   "limit": 100_000})).json()
    times.append(time.perf_counter() - started)
    return {view["id"]: (RANK[view["match"]["degree"]], -view["match"].get("similarity", 1.0),
                         view["match"]["distance"]) for view in body["instances"]}


def ask(http: httpx.Client, request: Request, variant: str, times: list[float]) -> list[str]:
    """The ranked instance ids of one request in one variant."""
    match = VARIANTS[variant]
    service = request.service
    patterns = [(o, OUTPUT) for o in service.outputs] or [(i, INPUT) for i in service.inputs]
    per = [best_per_instance(http, term, p, match, times) for term, p in patterns]
    inputs = ([best_per_instance(http, i, INPUT, match, times) for i in service.inputs]
              if variant == "similar+inputs" else [])
    ids = set(per[0]).intersection(*per[1:])

    def key(iid: str) -> tuple:
        degree = max(b[iid][0] for b in per)
        similarity = max(b[iid][1] for b in per)
        distance = sum(b[iid][2] for b in per)
        closeness = sum(b[iid][1] if iid in b else 0.0 for b in inputs) / max(1, len(inputs))
        return degree, closeness, similarity, distance, iid

    return sorted(ids, key=key)


def evaluate(ctx: BenchContext, http: httpx.Client, collection: Collection) -> dict:
    by_id = {s.instance_id: s.file for s in collection.services}
    figures: dict = {}
    for variant in VARIANTS:
        times: list[float] = []
        binary, graded = [], []
        with ctx.ui.step(f"asking {len(collection.requests)} requests ({variant})"):
            for request in collection.requests:
                ranked = [by_id[i] for i in ask(http, request, variant, times)]
                binary.append(retrieval.binary(ranked, request.relevant))
                graded.append(retrieval.graded(ranked, request.grades))
        summary = ms_summary(times)
        figures[variant] = {"binary": retrieval.macro(binary), "graded": retrieval.macro(graded), "discover": summary}
    return figures


def render(figures: dict) -> list[list[str]]:
    rows = [["variant", "P", "R", "AP", "graded P", "graded R", "graded AP", "discover median ms", "p90 ms"]]
    for variant in VARIANTS:
        f = figures.get(variant)
        if f:
            b, g, d = f["binary"], f["graded"], f["discover"]
            rows.append([variant, *(f"{b[k]:.3f}" for k in "PR"), f"{b['AP']:.3f}", *(f"{g[k]:.3f}" for k in "PR"),
                         f"{g['AP']:.3f}", str(d.get("median_ms")), str(d.get("p90_ms"))])
    return rows


@scenario("owlstc", "OWLS-TC 3 development half: P, R, AP (binary, graded) of the 14 requests asked over HTTP, logic "
          "alone and with similar; discovery time", render=render,
          targets=(Target("AP with similar", "similar+inputs.binary.AP", ">=", 0.80, ""),))
def owlstc(ctx: BenchContext) -> dict:
    collection = read_collection(collection_dir(ctx))
    with ctx.own_semreg() as url, ctx.client(url, timeout_s=300) as http:
        load(ctx, http, collection)
        return {"services": len(collection.services), "requests": len(collection.requests),
                **evaluate(ctx, http, collection)}
