"""The in-memory hierarchy index that matching runs on, read off the closure.

From the closure's subClassOf, subPropertyOf, type, equivalentClass, equivalentProperty and sameAs
triples between IRIs:
- `x ≡ y`: owl:equivalentClass, owl:equivalentProperty or owl:sameAs (the closure has them symmetric
  and transitive: eq-sym, eq-trans, scm-eqc2, scm-eqp2);
- `x ⊑ y` (strictly): x subClassOf y, x subPropertyOf y, or x rdf:type y when x is an individual, y not
  equivalent to x. The closure is transitive already (scm-sco, scm-spo, cax-sco), so the index takes
  its triples as they are and adds no relation of its own;
- left out: the RDF/RDFS/OWL/XSD vocabulary (`owl:Thing` excepted) and anything declared equivalent to
  one of its terms (schema.org's `schema:Class ≡ rdfs:Class`), and `owl:Nothing`;
- kinds: a term typed by a meta-class (`owl:Class`, `rdfs:Class`, a property type, or a term
  equivalent to one) or in a subClassOf / subPropertyOf triple is a class or a property; a term typed
  only by other classes is an individual. Only an individual's types make it narrower: RL also types
  schema.org's classes by `schema:Class` and so by `schema:Intangible` (cax-eqc1, cax-sco), which
  would put every class below `schema:Intangible`. This is the one place the index leaves out a pair
  the closure has;
- distance: the fewest asserted subClassOf / subPropertyOf / type steps from x up to y, with
  equivalent terms merged into one node (an equivalence costs nothing); an entailed relation with no
  asserted path (say, through owl:intersectionOf) counts as one step.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from semreg.rdf.terms import OWL, RDF, RDFS, XSD

SUB_CLASS = RDFS + "subClassOf"
SUB_PROPERTY = RDFS + "subPropertyOf"
TYPE = RDF + "type"
EQUIVALENT_CLASS, EQUIVALENT_PROPERTY, SAME_AS = OWL + "equivalentClass", OWL + "equivalentProperty", OWL + "sameAs"
EQUIVALENCES = frozenset({EQUIVALENT_CLASS, EQUIVALENT_PROPERTY, SAME_AS})
HIERARCHY_PREDICATES = frozenset({SUB_CLASS, SUB_PROPERTY, TYPE}) | EQUIVALENCES
NOTHING = OWL + "Nothing"
THING = OWL + "Thing"
META_NAMESPACES = (RDF, RDFS, OWL, XSD)
CLASS_TYPES = frozenset({OWL + "Class", RDFS + "Class"})
PROPERTY_TYPES = frozenset({RDF + "Property", OWL + "ObjectProperty", OWL + "DatatypeProperty",
                            OWL + "AnnotationProperty", OWL + "TransitiveProperty", OWL + "SymmetricProperty",
                            OWL + "FunctionalProperty", OWL + "InverseFunctionalProperty"})



def is_meta(iri: str) -> bool:
    """RDF/RDFS/OWL/XSD vocabulary, except owl:Thing, which is a real class of every individual."""
    return iri != THING and iri.startswith(META_NAMESPACES)


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
    # terms declared equivalent to a meta-class or meta-property (they are left out, like the vocabulary)
    meta_like: frozenset[str] = frozenset()

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

    def chain(self, lower: str, upper: str) -> list[str] | None:
        """The fewest asserted steps from `lower` up to `upper` (the path `distance` counts), as the terms
        on the way: `lower` first, `upper` last, and between them of each equivalence class the member the
        term before names as its parent (else the class's representative).
        `[lower, upper]` when the relation is entailed with no asserted path; None when `lower` is not
        strictly below `upper`."""
        start, goal = self.canon(lower), self.canon(upper)
        reachable = self.up.get(start, frozenset())
        if goal not in reachable:
            return None
        came_from: dict[str, str] = {}
        queue = deque((start,))
        while queue and goal not in came_from:
            node = queue.popleft()
            for nxt in sorted(self.asserted_up.get(node, ())):
                if nxt in reachable and nxt not in came_from and nxt != start:
                    came_from[nxt] = node
                    queue.append(nxt)
        if goal not in came_from:
            return [lower, upper]
        reps = []
        node = came_from[goal]
        while node != start:
            reps.append(node)
            node = came_from[node]
        terms = [lower]
        for r in reversed(reps):  # of an equivalence class, the member the previous term names as parent
            named = sorted(m for m in self.members.get(r, (r,)) if m in self.asserted_parents.get(terms[-1], ()))
            terms.append(named[0] if named else r)
        return [*terms, upper]

    @property
    def size(self) -> int:
        return len(self.up)


Rows = Mapping[str, Iterable[tuple[str, str, bool]]]  # predicate → (subject, object, asserted), IRIs, s ≠ o


def index(rows: Rows, labels: dict[str, str]) -> Hierarchy:
    """The hierarchy of a closure: `rows` are its hierarchy triples between IRIs by predicate."""
    groups = {p: list(rows.get(p, ())) for p in HIERARCHY_PREDICATES}
    meta, meta_like = _meta_terms(groups)
    kinds = _kinds(groups, meta_like, class_types_of(meta_like), meta)
    edges, asserted_edges, equivalent_pairs, terms = _edges(groups, meta | meta_like | {NOTHING}, kinds)
    find = _union_find(equivalent_pairs)
    rep, members = _classes(terms, find)
    up_sets, down_sets = _relations(edges, members, find)
    asserted_up, asserted_down = _asserted_relations(asserted_edges, find)
    return Hierarchy(
        rep=rep,
        members={r: frozenset(m) for r, m in members.items()},
        up={r: frozenset(v) for r, v in up_sets.items()},
        down={r: frozenset(v) for r, v in down_sets.items()},
        asserted_up={r: frozenset(v) for r, v in asserted_up.items()},
        asserted_down={r: frozenset(v) for r, v in asserted_down.items()},
        kinds=kinds,
        labels=labels,
        asserted_parents={k: frozenset(v) for k, v in asserted_edges.items()},
        meta_like=frozenset(meta_like),
    )


# -- the steps of `index` -------------------------------------------------------------------------------
Groups = dict[str, list[tuple[str, str, bool]]]  # `Rows` read once: predicate → (subject, object, asserted)


def _meta_terms(groups: Groups) -> tuple[set[str], set[str]]:
    """The RDF/RDFS/OWL/XSD terms named in the rows, and the terms declared equivalent to one of them."""
    named: set[str] = set()
    for group in groups.values():
        named.update(s for s, _, _ in group)
        named.update(o for _, o, _ in group)
    meta = {t for t in named if is_meta(t)}
    # Meta-classes: the RDF/RDFS/OWL ones and anything declared equivalent to one (schema.org says
    # schema:Class ≡ rdfs:Class); being typed by one makes a term a class or property, not an individual.
    meta_like: set[str] = set()
    for p in EQUIVALENCES:
        for s, o, _ in groups[p]:
            if s in meta:
                meta_like.add(o)
            if o in meta:
                meta_like.add(s)
    return meta, meta_like


def _edges(groups: Groups, out: set[str], kinds: dict[str, str]
           ) -> tuple[dict[str, set[str]], dict[str, set[str]], list[tuple[str, str]], set[str]]:
    """The index's edges between the terms not `out` (each term → the terms above it, entailed and asserted
    only), its equivalent pairs, and every term in either."""
    edges: dict[str, set[str]] = {}
    asserted_edges: dict[str, set[str]] = {}
    equivalent_pairs: list[tuple[str, str]] = []
    terms: set[str] = set()
    for p in HIERARCHY_PREDICATES:
        is_type, is_equivalence = p == TYPE, p in EQUIVALENCES
        for s, o, is_asserted in groups[p]:
            if s in out or o in out or (is_type and kinds.get(s) != "individual"):
                continue  # only an individual's type makes it narrower than its class
            terms.add(s)
            terms.add(o)
            if is_equivalence:
                equivalent_pairs.append((s, o))
                continue
            above = edges.get(s)
            if above is None:
                above = edges[s] = set()
            above.add(o)
            if is_asserted:
                asserted_edges.setdefault(s, set()).add(o)
    return edges, asserted_edges, equivalent_pairs, terms


def _classes(terms: set[str], find: Callable[[str], str]) -> tuple[dict[str, str], dict[str, set[str]]]:
    """The equivalence classes of `terms`: each term not its class's representative → the representative,
    and each representative → its members."""
    members: dict[str, set[str]] = {}
    rep: dict[str, str] = {}
    for term in terms:
        r = find(term)
        members.setdefault(r, set()).add(term)
        if r != term:
            rep[term] = r
    return rep, members


def _relations(edges: dict[str, set[str]], members: dict[str, set[str]], find: Callable[[str], str]
               ) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Each class → the classes above it, and below it (every class has both, maybe empty)."""
    up_sets: dict[str, set[str]] = {r: set() for r in members}
    for a, ups in edges.items():
        ra = find(a)
        above_a = up_sets[ra]
        for b in ups:
            rb = find(b)
            if rb != ra:
                above_a.add(rb)
    down_sets: dict[str, set[str]] = {r: set() for r in members}
    for r, above_r in up_sets.items():
        for a in above_r:
            down_sets[a].add(r)
    return up_sets, down_sets


