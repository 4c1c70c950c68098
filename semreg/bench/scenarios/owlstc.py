"""owlstc: service retrieval on OWLS-TC 3's development half, asked of a semreg server over HTTP.

The collection (`semreg.bench.owlstc`) sits beside the real ontologies (`--shared-data`/../owls-tc3). A fresh
server gets the domain ontologies (as N-Triples), one instance per service with a tag `(O sr:output)` per output
class and `(I sr:input)` per input class, then each of the 14 requests as one `POST /v1/discover`: `all` holds
its outputs as `(O sr:output)`, once per variant:
- logic: `match=all`; an instance answers when it matches every pattern, at the worst degree and summed distance;
- logic, provided: the same with the request's inputs as `provided`, `(I sr:input)`: OWLS-MX's input rule (every
  input of the service covered by one of the request's) as a filter;
- similar: `match=all,similar` (near misses after the logical degrees; within a degree by the learned
  matchmaker's score, `semreg.registry.matchmaker`);
- similar, provided: with `similar`, `provided` ranks instead of filtering (`semreg.registry.closeness`), and is
  among the matchmaker's signals;
- similar, provided, by score: the same with `rank=score`: by the matchmaker's score alone, the degrees mixed;
- similar >= 0.1, provided, by score: the same with `min_similarity` 0.1 instead of the default 0.3 (`FLOORS`):
  more near misses, which the matchmaker ranks.
The one request naming no output (it asks which services its inputs can feed) asks for `(sr:Any sr:input)`, any
service taking an input, with its inputs as `provided` (`INPUTS_ONLY`). Until the matchmaker it asked for its
inputs as `all`, which only the services taking every one of them match; docs/design/benchmarks.md has the
figures of both forms.
Each variant reports P, R and AP macro-averaged for binary relevance, graded P, R, AP and nDCG
(`semreg.bench.retrieval`), and the response time of the questions (median, p90).
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
# variant → (match, whether the request's inputs go as provided)
VARIANTS = {"logic": ("all", False), "logic, provided": ("all", True), "similar": ("all,similar", False),
            "similar, provided": ("all,similar", True), "similar, provided, by score": ("all,similar", True),
            "similar >= 0.1, provided, by score": ("all,similar", True)}
BY_SCORE = frozenset({"similar, provided, by score", "similar >= 0.1, provided, by score"})
FLOORS = {"similar >= 0.1, provided, by score": 0.1}  # variant → min_similarity, when not the server's default
ANY = SR + "Any"
INPUTS_ONLY = [{"s": ANY, "p": INPUT}]  # a request naming no output: any service taking an input


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


def question(request: Request, variant: str) -> dict:
    """A request as one `POST /v1/discover`: its outputs as `all` (`INPUTS_ONLY`, for a request naming no output,
    with its inputs as `provided` in every variant), its inputs as `provided` in the variants that give them."""
    match, with_inputs = VARIANTS[variant]
    service = request.service
    body: dict = {"all": [{"s": o, "p": OUTPUT} for o in service.outputs] or INPUTS_ONLY, "match": match,
                  "limit": 100_000}
    if (with_inputs or not service.outputs) and service.inputs:
        body["provided"] = [{"s": i, "p": INPUT} for i in service.inputs]
    if variant in BY_SCORE:
        body["rank"] = "score"
    if variant in FLOORS:
        body["min_similarity"] = FLOORS[variant]
    return body


def ask(http: httpx.Client, request: Request, variant: str, times: list[float]) -> list[str]:
    """The ranked instance ids of one request in one variant."""
    started = time.perf_counter()
    answer = expect(http.post("/v1/discover", json=question(request, variant))).json()
    times.append(time.perf_counter() - started)
    return [view["id"] for view in answer["instances"]]


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
    rows = [["variant", "P", "R", "AP", "graded P", "graded R", "graded AP", "nDCG", "discover median ms", "p90 ms"]]
    for variant in VARIANTS:
        f = figures.get(variant)
        if f:
            b, g, d = f["binary"], f["graded"], f["discover"]
            rows.append([variant, *(f"{b[k]:.3f}" for k in "PR"), f"{b['AP']:.3f}", *(f"{g[k]:.3f}" for k in "PR"),
                         f"{g['AP']:.3f}", f"{g['nDCG']:.3f}", str(d.get("median_ms")), str(d.get("p90_ms"))])
    return rows


@scenario("owlstc", "OWLS-TC 3 development half: P, R, AP (binary, graded) of the 14 requests asked over HTTP, logic "
          "alone and with similar; discovery time", render=render,
          targets=(Target("AP with similar", "similar, provided.binary.AP", ">=", 0.80, ""),
                   Target("AP by score", "similar, provided, by score.binary.AP", ">=", 0.90, "")))
def owlstc(ctx: BenchContext) -> dict:
    collection = read_collection(collection_dir(ctx))
    with ctx.own_semreg() as url, ctx.client(url, timeout_s=300) as http:
        load(ctx, http, collection)
        return {"services": len(collection.services), "requests": len(collection.requests),
                **evaluate(ctx, http, collection)}
