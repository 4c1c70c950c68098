"""owlrl as the reference for semreg's closure: the pairs each entails between IRIs, their differences
with the rule that explains each, and a generator of small ontologies that mix the RL constructs."""
from __future__ import annotations

import random
from dataclasses import dataclass

import owlrl
import pyoxigraph as ox
import rdflib

from semreg import rules
from semreg.closure import Closure
from semreg.reasoner import Reasoner
from semreg.rules import OWL, RDF, RDFS, XSD

COMPARED = frozenset({RDFS + "subClassOf", RDFS + "subPropertyOf", OWL + "equivalentClass",
                      OWL + "equivalentProperty", OWL + "sameAs", RDF + "type"})
Pair = tuple[str, str, str]


def rdflib_graph(data: bytes, fmt: str) -> rdflib.Graph:
    g = rdflib.Graph()
    g.parse(data=data, format=fmt)
    return g


def owlrl_closure(data: bytes, fmt: str) -> rdflib.Graph:
    g = rdflib_graph(data, fmt)
    owlrl.DeductiveClosure(owlrl.OWLRL_Semantics).expand(g)
    return g


def owlrl_pairs(closed: rdflib.Graph) -> set[Pair]:
    """The compared triples of an owlrl closure between IRIs, reflexive ones left out."""
    return {(str(s), str(p), str(o)) for s, p, o in closed
            if str(p) in COMPARED and isinstance(s, rdflib.URIRef) and isinstance(o, rdflib.URIRef) and s != o}


def semreg_pairs(triples: list[ox.Triple], inferred: list[ox.Triple]) -> set[Pair]:
    """The same of semreg's closure: the asserted triples and what `urn:semreg:inferred` gets."""
    return {(t.subject.value, t.predicate.value, t.object.value) for t in [*triples, *inferred]
            if t.predicate.value in COMPARED and isinstance(t.subject, ox.NamedNode)
            and isinstance(t.object, ox.NamedNode) and t.subject != t.object}


def parse(data: bytes, fmt: str = "turtle") -> list[ox.Triple]:
    oxfmt = {"turtle": ox.RdfFormat.TURTLE, "xml": ox.RdfFormat.RDF_XML}[fmt]
    return [ox.Triple(q.subject, q.predicate, q.object) for q in ox.parse(data, format=oxfmt)]


def to_oxigraph(t) -> ox.NamedNode | ox.BlankNode | ox.Literal:
    if isinstance(t, rdflib.BNode):
        return ox.BlankNode(str(t))
    if isinstance(t, rdflib.Literal):
        if t.language:
            return ox.Literal(str(t), language=t.language)
        return ox.Literal(str(t), datatype=ox.NamedNode(str(t.datatype))) if t.datatype else ox.Literal(str(t))
    return ox.NamedNode(str(t))


def explain(closure: Closure, pair: Pair) -> list[str]:
    """The rules that derive `pair` in one step from the facts of `closure` (empty when none does).

    Every rule instance has a premise holding its conclusion's subject or object (`semreg.closure`),
    so running the rules from every fact about those two terms finds every instance that concludes it.
    """
    terms = closure.terms
    ids = [terms.known(ox.NamedNode(x)) for x in pair]
    if any(i is None for i in ids):
        return []
    want = tuple(ids)
    names: set[str] = set()
    out: list = []
    for s, p, o in closure._facts_about({want[0], want[2]}):  # noqa: SLF001
        trace: list = []
        rules.consequences(closure, s, p, o, out, trace)
        names.update(name for name, fact in trace if fact == want)
        out.clear()
    return sorted(names)


@dataclass(frozen=True)
class Difference:
    pair: Pair
    side: str  # "owlrl only" or "semreg only"
    rules: tuple[str, ...]  # the rules that derive it, on the side that has it

    def __str__(self) -> str:
        why = ", ".join(self.rules) or "no rule in one step"
        return f"{self.side}: {' '.join(self.pair)} (by {why})"


def differences(data: bytes, fmt: str = "turtle", closed: rdflib.Graph | None = None,
                exceptions=lambda pair, closed: False) -> list[Difference]:
    """Every compared pair on which semreg and owlrl disagree for one document, with its rule."""
    closed = owlrl_closure(data, fmt) if closed is None else closed
    triples = parse(data, fmt)
    reasoner = Reasoner()
    reasoner.put("doc", triples)
    ours = semreg_pairs(triples, reasoner.inferred())
    reference = owlrl_pairs(closed)
    out = []
    missing = {p for p in reference - ours if not exceptions(p, closed)}
    extra = {p for p in ours - reference if not exceptions(p, closed)}
    if missing:
        theirs = Closure()
        # owlrl's eq-ref triples (x sameAs x) are left out: every rule would "derive" a triple from itself
        theirs.assert_graph("owlrl", theirs.intern(ox.Triple(to_oxigraph(s), to_oxigraph(p), to_oxigraph(o))
                                                   for s, p, o in closed if not isinstance(s, rdflib.Literal)
                                                   and isinstance(p, rdflib.URIRef)
                                                   and not (s == o and p == rdflib.OWL.sameAs)))
        out += [Difference(p, "owlrl only", tuple(explain(theirs, p))) for p in sorted(missing)]
    out += [Difference(p, "semreg only", tuple(explain(reasoner.closure, p))) for p in sorted(extra)]
    return out