def _asserted_relations(asserted_edges: dict[str, set[str]], find: Callable[[str], str]
                        ) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Each class → the classes one asserted step above it, and below it (only those that have one)."""
    asserted_up: dict[str, set[str]] = {}
    asserted_down: dict[str, set[str]] = {}
    for a, ups in asserted_edges.items():
        ra = find(a)
        for b in ups:
            rb = find(b)
            if ra != rb:
                asserted_up.setdefault(ra, set()).add(rb)
                asserted_down.setdefault(rb, set()).add(ra)
    return asserted_up, asserted_down


def class_types_of(meta_like: Iterable[str]) -> set[str]:
    """What typing by makes a term a class: owl:Class, rdfs:Class and what is equivalent to a meta-class."""
    return set(CLASS_TYPES) | {x for x in meta_like if x not in PROPERTY_TYPES}


def excluded(term: str, meta_like: frozenset[str] | set[str]) -> bool:
    """Left out of the index: the vocabulary (owl:Thing excepted), its equivalents, owl:Nothing."""
    return term == NOTHING or is_meta(term) or term in meta_like


def _kinds(groups: dict[str, list[tuple[str, str, bool]]], meta_like: set[str], class_types: set[str],
           meta: set[str]) -> dict[str, str]:
    """class, property or individual; the same whatever the order of the rows."""
    kinds: dict[str, str] = {}
    for p in (SUB_PROPERTY, EQUIVALENT_PROPERTY):
        for s, o, _ in groups[p]:
            kinds[s] = kinds[o] = "property"
    types = groups[TYPE]
    for s, o, _ in types:
        if o in PROPERTY_TYPES:
            kinds[s] = "property"
    for p in (SUB_CLASS, EQUIVALENT_CLASS):
        for s, o, _ in groups[p]:
            kinds.setdefault(s, "class")
            kinds.setdefault(o, "class")
    for s, o, _ in types:
        if o in class_types:
            kinds.setdefault(s, "class")
    # Typed by a class and nothing says it is a class or property: an individual (even if, punning,
    # something is typed by it too).
    typed = [(s, o) for s, o, _ in types if o not in meta and o not in meta_like]
    individuals = {s for s, _ in typed if s not in kinds}
    for s in individuals:
        kinds[s] = "individual"
    for _, o in typed:
        kinds.setdefault(o, "class")
    return kinds


def _union_find(pairs: Iterable[tuple[str, str]]) -> Callable[[str], str]:
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        if x not in parent:
            return x
        root = x
        while parent.get(root, root) != root:
            root = parent[root]
        while parent.get(x, x) != root:
            parent[x], x = root, parent[x]
        return root

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            if rb < ra:
                ra, rb = rb, ra
            parent[rb] = ra
    return find


EMPTY = Hierarchy()
