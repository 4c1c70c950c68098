"""How close two concepts are in meaning when logic relates them not at all: the measure of the `similar` degree.

similarity(a, b) = TEXT_WEIGHT · cos(a, b) + (1 − TEXT_WEIGHT) · wu_palmer(a, b), in [0, 1]; 1 for equivalent
terms.
- cos: TF-IDF cosine of the two concepts' unfolded definitions: the words of the local name (split at
  camelCase, underscores, hyphens and digits), of the label (half weight) and of every ancestor's local name
  (as many as there are ancestors: the definition unfolds what the concept is a kind of; owl:Thing, above
  every class, says nothing and is left out, here and in the structure). IDF is
  log((1 + N) / (1 + df)) over the N terms of the hierarchy.
- wu_palmer: 2 · depth(lcs) / (depth(a) + depth(b)) over the closure, where depth(x) is 1 + the number of
  x's ancestors and lcs the deepest common ancestor (0 when there is none).
Chosen on OWLS-TC 3's development half (docs/design/benchmarks.md): text alone reached AP .747, structure alone .740,
this mix .748 with a floor of 0.3 and .80 with the requests' inputs ranked in (the `owlstc` bench).

`SimilarityIndex` is built per hierarchy (per ontology upload) and lazily: the vectors are computed at the first
question that names `similar` (`prepare`, which a server runs on a worker thread: the hierarchy changes no more),
so an upload and every logical question cost what they did. It answers, for a queried term, the terms of a given
set at or above a floor, best first, at most `TOP_K` (the catalogue's registered terms at a position),
remembering the answers (`CACHE_SIZE`). Candidates come from postings (word → terms), never from scoring every
term: the hierarchy's own, and for the terms no ontology names, an index of their names' words that the caller
keeps as it registers them (`name_words`); what is looked at and scored is reported to `spend`, which a server
charges to the question's budget (and where it hands the event loop back: this module stays pure).
"""
from __future__ import annotations

import math
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from semreg.rdf.terms import ANY
from semreg.rdf.terms import split_iri as _split
from semreg.reasoning.hierarchy import THING, Hierarchy

TEXT_WEIGHT = 0.7
LABEL_WEIGHT = 0.5
TOP_K = 200
CACHE_SIZE = 4096
SKIP_POSTINGS = 256  # a word of more terms than this may be left out of a candidate search ...
SKIPPED_TEXT = 0.01  # ... while the cosine all such words could add stays under this
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=[0-9])|(?<=[0-9])(?=[A-Za-z])")
_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")

Vector = dict[str, float]
Spend = Callable[[int], None]  # told how many terms were looked at or scored (a budget; may pause the work)
Words = Mapping[str, Collection[str]]  # word → the terms no ontology names whose name has it
SPEND_EVERY = 256  # terms scored between two reports to `spend`


def _free(n: int) -> None:
    """Work not accounted for (a caller without a budget)."""


def words(name: str) -> list[str]:
    """A name's words, lower case: `ScienceFictionBook2` → science, fiction, book, 2."""
    return [w.lower() for part in _SEPARATORS.split(name) for w in _CAMEL.split(part) if w]


def local_name(iri: str) -> str:
    return _split(iri)[1]


def name_words(iri: str) -> set[str]:
    """The words of a term's name: what a term no ontology names is found by (`Words`)."""
    return set(words(local_name(iri)))


def known(hierarchy: Hierarchy, term: str) -> bool:
    """Whether the ontologies name `term` (it has a vector of its own; the others are scored by their name)."""
    return term in hierarchy.kinds or term in hierarchy.rep


@dataclass(frozen=True)
class Explanation:
    """Why two terms are close: the words they share (heaviest first), their deepest common ancestor, the parts."""

    similarity: float
    text: float
    structure: float
    shared_words: tuple[str, ...]
    common_ancestor: str | None
    given_up: float = 0.0
    assumed: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {"similarity": self.similarity, "text": self.text, "structure": self.structure,
                "given_up": self.given_up, "assumed": self.assumed,
                "shared_words": list(self.shared_words), "common_ancestor": self.common_ancestor}


