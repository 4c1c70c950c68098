"""Closure of all ontologies together, and the hierarchy indexes that matching runs on.

The closure is computed by `reasonable` (OWL 2 RL, in Rust): 0.5 s on the DBpedia ontology where owlrl
needs 26-45 s for the same subClassOf closure. owlrl stays the reference: the tests cross-check the
two on small graphs (`tests/test_reasoner.py`).

What the closure entails (OWL 2 RL rules, W3C OWL 2 Profiles §4.3): subClassOf / subPropertyOf
transitivity (scm-sco, scm-spo), equivalence both ways (scm-eqc*, scm-eqp*), types through the class
hierarchy (cax-sco), owl:sameAs symmetry and transitivity (eq-sym, eq-trans) and the copying of
statements between same-as individuals (eq-rep-*), domains and ranges (prp-dom, prp-rng), and the
rest of the RL rule set. Triples whose object is a literal (labels, comments) do not take part: no
rule that matters for matching reads them, and they are half of a typical ontology.

`Hierarchy` is the in-memory index built from asserted plus entailed triples:
- `x ⊑ y`: x subClassOf+ y, x subPropertyOf+ y, or x rdf:type y (y not an RDF/RDFS/OWL meta-class);
- `x ≡ y`: owl:equivalentClass, owl:equivalentProperty, owl:sameAs, or x ⊑ y ⊑ x;
- distance: the fewest asserted subClassOf / subPropertyOf / type steps from x up to y, with
  equivalent terms merged into one node (so an equivalence costs nothing). An entailed relation with
  no asserted path (say, through owl:intersectionOf) counts as one step.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

import pyoxigraph as ox

from semreg.terms import OWL, RDF, RDFS, XSD

SUB_CLASS = RDFS + "subClassOf"
SUB_PROPERTY = RDFS + "subPropertyOf"
TYPE = RDF + "type"
EQUIVALENCES = frozenset({OWL + "equivalentClass", OWL + "equivalentProperty", OWL + "sameAs"})
HIERARCHY_PREDICATES = frozenset({SUB_CLASS, SUB_PROPERTY, TYPE}) | EQUIVALENCES
LABEL = RDFS + "label"
NOTHING = OWL + "Nothing"
THING = OWL + "Thing"
META_NAMESPACES = (RDF, RDFS, OWL, XSD)
CLASS_TYPES = frozenset({OWL + "Class", RDFS + "Class"})
PROPERTY_TYPES = frozenset({RDF + "Property", OWL + "ObjectProperty", OWL + "DatatypeProperty",
                            OWL + "AnnotationProperty", OWL + "TransitiveProperty", OWL + "SymmetricProperty",
                            OWL + "FunctionalProperty", OWL + "InverseFunctionalProperty"})

Triple = tuple[str, str, str]
FIRST, REST, NIL = RDF + "first", RDF + "rest", RDF + "nil"
LIST_PREDICATES = frozenset({FIRST, REST})
INTERSECTION, UNION = OWL + "intersectionOf", OWL + "unionOf"
BOOLEAN_CLASS = frozenset({INTERSECTION, UNION})


def _rdf_list(lists: dict[str, tuple[str | None, str | None]], head: str) -> list[str]:
    """The named members of an RDF list (cycles and malformed lists end the walk)."""
    out: list[str] = []
    seen: set[str] = set()
    node: str | None = head
    while node is not None and node in lists and node not in seen:
        seen.add(node)
        first, rest = lists[node]
        if first is not None and not first.startswith("_:") and first not in lists:
            out.append(first)
        node = rest
    return [m for m in out if "://" in m or ":" in m]


def is_meta(iri: str) -> bool:
    """RDF/RDFS/OWL/XSD vocabulary, except owl:Thing, which is a real class of every individual."""
    return iri != THING and iri.startswith(META_NAMESPACES)


@dataclass(frozen=True)
class Closure:
    """The entailed triples (not asserted ones) and how long the reasoner took."""

    inferred: list[ox.Triple]
    asserted_count: int
    seconds: float


def compute_closure(quads: Iterable[ox.Quad | ox.Triple]) -> Closure:
    """OWL 2 RL closure of the given triples; returns only what is entailed and not asserted."""
    import reasonable
    from rdflib import BNode, URIRef

    started = time.perf_counter()
    # rdflib validates every IRI it builds, which was a third of the time: build each term once.
    uris: dict[str, URIRef] = {}
    bnodes: dict[str, BNode] = {}

    def term(t):
        if isinstance(t, ox.NamedNode):
            v = t.value
            u = uris.get(v)
            if u is None:
                u = uris[v] = URIRef(v)
            return u
        v = t.value
        b = bnodes.get(v)
        if b is None:
            b = bnodes[v] = BNode(v)
        return b

    base: set[tuple] = set()
    for q in quads:
        s, p, o = q.subject, q.predicate, q.object
        if isinstance(o, ox.Literal) or isinstance(s, ox.Triple) or isinstance(o, ox.Triple):
            continue
        base.add((term(s), term(p), term(o)))
    reasoner = reasonable.PyReasoner()
    if base:
        reasoner.from_graph(list(base))
        out = reasoner.reason()
    else:
        out = []
    back: dict = {}
    inferred = []
    for s, p, o in out:
        if (s, p, o) in base or isinstance(p, BNode):
            continue
        if p == TYPE and o == THING and isinstance(s, BNode):
            continue
        try:
            inferred.append(ox.Triple(_to_oxigraph(s, back), _to_oxigraph(p, back), _to_oxigraph(o, back)))
        except (ValueError, TypeError):
            continue
    return Closure(inferred, len(base), time.perf_counter() - started)


def _to_oxigraph(t, cache: dict):
    from rdflib import BNode, Literal

    hit = cache.get(t)
    if hit is not None:
        return hit
    out: ox.NamedNode | ox.BlankNode | ox.Literal
    if isinstance(t, BNode):
        out = ox.BlankNode(str(t))
    elif isinstance(t, Literal):
        if t.language:
            out = ox.Literal(str(t), language=t.language)
        else:
            out = ox.Literal(str(t), datatype=ox.NamedNode(str(t.datatype))) if t.datatype else ox.Literal(str(t))
    else:
        out = ox.NamedNode(str(t))
    cache[t] = out
    return out


@dataclass
class Hierarchy:
    """Ancestors, descendants and equivalents of every IRI named in the ontologies' closure."""

    # term → its equivalence class representative (every term in `eqv` maps to one; others are their own)
    rep: dict[str, str] = field(default_factory=dict)
    # representative → every member of its class (including itself)
    members: dict[str, frozenset[str]] = field(default_factory=dict)
    # representative → representatives strictly above / below it (entailed, transitive)
    up: dict[str, frozenset[str]] = field(default_factory=dict)
    down: dict[str, frozenset[str]] = field(default_factory=dict)
    # representative → representatives one asserted step above (for distances)
    asserted_up: dict[str, frozenset[str]] = field(default_factory=dict)
    asserted_down: dict[str, frozenset[str]] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    asserted_parents: dict[str, frozenset[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._down_distances = lru_cache(maxsize=4096)(self._bfs_down)
        self._up_distances = lru_cache(maxsize=4096)(self._bfs_up)

    # -- relations on terms -------------------------------------------------------------------------
    def canon(self, term: str) -> str:
        return self.rep.get(term, term)

    def equivalents(self, term: str) -> frozenset[str]:
        r = self.canon(term)
        return self.members.get(r) or frozenset((term,))

    def is_equivalent(self, a: str, b: str) -> bool:
        return a == b or self.canon(a) == self.canon(b)

    def is_below(self, a: str, b: str) -> bool:
        """a ⊑ b, strictly (not equivalent)."""
        return self.canon(b) in self.up.get(self.canon(a), ())

    def ancestors(self, term: str) -> set[str]:
        """Every term strictly above `term` (all members of each ancestor class)."""
        return {m for r in self.up.get(self.canon(term), ()) for m in self.members.get(r, (r,))}

    def descendants(self, term: str) -> set[str]:
        return {m for r in self.down.get(self.canon(term), ()) for m in self.members.get(r, (r,))}

    def narrower_distances(self, term: str) -> dict[str, int]:
        """Every term strictly below `term` → its distance (fewest asserted steps, 1 when only entailed)."""
        return self._down_distances(self.canon(term))

    def broader_distances(self, term: str) -> dict[str, int]:
        """Every term strictly above `term` → its distance."""
        return self._up_distances(self.canon(term))

    def distance(self, lower: str, upper: str) -> int | None:
        """Steps from `lower` up to `upper`: 0 when equivalent, None when `lower` is not below `upper`."""
        if self.is_equivalent(lower, upper):
            return 0
        return self.broader_distances(lower).get(upper)

    def _bfs_down(self, r: str) -> dict[str, int]:
        return self._bfs(r, self.asserted_down, self.down.get(r, frozenset()))

    def _bfs_up(self, r: str) -> dict[str, int]:
        return self._bfs(r, self.asserted_up, self.up.get(r, frozenset()))

    def _bfs(self, start: str, edges: dict[str, frozenset[str]], reachable: frozenset[str]) -> dict[str, int]:
        dist: dict[str, int] = {start: 0}
        queue = deque((start,))
        while queue:
            node = queue.popleft()
            d = dist[node] + 1
            for nxt in edges.get(node, ()):
                if nxt not in dist and nxt in reachable:
                    dist[nxt] = d
                    queue.append(nxt)
        del dist[start]
        out: dict[str, int] = {}
        for r in reachable:
            d = dist.get(r, 1)
            for m in self.members.get(r, (r,)):
                out[m] = d
        return out

    def kind(self, term: str) -> str:
        return self.kinds.get(term, "unknown")

    @property
    def size(self) -> int:
        return len(self.up)


def build_hierarchy(asserted: Iterable[ox.Quad | ox.Triple], inferred: Iterable[ox.Triple]) -> Hierarchy:
    """The in-memory indexes from the asserted ontology triples and the closure's entailed triples."""
    labels: dict[str, str] = {}
    rows: list[tuple[str, str, str, bool]] = []
    lists: dict[str, tuple[str | None, str | None]] = {}  # RDF list node → (first, rest)
    boolean_classes: list[tuple[str, str, str]] = []  # (class, intersectionOf|unionOf, list head)
    for is_asserted, triples in ((True, asserted), (False, inferred)):
        for t in triples:
            subj, pred, obj = t.subject, t.predicate.value, t.object
            if isinstance(subj, ox.Triple) or isinstance(obj, ox.Triple):
                continue
            if pred in LIST_PREDICATES and isinstance(subj, ox.BlankNode) and not isinstance(obj, ox.Literal):
                first, rest = lists.get(subj.value, (None, None))
                lists[subj.value] = (obj.value, rest) if pred == FIRST else (first, obj.value)
                continue
            if not isinstance(subj, ox.NamedNode):
                continue
            if pred in BOOLEAN_CLASS and isinstance(obj, ox.BlankNode):
                boolean_classes.append((subj.value, pred, obj.value))
                continue
            if pred == LABEL and is_asserted and isinstance(obj, ox.Literal):
                if subj.value not in labels or obj.language in (None, "", "en"):
                    labels[subj.value] = obj.value
            elif pred in HIERARCHY_PREDICATES and isinstance(obj, ox.NamedNode):
                rows.append((subj.value, pred, obj.value, is_asserted))

    # scm-int / scm-uni: a class is below each member of its intersection, above each of its union.
    for cls, p, head in boolean_classes:
        for member in _rdf_list(lists, head):
            rows.append((cls, SUB_CLASS, member, False) if p == INTERSECTION else (member, SUB_CLASS, cls, False))

    # Meta-classes: the RDF/RDFS/OWL ones and anything declared equivalent to one (schema.org says
    # schema:Class ≡ rdfs:Class); being typed by one makes a term a class or property, not an individual.
    meta_like = {o for s, p, o, _ in rows if p in EQUIVALENCES and is_meta(s)}
    meta_like |= {s for s, p, o, _ in rows if p in EQUIVALENCES and is_meta(o)}
    class_types = set(CLASS_TYPES) | {x for x in meta_like if x not in PROPERTY_TYPES}
    kinds: dict[str, str] = {}
    for s, p, o, _ in rows:
        if p == SUB_PROPERTY or (p == TYPE and o in PROPERTY_TYPES) or p == OWL + "equivalentProperty":
            kinds[s] = "property"
            if p != TYPE:
                kinds[o] = "property"
    for s, p, o, _ in rows:
        if p == SUB_CLASS or p == OWL + "equivalentClass" or (p == TYPE and o in class_types):
            kinds.setdefault(s, "class")
            if p != TYPE:
                kinds.setdefault(o, "class")
    for s, p, o, _ in rows:
        if p == TYPE and not is_meta(o) and o not in meta_like and s not in kinds:
            kinds[s] = "individual"
            kinds.setdefault(o, "class")

    edges_all: dict[str, set[str]] = {}
    edges_asserted: dict[str, set[str]] = {}
    equivalent_pairs: list[tuple[str, str]] = []
    terms: set[str] = set()
    for s, p, o, is_asserted in rows:
        if s == NOTHING or o == NOTHING or is_meta(s) or is_meta(o) or s in meta_like or o in meta_like:
            continue
        if p == TYPE and kinds.get(s) != "individual":
            continue  # only an individual's type makes it narrower than its class
        terms.add(s)
        terms.add(o)
        if s == o:
            continue
        if p in EQUIVALENCES:
            equivalent_pairs.append((s, o))
            continue
        edges_all.setdefault(s, set()).add(o)
        if is_asserted:
            edges_asserted.setdefault(s, set()).add(o)

    # Equivalence classes: declared equivalences, then cycles of ⊑ (x ⊑ y ⊑ x).
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        root = x
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(x, x) != root:
            parent[x], x = root, parent[x]
        return root

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            if rb < ra:
                ra, rb = rb, ra
            parent[rb] = ra

    for a, b in equivalent_pairs:
        union(a, b)
    for a, ups in edges_all.items():
        for b in ups:
            if a in edges_all.get(b, ()):
                union(a, b)

    # Transitive closure over the condensed graph (the reasoner's output is already transitive; this
    # makes the index right even where a rule did not fire, and costs little on a DAG of this size).
    up_direct: dict[str, set[str]] = {}
    for a, ups in edges_all.items():
        ra = find(a)
        for b in ups:
            rb = find(b)
            if ra != rb:
                up_direct.setdefault(ra, set()).add(rb)
    reps = {find(t) for t in terms}
    up: dict[str, frozenset[str]] = {}

    def ancestors_of(r: str) -> frozenset[str]:
        # iterative DFS with memo; the condensed graph is acyclic
        stack = [(r, False)]
        while stack:
            node, expanded = stack.pop()
            if node in up:
                continue
            parents = up_direct.get(node, ())
            if expanded:
                acc: set[str] = set(parents)
                for q in parents:
                    acc |= up[q]
                up[node] = frozenset(acc)
            else:
                stack.append((node, True))
                stack.extend((q, False) for q in parents if q not in up)
        return up[r]

    for r in reps:
        ancestors_of(r)
    down_sets: dict[str, set[str]] = {r: set() for r in reps}
    for r, above in up.items():
        for a in above:
            down_sets.setdefault(a, set()).add(r)
    asserted_up: dict[str, set[str]] = {}
    asserted_down: dict[str, set[str]] = {}
    asserted_parents: dict[str, set[str]] = {}
    for a, ups in edges_asserted.items():
        ra = find(a)
        for b in ups:
            asserted_parents.setdefault(a, set()).add(b)
            rb = find(b)
            if ra != rb:
                asserted_up.setdefault(ra, set()).add(rb)
                asserted_down.setdefault(rb, set()).add(ra)
    members: dict[str, set[str]] = {}
    rep: dict[str, str] = {}
    for term in terms:
        r = find(term)
        members.setdefault(r, set()).add(term)
        if r != term:
            rep[term] = r
    for r in reps:
        members.setdefault(r, {r})
    return Hierarchy(
        rep=rep,
        members={r: frozenset(m) for r, m in members.items()},
        up=up,
        down={r: frozenset(d) for r, d in down_sets.items()},
        asserted_up={r: frozenset(v) for r, v in asserted_up.items()},
        asserted_down={r: frozenset(v) for r, v in asserted_down.items()},
        kinds=kinds,
        labels=labels,
        asserted_parents={k: frozenset(v) for k, v in asserted_parents.items()},
    )


EMPTY = Hierarchy()


def hierarchy_triples(h: Hierarchy, present: Iterable[ox.Quad | ox.Triple]) -> list[ox.Triple]:
    """subClassOf / subPropertyOf / type / equivalence triples the index holds and the closure lacks.

    reasonable leaves out some RL schema rules (scm-spo transitivity of subPropertyOf, scm-eqp, scm-int,
    scm-uni): the index computes them, and this puts them into `urn:semreg:inferred` as well, so that
    SPARQL sees the same hierarchy that discovery uses.
    """
    have = {(t.subject.value, t.predicate.value, t.object.value) for t in present
            if isinstance(t.subject, ox.NamedNode) and isinstance(t.object, ox.NamedNode)
            and t.predicate.value in HIERARCHY_PREDICATES}
    out: list[ox.Triple] = []

    def add(s: str, p: str, o: str) -> None:
        if (s, p, o) not in have:
            have.add((s, p, o))
            out.append(ox.Triple(ox.NamedNode(s), ox.NamedNode(p), ox.NamedNode(o)))

    for r, ups in h.up.items():
        lowers = h.members.get(r, frozenset((r,)))
        for a in ups:
            for lower in lowers:
                kind = h.kinds.get(lower)
                p = SUB_PROPERTY if kind == "property" else TYPE if kind == "individual" else SUB_CLASS
                for upper in h.members.get(a, frozenset((a,))):
                    add(lower, p, upper)
    for members in h.members.values():
        if len(members) > 1:
            for a in members:
                kind = h.kinds.get(a)
                p = OWL + ("equivalentProperty" if kind == "property" else "sameAs" if kind == "individual"
                           else "equivalentClass")
                sub = SUB_PROPERTY if kind == "property" else None if kind == "individual" else SUB_CLASS
                for b in members:
                    if a != b:
                        add(a, p, b)
                        if sub:  # scm-eqc1 / scm-eqp1: equivalents are mutual sub-classes / sub-properties
                            add(a, sub, b)
    return out