# -- generated ontologies ------------------------------------------------------------------------------------
EX = "http://example.org/g#"
PREFIXES = (f"@prefix : <{EX}> . @prefix rdf: <{RDF}> . @prefix rdfs: <{RDFS}> . @prefix owl: <{OWL}> . "
            f"@prefix xsd: <{XSD}> .\n")


def generate(rnd: random.Random, size: int) -> str:
    """A Turtle ontology over about `size` named classes, properties and individuals, mixing the
    constructs RL reasons over: class expressions behind blank nodes (intersection, union, restriction,
    equivalence chains), property axioms (sub-properties, inverses, chains, characteristics, domain and
    range), individuals with types, assertions and owl:sameAs, and owl:sameAs between classes."""
    n_classes = max(2, size // 2)
    n_props = max(1, size // 4)
    n_inds = max(1, size - n_classes - n_props)
    classes = [f":C{i}" for i in range(n_classes)]
    props = [f":p{i}" for i in range(n_props)]
    inds = [f":i{i}" for i in range(n_inds)]
    c, p, i = (lambda: rnd.choice(classes)), (lambda: rnd.choice(props)), (lambda: rnd.choice(inds))

    def expression(depth: int = 0) -> str:
        roll = rnd.random()
        if depth > 1 or roll < 0.35:
            return c() if rnd.random() < 0.9 else "owl:Thing"
        if roll < 0.5:
            items = " ".join(expression(depth + 1) for _ in range(rnd.randint(1, 3)))
            return f"[ a owl:Class ; owl:{rnd.choice(['intersectionOf', 'unionOf'])} ( {items} ) ]"
        if roll < 0.7:
            filler = expression(depth + 1) if rnd.random() < 0.8 else "owl:Thing"
            return f"[ a owl:Restriction ; owl:onProperty {p()} ; owl:someValuesFrom {filler} ]"
        if roll < 0.8:
            return f"[ a owl:Restriction ; owl:onProperty {p()} ; owl:allValuesFrom {expression(depth + 1)} ]"
        if roll < 0.9:
            value = i() if rnd.random() < 0.85 else f'"{rnd.randint(0, 3)}"^^xsd:integer'
            return f"[ a owl:Restriction ; owl:onProperty {p()} ; owl:hasValue {value} ]"
        if roll < 0.95:
            return f'[ a owl:Restriction ; owl:onProperty {p()} ; owl:maxCardinality "1"^^xsd:nonNegativeInteger ]'
        return (f'[ a owl:Restriction ; owl:onProperty {p()} ; owl:maxQualifiedCardinality '
                f'"1"^^xsd:nonNegativeInteger ; owl:onClass {c()} ]')

    lines = []
    for x in classes:
        if rnd.random() < 0.6:
            lines.append(f"{x} a owl:Class .")
    for x in props:
        if rnd.random() < 0.6:
            lines.append(f"{x} a {rnd.choice(['owl:ObjectProperty', 'rdf:Property', 'owl:DatatypeProperty'])} .")
    axioms = [
        (6, lambda: f"{c()} rdfs:subClassOf {expression()} ."),
        (3, lambda: f"{expression()} rdfs:subClassOf {c()} ."),
        (3, lambda: f"{c()} owl:equivalentClass {expression()} ."),
        (2, lambda: f"{c()} owl:{rnd.choice(['intersectionOf', 'unionOf'])} ( {' '.join(c() for _ in range(rnd.randint(1, 3)))} ) ."),
        (1, lambda: f"{c()} owl:oneOf ( {' '.join(i() for _ in range(rnd.randint(1, 3)))} ) ."),
        (3, lambda: f"{p()} rdfs:subPropertyOf {p()} ."),
        (1, lambda: f"{p()} owl:equivalentProperty {p()} ."),
        (2, lambda: f"{p()} owl:inverseOf {p()} ."),
        (1, lambda: f"{p()} owl:propertyChainAxiom ( {' '.join(p() for _ in range(rnd.randint(1, 3)))} ) ."),
        (2, lambda: f"{p()} a owl:{rnd.choice(['TransitiveProperty', 'SymmetricProperty', 'FunctionalProperty', 'InverseFunctionalProperty'])} ."),
        (2, lambda: f"{p()} rdfs:domain {expression()} ."),
        (2, lambda: f"{p()} rdfs:range {expression()} ."),
        (5, lambda: f"{i()} a {expression()} ."),
        (5, lambda: f"{i()} {p()} {i()} ."),
        (1, lambda: f'{i()} {p()} "{rnd.randint(0, 3)}"^^xsd:integer .'),
        (1, lambda: f"{i()} owl:sameAs {i()} ."),
        (1, lambda: f"{c()} owl:sameAs {c()} ."),
    ]
    weights = [w for w, _ in axioms]
    for _ in range(rnd.randint(size // 2, size * 2)):
        lines.append(rnd.choices(axioms, weights)[0][1]())
    return PREFIXES + "\n".join(lines) + "\n"