class SimilarityIndex:
    def __init__(self, hierarchy: Hierarchy, basis: SimilarityIndex | None = None) -> None:
        self.hierarchy = hierarchy
        # a built index of an earlier hierarchy, whose documents, ancestor sets and vectors the build reuses where
        # they cannot have changed (`_build`); dropped once built
        self._basis = basis
        self._docs: dict[str, dict[str, float]] = {}
        self._df: Counter[str] = Counter()
        self._vectors: dict[str, Vector] | None = None
        self._idf: dict[str, float] = {}
        self._cache: OrderedDict[tuple[str, Hashable, float], list[tuple[str, float]]] = OrderedDict()
        self._above: dict[str, frozenset[str]] = {}
        self._words: dict[str, list[tuple[str, float]]] | None = None
        self._below: dict[str, list[str]] = {}
        self._depths: dict[str, int] = {}
        self._heaviest: dict[str, float] = {}
        self._outside: dict[Hashable, frozenset[str]] = {}
        self._building = threading.RLock()

    def prepare(self) -> None:
        """Build the vectors and the postings now (once; a second caller waits for the first): the part of the
        first `similar` question that grows with the ontologies, for a worker thread."""
        self._postings()

    # -- the measure --------------------------------------------------------------------------------------
    def vectors(self) -> dict[str, Vector]:
        if self._vectors is None:
            with self._building:
                if self._vectors is None:
                    self._vectors = self._build()
        return self._vectors

    def _document(self, term: str) -> dict[str, float]:
        h = self.hierarchy
        doc: dict[str, float] = {}
        label = h.labels.get(term)
        # ancestors in IRI order: one order of words whatever hierarchy made it, so sums over it agree to the last bit
        parts = [(local_name(term), 1.0), *(((label, LABEL_WEIGHT),) if label else ()),
                 *((local_name(a), 1.0) for a in sorted(h.ancestors(term)) if a != THING)]
        for text, weight in parts:
            for w in words(text):
                doc[w] = doc.get(w, 0.0) + weight
        return doc

    def _build(self) -> dict[str, Vector]:
        h = self.hierarchy
        basis, self._basis = self._basis, None
        terms = set(h.kinds) | set(h.rep)
        if basis is None or basis._vectors is None:
            docs = {t: self._document(t) for t in terms}
            df: Counter[str] = Counter(w for d in docs.values() for w in d)
            n = len(docs)
            self._idf = {w: math.log((1 + n) / (1 + k)) for w, k in df.items()}
            self._docs, self._df = docs, df
            return {t: _normalised({w: tf * self._idf[w] for w, tf in d.items()}) for t, d in docs.items()}
        return self._build_from(basis, terms)

    def _build_from(self, basis: SimilarityIndex, terms: set[str]) -> dict[str, Vector]:
        """What `_build` builds, from an index of an earlier hierarchy: a term's document (and the set of it and
        its ancestors) is the earlier one when its label, its class's representative and the classes above it
        (with their members) are the same; its vector is the earlier one when, besides, the number of terms and
        the document frequency of each of its words are the same. Everything else is computed as `_build` does,
        so the result is exactly a rebuild's (tests/reasoning/test_similarity.py checks it)."""
        h, old = self.hierarchy, basis.hierarchy
        assert basis._vectors is not None
        regrouped = {r for r in h.members.keys() | old.members.keys()
                     if (m := h.members.get(r)) is not (m0 := old.members.get(r)) and m != m0}
        old_docs, old_above = basis._docs, basis._above
        docs: dict[str, dict[str, float]] = {}
        df = Counter(basis._df)
        same: set[str] = set()
        for t in terms:
            found = old_docs.get(t)
            if found is not None and self._as_before(t, old, regrouped):
                docs[t] = found
                same.add(t)
                above = old_above.get(t)
                if above is not None:
                    self._above[t] = above
                continue
            if found is not None:
                df.subtract(found.keys())
            docs[t] = found = self._document(t)
            df.update(found.keys())
        for t in old_docs.keys() - terms:
            df.subtract(old_docs[t].keys())
        df = +df  # the words no document has any more go
        n, n_before = len(docs), len(old_docs)
        changed_words = {w for w in df.keys() | basis._df.keys() if df.get(w) != basis._df.get(w)}
        idf = self._idf = {w: basis._idf[w] if n == n_before and w not in changed_words else
                           math.log((1 + n) / (1 + k)) for w, k in df.items()}
        self._docs, self._df = docs, df
        vectors: dict[str, Vector] = {}
        for t, d in docs.items():
            if n == n_before and t in same and changed_words.isdisjoint(d):
                vectors[t] = basis._vectors[t]
            else:
                vectors[t] = _normalised({w: tf * idf[w] for w, tf in d.items()})
        return vectors

    def _as_before(self, term: str, old: Hierarchy, regrouped: set[str]) -> bool:
        """Whether `term`'s document is what it was in `old` (its label, representative and the classes above it,
        none of them `regrouped`: of other members now)."""
        h = self.hierarchy
        if h.labels.get(term) != old.labels.get(term):
            return False
        r = h.canon(term)
        if r != old.canon(term):
            return False
        up, up_before = h.up.get(r), old.up.get(r)
        if up is not up_before and up != up_before:
            return False
        return not up or regrouped.isdisjoint(up)

    def vector(self, term: str) -> Vector:
        found = self.vectors().get(term)
        if found is None:  # a term no ontology names: its name alone
            found = _normalised({w: tf * self._idf.get(w, 0.0) for w, tf in Counter(words(local_name(term))).items()})
        return found

    def text(self, a: str, b: str) -> float:
        va, vb = self.vector(a), self.vector(b)
        if len(va) > len(vb):
            va, vb = vb, va
        return min(1.0, sum(x * vb.get(w, 0.0) for w, x in va.items()))

    def structure(self, a: str, b: str) -> tuple[float, str | None]:
        """Wu-Palmer over the closure, and the deepest common ancestor."""
        above_a, above_b = self._up(a), self._up(b)
        common = above_a & above_b
        if not common:
            return 0.0, None
        deepest = max(sorted(common), key=lambda t: len(self._up(t)))
        return 2 * len(self._up(deepest)) / (len(above_a) + len(above_b)), deepest

    def _up(self, term: str) -> frozenset[str]:
        """The term and its ancestors (its depth is their number)."""
        found = self._above.get(term)
        if found is None:
            found = self._above[term] = frozenset(self.hierarchy.ancestors(term) | {term}) - {THING}
        return found

    def similarity(self, a: str, b: str) -> float:
        if a == ANY or b == ANY:
            return 1.0 if a == b else 0.0
        if self.hierarchy.is_equivalent(a, b):
            return 1.0
        return round(TEXT_WEIGHT * self.text(a, b) + (1 - TEXT_WEIGHT) * self.structure(a, b)[0], 3)

    def subsumption(self, queried: str, registered: str) -> tuple[float, float]:
        """The approximated subsumption of `registered` against `queried`: the share of the queried concept's
        definition (the concept and its ancestors) that the registered one lacks (given up) and the share of the
        registered one's that the queried one lacks (assumed); (0, 0) for equivalent terms."""
        if queried == ANY or registered == ANY or self.hierarchy.is_equivalent(queried, registered):
            return 0.0, 0.0
        above_q, above_r = self._up(queried), self._up(registered)
        common = len(above_q & above_r)
        return 1 - common / len(above_q), 1 - common / len(above_r)

    def explain(self, a: str, b: str) -> Explanation:
        va, vb = self.vector(a), self.vector(b)
        shared = sorted((w for w in va if w in vb), key=lambda w: (-va[w] * vb[w], w))
        structure, ancestor = self.structure(a, b)
        given_up, assumed = self.subsumption(a, b)
        return Explanation(self.similarity(a, b), round(self.text(a, b), 3), round(structure, 3), tuple(shared[:8]),
                           ancestor, round(given_up, 3), round(assumed, 3))

    # -- the candidates ------------------------------------------------------------------------------------
    def nearest(self, term: str, within: Collection[str], floor: float, version: Hashable = 0,
                outsiders: Words | None = None, spend: Spend = _free) -> list[tuple[str, float]]:
        """The terms of `within` (other than `term`) at or above `floor`, best first (then by IRI), at most
        `TOP_K`. `version` names `within` and its state for the cache (the caller changes it when `within` changes,
        and gives different sets different names). `outsiders`: the word index of `within`'s terms that no
        ontology names (without it they are found by a scan of `within`). `spend(n)`: n more terms looked at or
        scored; it may raise to stop the work, or pause it (the caller's collections may then change: `within`
        is only asked for membership, and the postings are read from copies)."""
        key = (term, version, floor)
        found = self._cache.get(key)
        if found is not None:
            self._cache.move_to_end(key)
            return found
        scored = []
        candidates = self._candidates(term, within, floor, version, outsiders, spend)
        for k, other in enumerate(candidates):
            if k % SPEND_EVERY == 0:
                spend(min(SPEND_EVERY, len(candidates) - k))
            s = self.similarity(term, other)
            if s >= floor:
                scored.append((other, s))
        scored.sort(key=lambda x: (-x[1], x[0]))
        found = self._cache[key] = scored[:TOP_K]
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return found

    def _candidates(self, term: str, within: Collection[str], floor: float, version: Hashable,
                    outsiders: Words | None, spend: Spend) -> list[str]:
        """The terms of `within` that may reach `floor`: a superset of the answer, found without scoring every term.
        A term sharing no weighted word with `term` and no ancestor has similarity 0, so only a floor of 0 needs
        them all; the others come from the postings (word → terms, ancestor → terms below it; for the terms no
        ontology names, `outsiders`, their names' words), scored by the same sums in another order, kept when
        within a hair of the floor (the caller scores them exactly)."""
        if floor <= 0:
            spend(len(within))
            return [t for t in within if t not in (term, ANY)]
        postings, below, depths = self._postings()
        text: dict[str, float] = {}
        get = text.get
        asked = self.vector(term)
        # the words of almost every term weigh almost nothing (IDF): left out while what they could add is
        # within SKIPPED_TEXT, which the threshold then allows for, and a term found by them alone stays below the
        # floor (a floor near 0 leaves nothing out)
        skipped, allowed = 0.0, min(SKIPPED_TEXT, (floor - 0.002) / TEXT_WEIGHT)
        for w, x in sorted(asked.items(), key=lambda wx: -len(postings.get(wx[0], ()))):
            found = postings.get(w, ())
            bound = x * self._heaviest[w] if found else 0.0
            if len(found) > SKIP_POSTINGS and skipped + bound <= allowed:
                skipped += bound
                continue
            spend(len(found))
            for other, y in found:
                text[other] = get(other, 0.0) + x * y
        if outsiders is not None:  # a term no ontology names shares a word with `term`, or is at 0
            for w, x in asked.items():
                named = tuple(outsiders.get(w, ()))  # a copy: `spend` may let the caller change the index
                spend(len(named))
                for other in named:
                    text[other] = get(other, 0.0) + x * self.vector(other).get(w, 0.0)
        common: dict[str, int] = {}
        for ancestor in sorted(self._up(term), key=self._depth):  # the deepest common ancestor's depth wins
            depth = self._depth(ancestor)
            under = below.get(ancestor, ())
            spend(len(under))
            common.update(dict.fromkeys(under, depth))
        near = set(self.hierarchy.equivalents(term))
        if outsiders is None:
            near |= self._outsiders(within, version)
        # similarity() rounds to 3 places: a rough 0.2995 is a 0.3
        d, low, structure = self._depth(term), floor - 0.001 - TEXT_WEIGHT * skipped, 2 * (1 - TEXT_WEIGHT)
        for other, c in common.items():
            if TEXT_WEIGHT * get(other, 0.0) + structure * c / (d + depths[other]) >= low:
                near.add(other)
        for other, x in text.items():
            if TEXT_WEIGHT * x >= low:  # with no common ancestor
                near.add(other)
        return [t for t in near if t in within and t not in (term, ANY)]

    def _depth(self, term: str) -> int:
        return len(self._up(term))

    def _postings(self) -> tuple[dict[str, list[tuple[str, float]]], dict[str, list[str]], dict[str, int]]:
        """Word → the terms whose vector has it, with its weight; ancestor → the terms at or below it; depths."""
        if self._words is None:
            with self._building:
                if self._words is None:
                    self._build_postings()
        assert self._words is not None
        return self._words, self._below, self._depths

    def _build_postings(self) -> None:
        words: dict[str, list[tuple[str, float]]] = {}
        below: dict[str, list[str]] = {}
        for t, v in self.vectors().items():
            for w, x in v.items():
                words.setdefault(w, []).append((t, x))
            for a in self._up(t):
                below.setdefault(a, []).append(t)
        self._depths = {t: self._depth(t) for t in self.vectors()}
        self._heaviest = {w: max(x for _, x in found) for w, found in words.items()}
        self._words, self._below = words, below

    def _outsiders(self, within: Collection[str], version: Hashable) -> set[str]:
        """The terms of `within` that no ontology names (scored by their name alone): few, remembered per state."""
        found = self._outside.get(version)
        if found is None:
            vectors = self.vectors()
            found = self._outside[version] = frozenset(t for t in within if t not in vectors and t != ANY)
            if len(self._outside) > 16:
                self._outside.pop(next(iter(self._outside)))
        return set(found)


def index_of(hierarchy: Hierarchy) -> SimilarityIndex:
    """The similarity index of a hierarchy: one per hierarchy (so per ontology upload), made at first use."""
    found = hierarchy.__dict__.get("_similarity")
    if found is None:
        found = hierarchy.__dict__["_similarity"] = SimilarityIndex(hierarchy)
    return found


def follow(before: Hierarchy, after: Hierarchy) -> None:
    """`after` replaces `before` (an ontology changed): its index, when it is built, starts from `before`'s (or
    from the index that one would have started from, when it was never built), and computes again only what
    the change reaches (`SimilarityIndex._build_from`) instead of every document."""
    if after is before or "_similarity" in after.__dict__:
        return
    earlier = before.__dict__.get("_similarity")
    if earlier is None:
        return
    basis = earlier if earlier._vectors is not None else earlier._basis
    if basis is not None:
        after.__dict__["_similarity"] = SimilarityIndex(after, basis)


def _normalised(v: Vector) -> Vector:
    norm = math.sqrt(sum(x * x for x in v.values()))
    return {w: x / norm for w, x in v.items()} if norm else {}
