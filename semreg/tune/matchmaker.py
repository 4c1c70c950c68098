"""Fit the learned matchmaker's weights (`semreg.registry.matchmaker`) on OWLS-TC 3's development half.

    python -m semreg.tune.matchmaker [--data DIR] [--floor F] [--write]

The collection (`semreg.bench.owlstc`; DIR defaults to the shared data's `owls-tc3`) is loaded in-process as
the `owlstc` bench loads a server: the domain ontologies into a reasoner, one instance per service with a tag
`(O sr:output)` per output class and `(I sr:input)` per input class. Each of the development half's requests is
asked as the bench asks it with `similar` (its outputs as `all`, its inputs as `provided`, `match=all,similar`),
through the registry's own conjunctive discovery, so each candidate's features are exactly those a server
computes. Its target is the request's graded judgement of the service (0-3; an unjudged service is 0), as
`target` reads it.

The model is a logistic regression on those fractional targets (cross-entropy, a small L2 penalty on the
weights but not the bias), fitted by Newton's method, each request weighing the same (its candidates' weights
sum to the same share: the request without outputs has ~950 candidates, a third of them all, and would
otherwise set the weights for the 13 others; `rows_of`). The fit is validated by leave-one-request-out
cross-validation within the half: each request ranked by the weights fitted on the other 13. Reported: binary
AP, graded (generalised) AP and nDCG of the ranking a server gives (degree first, then score), macro-averaged,
for the shipped weights, the fit on every request, and the cross-validation. `--write` writes the fit on
every request into `semreg/registry/matchmaker.json`.
"""
from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from semreg.bench import retrieval
from semreg.bench.owlstc import Collection, Request, ontology_ntriples, read_collection
from semreg.bench.scenarios import owlstc
from semreg.clock import FakeClock
from semreg.rdf import parsing
from semreg.rdf.terms import ANY, PrefixMap, Tag
from semreg.reasoning.matching import RANK
from semreg.reasoning.reasoner import Reasoner
from semreg.registry import conjunctive, matchmaker
from semreg.registry.conjunctive import Combined, ConjunctiveQuery
from semreg.registry.instances import Registration
from semreg.registry.query_params import conjunctive_query
from semreg.registry.registry import Registry

OUTPUT, INPUT = owlstc.OUTPUT, owlstc.INPUT
PENALTY = 0.001  # L2, per row, on the weights
VARIANT = "similar, provided"  # the bench's questions the fit reads
WEIGHTS = Path(matchmaker.__file__).with_name(matchmaker.WEIGHTS_FILE)


@dataclass(frozen=True)
class Candidate:
    service: str  # its file
    match: Combined
    target: float  # what the fit aims at (`target`)


@dataclass(frozen=True)
class Asked:
    """A request's candidates, ranked as a server ranks them, and its judgements."""

    request: str
    candidates: tuple[Candidate, ...]
    relevant: frozenset[str]
    grades: dict[str, int]


def registry_of(collection: Collection) -> Registry:
    """The collection as the `owlstc` bench registers it, in-process."""
    reasoner = Reasoner()
    reasoner.rebuild({f"owlstc-{p.stem}": parsing.parse(ontology_ntriples(p), "application/n-triples").triples
                      for p in collection.ontologies})
    registry = Registry(FakeClock())
    registry.catalogue.set_hierarchy(reasoner.hierarchy)
    registry.put_many(Registration(s.instance_id, "owlstc", "127.0.0.1", 9000, ttl_s=0.0,
                                   tags=tuple(Tag(o, OUTPUT, ANY) for o in s.outputs)
                                   + tuple(Tag(i, INPUT, ANY) for i in s.inputs))
                      for s in collection.services)
    return registry


def question(request: Request, variant: str, floor: float | None) -> ConjunctiveQuery:
    """A request as the `owlstc` bench asks it in `variant`, parsed as a server parses the body."""
    body = owlstc.question(request, variant)
    if floor is not None:
        body["min_similarity"] = floor
    return conjunctive_query(body, PrefixMap())


def target(grade: int) -> float:
    """What the fit aims at for a judged grade: being relevant counts half, the grade the other half (0, .67, .83,
    1): with the grade alone (0, .33, .67, 1) binary AP fell 0.005, with relevance alone graded AP 0.014 (the
    cross-validation, docs/design/benchmarks.md)."""
    return (0.5 if grade > 0 else 0.0) + grade / (2 * retrieval.TOP_GRADE)


def ask_all(collection: Collection, registry: Registry, floor: float | None) -> list[Asked]:
    by_id = {s.instance_id: s.file for s in collection.services}
    out = []
    for request in collection.requests:
        q = question(request, VARIANT, floor)
        result = conjunctive.merge(q, [conjunctive.part(registry.catalogue, registry.instances, q)])
        candidates = tuple(Candidate(by_id[inst.id], m, target(request.grades.get(by_id[inst.id], 0)))
                           for inst, m in zip(result.members, result.best) if isinstance(m, Combined))
        out.append(Asked(request.service.file, candidates, request.relevant, request.grades))
    return out


# -- the fit ---------------------------------------------------------------------------------------------
Row = tuple[Sequence[float], float, float]  # features, target, weight


