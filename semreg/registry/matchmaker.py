"""The learned matchmaker: how a conjunctive question asked with `similar` weighs its signals into one score.

As iSeM does, each candidate (an instance matching every pattern, logically or as similar) is described by
signals, and a logistic model fitted offline on OWLS-TC 3's graded judgements turns them into a score in
[0, 1] that ranks the instances within a degree (`semreg.registry.conjunctive.rank`):
- the logical degree of the conjunction (its worst: narrower, broader, overlap or similar, one-hot; exact is
  the reference) and its summed distance (as log(1 + distance / patterns));
- per pattern, the signals of its matched tag against it (`semreg.reasoning.signals`: text
  similarity of the unfolded definitions, structural similarity over the closure, and the approximated
  subsumption, what of either concept's definition is given up or assumed), averaged over the patterns; a
  tag's are its components' weakest (the least text and structure, the most given up and assumed);
- with `provided`, how well the caller's tags fit the instance's needs (`semreg.registry.closeness`) and
  whether they cover them as the logical rule asks (`semreg.registry.conjunctive.covered`); a question without
  `provided` has 1 for both (a constant within a question changes no ranking);
- what the instance offers beyond the question (`unasked`): how many of its tags are neither the match of a
  pattern nor needed by a provided tag (as log(1 + n)): a service that returns a price, a review and a book
  answers a question for a book less directly than one that returns the book.
The weights are data shipped in the package (`matchmaker.json`, written by `python -m semreg.tune.matchmaker`,
which fits them on the development half only and reports the leave-one-request-out cross-validation of the
fit); nothing is fetched at run time. An answer's match carries its `score` and the `signals` it was scored on
(each times its weight is its part of the score's logit).
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from semreg.rdf.terms import Tag
from semreg.reasoning.matching import BROADER, NARROWER, OVERLAP, SIMILAR
from semreg.reasoning.signals import SAME, Signals, signals
from semreg.reasoning.similarity import TEXT_WEIGHT, SimilarityIndex
from semreg.registry.closeness import stands_for

DEGREE_FEATURES = (NARROWER, BROADER, OVERLAP, SIMILAR)
SIGNALS = ("text", "structure", "given_up", "assumed")
FEATURES = (*DEGREE_FEATURES, "distance", *SIGNALS, "provided", "covered", *(f"input_{name}" for name in SIGNALS),
            "unasked")
WEIGHTS_FILE = "matchmaker.json"

Features = tuple[float, ...]  # in the order of FEATURES


@dataclass(frozen=True)
class Model:
    """A logistic model over `FEATURES`: score = σ(bias + Σ weight · feature)."""

    bias: float
    weights: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.weights) != len(FEATURES):
            raise ValueError(f"a matchmaker model has {len(FEATURES)} weights, not {len(self.weights)}")

    def score(self, x: Features) -> float:
        z = self.bias + sum(w * v for w, v in zip(self.weights, x))
        return round(1 / (1 + math.exp(-max(-60.0, min(60.0, z)))), 4)

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Model:
        weights = data["weights"]
        if not isinstance(weights, Mapping) or set(weights) != set(FEATURES):
            raise ValueError(f"a matchmaker model names the weights of {', '.join(FEATURES)}")
        bias = data["bias"]
        if not isinstance(bias, int | float):
            raise ValueError("a matchmaker model's bias is a number")
        return cls(float(bias), tuple(float(weights[name]) for name in FEATURES))

    def as_json(self) -> dict[str, object]:
        return {"bias": self.bias, "weights": dict(zip(FEATURES, self.weights))}


@cache
def shipped() -> Model:
    """The model shipped with semreg (`semreg/registry/matchmaker.json`)."""
    text = resources.files("semreg.registry").joinpath(WEIGHTS_FILE).read_text(encoding="utf-8")
    return Model.from_json(json.loads(text))


def tag_signals(index: SimilarityIndex, tag: Tag, pattern: Tag) -> Signals:
    """A registered tag's signals against a pattern: its components' weakest."""
    return reading(index, tag, pattern)[0]


def reading(index: SimilarityIndex, tag: Tag, pattern: Tag) -> tuple[Signals, float]:
    """A registered tag's signals against a pattern (`tag_signals`) and its similarity, the least of its
    components' (`semreg.registry.closeness.tag_similarity`), from the same figures."""
    found = [signals(index, q, r) for r, q in zip(tag, pattern) if r != q]
    if not found:
        return SAME, 1.0
    return (Signals(min(s.text for s in found), min(s.structure for s in found), max(s.given_up for s in found),
                    max(s.assumed for s in found)),
            min(1.0 if s is SAME else round(TEXT_WEIGHT * s.text + (1 - TEXT_WEIGHT) * s.structure, 3) for s in found))


def need(index: SimilarityIndex, tag: Tag, provided: Sequence[Tag]) -> Signals | None:
    """When an instance's tag is needed (a provided tag stands for it, `semreg.registry.closeness.stands_for`),
    the signals of the provided tag that fits it best (the most text and structure): the need is asked, the
    provided tag answers; None when it is not needed."""
    found = [tag_signals(index, given, tag) for given in provided if stands_for(given, tag, index.hierarchy)]
    return max(found, key=lambda s: (s.text + s.structure, -s.given_up)) if found else None


def _mean(signals: Sequence[Signals]) -> tuple[float, float, float, float]:
    n = len(signals)
    if n == 1:
        s = signals[0]
        return s.text, s.structure, s.given_up, s.assumed
    if not n:
        return 1.0, 1.0, 0.0, 0.0
    return (sum([s.text for s in signals]) / n, sum([s.structure for s in signals]) / n,
            sum([s.given_up for s in signals]) / n, sum([s.assumed for s in signals]) / n)


def features(degree: str, distance: int, signals: Sequence[Signals], provided: float | None,
             covered: bool | None, inputs: Sequence[Signals] = (), unasked: int = 0) -> Features:
    """A candidate's features: its conjunction's degree and distance, its patterns' signals (one per pattern),
    how `provided` fits it (None: the question has no `provided`), the signals of what it needs against what
    is provided (`need`; none: nothing needed, or no `provided`) and how many of its tags the question neither
    asks nor provides for (`unasked`)."""
    n = len(signals)
    return (*(1.0 if degree == d else 0.0 for d in DEGREE_FEATURES), math.log1p(distance / n), *_mean(signals),
            1.0 if provided is None else provided, 1.0 if covered is None or covered else 0.0, *_mean(inputs),
            math.log1p(unasked))
