"""The OWL 2 positive entailment tests that apply to OWL 2 RL, read from `shared/data/owl2-tests/`, and
the check that a closure entails a conclusion.

Two suites:
- `owl2rl/`: Schneider and Mainzer's OWL 2 RL/RDF sub-suite (`manifest.json`: id, type, regimes), one
  premise and one conclusion in Turtle per test; every `POSITIVE_ENTAILMENT` test applies.
- `w3c/`: the W3C OWL 2 test cases (`manifest.json` as the test ontology describes each case); a
  `PositiveEntailmentTest` applies when its profiles include RL and its semantics the RDF-based one (the
  one the RL/RDF rules are sound for), with its premise and conclusion in RDF/XML (and the documents the
  premise imports).

A closure entails a conclusion when some mapping of the conclusion's blank nodes (existential
variables) to terms of the closure puts every conclusion triple in the closure.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyoxigraph as ox

from support.paths import DATA

SUITE = DATA / "owl2-tests"
Term = ox.NamedNode | ox.BlankNode | ox.Literal
Triple = tuple[Term, Term, Term]


@dataclass(frozen=True)
class EntailmentTest:
    suite: str  # "owl2rl" or "w3c"
    id: str
    description: str
    premises: tuple[Path, ...]  # the premise, then the documents it imports
    conclusion: Path

    @property
    def format(self) -> ox.RdfFormat:
        return ox.RdfFormat.TURTLE if self.conclusion.suffix == ".ttl" else ox.RdfFormat.RDF_XML

    @property
    def rdflib_format(self) -> str:
        return "turtle" if self.conclusion.suffix == ".ttl" else "xml"

    def __str__(self) -> str:
        return f"{self.suite}/{self.id}"


def owl2rl_tests(root: Path = SUITE / "owl2rl") -> list[EntailmentTest]:
    entries = json.loads((root / "manifest.json").read_text())
    return [EntailmentTest("owl2rl", e["id"], e["description"], (root / f"{e['id']}.premise.ttl",),
                           root / f"{e['id']}.conclusion.ttl")
            for e in entries if e["type"] == "POSITIVE_ENTAILMENT"]


def w3c_tests(root: Path = SUITE / "w3c") -> list[EntailmentTest]:
    """The RL positive entailment tests under the RDF-based semantics; those without RDF/XML files (a
    few are only in the functional syntax) are not applicable here, and `w3c_without_rdf` names them."""
    out = []
    for e in _w3c_rl_entailments(root):
        if e.get("rdfxml_premise") and e.get("rdfxml_conclusion") and "file" in e:
            imports = tuple(root / f for f in e.get("import_files", []))
            out.append(EntailmentTest("w3c", e["id"], e["description"], (root / f"{e['file']}.premise.rdf", *imports),
                                      root / f"{e['file']}.conclusion.rdf"))
    return out


def w3c_without_rdf(root: Path = SUITE / "w3c") -> list[str]:
    return [e["id"] for e in _w3c_rl_entailments(root)
            if not (e.get("rdfxml_premise") and e.get("rdfxml_conclusion") and "file" in e)]


def _w3c_rl_entailments(root: Path) -> list[dict]:
    entries = json.loads((root / "manifest.json").read_text())
    return [e for e in entries if "PositiveEntailmentTest" in e["types"] and "RL" in e["profile"]
            and "RDF-BASED" in e["semantics"]]


def read(path: Path, fmt: ox.RdfFormat, tag: str = "") -> list[Triple]:
    """The triples of one document; blank nodes renamed apart by `tag` (one per document)."""
    def rename(t):
        return ox.BlankNode(f"{tag}{t.value}") if isinstance(t, ox.BlankNode) and tag else t

    base = path.resolve().as_uri()
    return [(rename(q.subject), q.predicate, rename(q.object)) for q in ox.parse(path=str(path), format=fmt, base_iri=base)]


def premises(test: EntailmentTest) -> list[Triple]:
    out: list[Triple] = []
    for n, path in enumerate(test.premises):
        out += read(path, test.format, f"p{n}x")
    return out


def entails(closure: Iterable[Triple], conclusion: list[Triple]) -> bool:
    """Some mapping of the conclusion's blank nodes puts all of it in `closure` (a backtracking search)."""
    have = set(closure)
    by_predicate: dict[Term, list[Triple]] = {}
    for t in have:
        by_predicate.setdefault(t[1], []).append(t)
    # the most constrained triples first: fewer blank nodes
    todo = sorted(conclusion, key=lambda t: sum(isinstance(x, ox.BlankNode) for x in t))

    def solve(i: int, binding: dict[Term, Term]) -> bool:
        if i == len(todo):
            return True
        triple = todo[i]
        pattern = tuple(binding.get(x, x) for x in triple)
        if not any(isinstance(x, ox.BlankNode) and x not in binding for x in triple):
            return pattern in have and solve(i + 1, binding)
        for candidate in by_predicate.get(pattern[1], ()):
            extended = dict(binding)
            if all(_unify(x, c, extended) for x, c in zip(triple, candidate)):
                if solve(i + 1, extended):
                    return True
        return False

    return solve(0, {})


def _unify(x: Term, term: Term, binding: dict[Term, Term]) -> bool:
    """Bind `x` (a conclusion term) to `term` when `x` is a blank node, else require them equal."""
    if isinstance(x, ox.BlankNode):
        bound = binding.setdefault(x, term)
        return bound == term
    return x == term


def conclusion(test: EntailmentTest) -> list[Triple]:
    """The conclusion; its blank nodes are the variables of `entails`."""
    return read(test.conclusion, test.format, "c")