def fit(rows: Sequence[Row], iterations: int = 30) -> matchmaker.Model:
    """Weighted logistic regression on fractional targets by Newton's method (L2 on the weights, not the bias,
    per unit of weight)."""
    k = len(matchmaker.FEATURES) + 1
    beta = [0.0] * k
    n = sum(weight for _, _, weight in rows)
    data = [((1.0, *x), y, weight) for x, y, weight in rows]
    for _ in range(iterations):
        grad = [0.0] * k
        hess = [[0.0] * k for _ in range(k)]
        for x, y, weight in data:
            z = sum(b * v for b, v in zip(beta, x))
            p = 1 / (1 + math.exp(-max(-60.0, min(60.0, z))))
            r, w = (p - y) * weight, p * (1 - p) * weight
            for i in range(k):
                grad[i] += r * x[i]
                wi = w * x[i]
                row = hess[i]
                for j in range(i, k):
                    row[j] += wi * x[j]
        for i in range(k):
            for j in range(i):
                hess[i][j] = hess[j][i]
        for i in range(1, k):
            grad[i] += PENALTY * n * beta[i]
            hess[i][i] += PENALTY * n
        hess[0][0] += 1e-9 * n
        step = _solve(hess, grad)
        beta = [b - s for b, s in zip(beta, step)]
        if max(map(abs, step)) < 1e-9:
            break
    return matchmaker.Model(round(beta[0], 4), tuple(round(b, 4) for b in beta[1:]))


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """a · x = b by Gaussian elimination with partial pivoting (a small, symmetric positive definite)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        pivot = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[pivot] = m[pivot], m[c]
        for r in range(c + 1, n):
            f = m[r][c] / m[c][c]
            for j in range(c, n + 1):
                m[r][j] -= f * m[c][j]
    x = [0.0] * n
    for r in range(n - 1, -1, -1):
        x[r] = (m[r][n] - sum(m[r][j] * x[j] for j in range(r + 1, n))) / m[r][r]
    return x


def rows_of(asked: Sequence[Asked]) -> list[Row]:
    """Each candidate's features and target, weighted so that each request's weights sum to the same (the mean
    number of candidates a request has): a request counts once, however many candidates it brings."""
    scored = [[c for c in a.candidates if c.match.signals is not None] for a in asked]
    mean = sum(map(len, scored)) / max(1, sum(1 for cs in scored if cs))
    return [(c.match.signals, c.target, mean / len(cs)) for cs in scored for c in cs if c.match.signals is not None]


# -- the measures ----------------------------------------------------------------------------------------
def ranking(asked: Asked, model: matchmaker.Model, across: bool = False) -> list[str]:
    """The services in the order a server ranks them with `model`: by degree, then score (as
    `semreg.registry.conjunctive.rank`); `across`: by score alone, degrees mixed."""
    def key(c: Candidate) -> tuple[int, float, int, str]:
        assert c.match.signals is not None
        score = model.score(c.match.signals)
        return 0 if across else RANK[c.match.degree], -score, c.match.distance, c.service

    return [c.service for c in sorted(asked.candidates, key=key)]


def measures(asked: Sequence[Asked], models: Sequence[matchmaker.Model], across: bool = False) -> dict[str, float]:
    """Binary AP, graded AP and nDCG, macro-averaged; `models[i]` ranks `asked[i]`."""
    binary, graded = [], []
    for a, model in zip(asked, models):
        ranked = ranking(a, model, across)
        binary.append(retrieval.binary(ranked, a.relevant))
        graded.append(retrieval.graded(ranked, a.grades))
    b, g = retrieval.macro(binary), retrieval.macro(graded)
    return {"AP": b["AP"], "R": b["R"], "graded AP": g["AP"], "nDCG": g["nDCG"]}


def cross_validated(asked: Sequence[Asked]) -> list[matchmaker.Model]:
    """Each request's model, fitted on the other requests."""
    return [fit(rows_of([b for b in asked if b is not a])) for a in asked]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m semreg.tune.matchmaker", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[3] / "shared" / "data" / "owls-tc3")
    parser.add_argument("--floor", type=float, default=None, help="min_similarity of the questions (default: the server's)")
    parser.add_argument("--write", action="store_true", help=f"write the fit into {WEIGHTS}")
    args = parser.parse_args(argv)
    collection = read_collection(args.data)
    asked = ask_all(collection, registry_of(collection), args.floor)
    shipped = matchmaker.shipped()
    fitted = fit(rows_of(asked))
    folds = cross_validated(asked)
    report = {"candidates": sum(len(a.candidates) for a in asked), "floor": args.floor,
              "shipped": measures(asked, [shipped] * len(asked)),
              "fitted": measures(asked, [fitted] * len(asked)),
              "cross-validated": measures(asked, folds),
              "fitted, degrees mixed": measures(asked, [fitted] * len(asked), across=True),
              "cross-validated, degrees mixed": measures(asked, folds, across=True),
              "model": fitted.as_json()}
    print(json.dumps(report, indent=2))
    if args.write:
        WEIGHTS.write_text(json.dumps(fitted.as_json(), indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
