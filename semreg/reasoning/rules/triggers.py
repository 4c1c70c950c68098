"""The OWL 2 RL rules (W3C OWL 2 Profiles §4.3, tables 4-9), each as forward triggers over a fact store:
the vocabulary, the tables of triggers and how a fact runs them. The rules themselves are in
`properties` (tables 4-5), `classes` (6-8) and `schema` (9), which this package imports so that every
table is filled whichever of its modules is imported first.

A rule instance is found when its last premise arrives: every rule is registered once per premise it
can be triggered by, and each trigger looks the other premises up in the store. `consequences()`
appends to `out` the conclusion of every instance that has the given fact as one of its premises and
the rest in the store; that is all semi-naive insertion, over-deletion and re-derivation need
(`semreg.reasoning.closure`).

Terms are small integers; the vocabulary below has fixed ids, so a rule compares ids, not IRIs. Facts
are `(s, p, o)` tuples of ids. The store (`semreg.reasoning.closure.Closure`) offers `ps[p][s] → {o}`,
`po[p][o] → {s}` (a dict per predicate, present for every vocabulary predicate), `members(head)` (the
items of a well-formed RDF list, or None), `heads(cell)` (the list heads whose walk reaches `cell`),
`cardinality_one(lit)`, `literal_types[lit]` and the gates `axiomatized`, `class_expressions` and
`same_terms` (supersets of the terms some rule reads in that role, so most facts skip most tables).

How the rules read RL where it leaves room, following owlrl (the reference the tests compare with):
- `scm-op`/`scm-dp` hold for `rdf:Property` too; `scm-sco`/`scm-spo` derive no reflexive triple from a
  cycle (owlrl skips `c1 = c3`), so `c ⊑ c` holds only for declared classes (`scm-cls`) and `p ⊑ p`
  for declared properties; `scm-svf1`, `scm-avf1` and `scm-hv` use those reflexive triples.
- Rules that only detect inconsistency or difference (`eq-diff*`, `prp-irp`, `prp-asyp`, `prp-pdw`,
  `prp-adp`, `prp-npa*`, `cls-nothing2`, `cls-com`, `cls-maxc1`, `cls-maxqc1/2`, `cax-dw`, `cax-adc`,
  `dt-not-type`) are left out: inconsistencies are data here.
- Lists must end in `rdf:nil`; a cell with several `rdf:first` (eq-rep copies them from `owl:sameAs`
  items) is read by its least id, and any of them gives the same closure.
- Literals are typed by their datatype when it is an OWL 2 RL datatype (`dt-type2`), and by the
  datatypes above it, as owlrl does, and by `rdfs:Literal` (whose value space holds every value); a
  plain literal is an `xsd:string` and a language-tagged one an `rdf:langString` (RDF 1.1: pyoxigraph
  reports them so), where rdflib gives them no datatype.
- `dt-diff` is derived only between literals in `owl:sameAs` facts (`datatypes`): a difference with a
  literal subject is not RDF, and reaches a reported triple only through a term the same as the literal.
- `dt-eq`: literals with the same data value (`semreg.reasoning.literals`: `"42"^^xsd:int` and
  `"+042"^^xsd:int`, `42` and `42.0`) are `owl:sameAs` each other once facts hold both (`datatypes`).
- Reflexive `owl:sameAs` (`eq-ref`, for every term but literals, whose triples RDF cannot hold),
  `owl:equivalentClass` (`scm-cls`, `scm-eqc2`) and `owl:equivalentProperty` (`scm-op`, `scm-dp`,
  `scm-eqp2`) triples are kept, but are premises of no rule but eq-rep's copies of them (`c ≡ c` and
  `c sameAs d` give `d ≡ c`, `consequences_of_reflexive`): every other rule that reads them concludes a
  triple it had as another premise (owlrl's rules say `x ≠ y`), except axioms about `owl:sameAs`
  itself, which semreg does not support. The closure calls them inert (`semreg.reasoning.closure`).
- `scm-dom1/2` and `scm-rng1/2` are a view of the closure, not triggers (`semreg.reasoning.propagation`).
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Protocol

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
OWL = "http://www.w3.org/2002/07/owl#"
XSD = "http://www.w3.org/2001/XMLSchema#"

# Fixed ids: VOCABULARY[i] has id i in every term table (these, then the RL datatypes below).
_TERMS = (
    RDF + "type", RDFS + "subClassOf", RDFS + "subPropertyOf", OWL + "equivalentClass",
    OWL + "equivalentProperty", OWL + "sameAs", RDFS + "domain", RDFS + "range", OWL + "inverseOf",
    OWL + "onProperty", OWL + "someValuesFrom", OWL + "allValuesFrom", OWL + "hasValue",
    OWL + "intersectionOf", OWL + "unionOf", OWL + "oneOf", OWL + "propertyChainAxiom", OWL + "hasKey",
    OWL + "maxCardinality", OWL + "maxQualifiedCardinality", OWL + "onClass", RDF + "first", RDF + "rest",
    RDF + "nil", OWL + "Thing", OWL + "Nothing", OWL + "Class", OWL + "ObjectProperty",
    OWL + "DatatypeProperty", RDF + "Property", OWL + "SymmetricProperty", OWL + "TransitiveProperty",
    OWL + "FunctionalProperty", OWL + "InverseFunctionalProperty", OWL + "AnnotationProperty",
    RDFS + "Datatype", RDFS + "label", OWL + "differentFrom",
)
(T, SCO, SPO, EQC, EQP, SAME, DOM, RNG, INV, ONP, SVF, AVF, HV, INT, UNI, ONEOF, CHAIN, KEY, MAXC, MAXQC,
 ONCLASS, FIRST, REST, NIL, THING, NOTHING, CLASS, OBJECT_PROPERTY, DATATYPE_PROPERTY, RDF_PROPERTY,
 SYMMETRIC, TRANSITIVE, FUNCTIONAL, INVERSE_FUNCTIONAL, ANNOTATION_PROPERTY, DATATYPE, LABEL, DIFFERENT) = range(len(_TERMS))

# Predicates whose objects are RDF lists, and the rules that read them (re-run when a list cell arrives).
LIST_PREDICATES = (INT, UNI, ONEOF, CHAIN, KEY)

# prp-ap: the annotation properties OWL 2 RL names (owlrl's OWLRL_Annotation_properties).
ANNOTATION_PROPERTIES = tuple(RDFS + n for n in ("label", "comment", "seeAlso", "isDefinedBy")) + tuple(
    OWL + n for n in ("deprecated", "versionInfo", "priorVersion", "backwardCompatibleWith", "incompatibleWith"))

# dt-type1: the OWL 2 RL datatypes (owlrl's OWL_RL_Datatypes), and what each is below (its
# OWL_Datatype_Subsumptions), by local name. `tests/reasoning/test_rules.py` checks both against owlrl.
_XSD_TYPES = ("integer decimal nonNegativeInteger nonPositiveInteger negativeInteger positiveInteger long int short "
              "byte unsignedLong unsignedInt unsignedShort unsignedByte float double string normalizedString token "
              "language Name NCName NMTOKEN boolean hexBinary base64Binary anyURI dateTimeStamp dateTime time date")
RL_DATATYPES = tuple(XSD + n for n in _XSD_TYPES.split()) + (
    RDFS + "Literal", RDF + "XMLLiteral", RDF + "HTML", RDF + "langString", RDF + "PlainLiteral")
DATATYPE_ANCESTORS: dict[str, tuple[str, ...]] = {XSD + k: tuple(XSD + v for v in vs.split()) for k, vs in {
    "dateTimeStamp": "dateTime", "integer": "decimal", "long": "integer decimal", "int": "long integer decimal",
    "short": "int long integer decimal", "byte": "short int long integer decimal",
    "nonNegativeInteger": "integer decimal", "positiveInteger": "nonNegativeInteger integer decimal",
    "unsignedLong": "nonNegativeInteger integer decimal",
    "unsignedInt": "unsignedLong nonNegativeInteger integer decimal",
    "unsignedShort": "unsignedInt unsignedLong nonNegativeInteger integer decimal",
    "unsignedByte": "unsignedShort unsignedInt unsignedLong nonNegativeInteger integer decimal",
    "nonPositiveInteger": "integer decimal", "negativeInteger": "nonPositiveInteger integer decimal",
    "normalizedString": "string", "token": "normalizedString string", "language": "token normalizedString string",
    "Name": "token normalizedString string", "NCName": "Name token normalizedString string",
    "NMTOKEN": "Name token normalizedString string"}.items()}
VOCABULARY = _TERMS + RL_DATATYPES
DATATYPE_IDS = range(len(_TERMS), len(VOCABULARY))  # the ids of RL_DATATYPES, in order

Fact = tuple[int, int, int]
E: tuple[()] = ()  # the empty default of a lookup


class Store(Protocol):
    ps: dict[int, dict[int, set[int]]]
    po: dict[int, dict[int, set[int]]]
    axiomatized: set[int]
    class_expressions: set[int]
    same_terms: set[int]
    literal_types: dict[int, tuple[int, ...]]
    literal_values: dict[int, Hashable]
    same_value: dict[Hashable, list[int]]
    same_literals: set[int]

    def members(self, head: int) -> tuple[int, ...] | None: ...

    def heads(self, cell: int) -> Iterable[int]: ...

    def cardinality_one(self, literal: int) -> bool: ...


Rule = Callable[[Store, int, int, int, list[Fact]], None]
NAMES: dict[Rule, str] = {}
BY_PREDICATE: dict[int, list[Rule]] = {}  # triggered by a fact with this predicate
BY_CLASS: dict[int, list[Rule]] = {}  # by (x rdf:type C) for this C
ON_TYPE: list[Rule] = []  # by every (x rdf:type c) where c is below or equivalent to something (cax-*)
ON_EXPRESSION_TYPE: list[Rule] = []  # by (x rdf:type c) when c is in `class_expressions`
ON_ASSERTION: list[Rule] = []  # by every (x p y) whose p is in `axiomatized`
ON_SAME: list[Rule] = []  # by every fact with a term in `same_terms`
LITERALS: list[Rule] = []  # by every fact whose object is a literal of an RL datatype


def rule(name: str, *, predicate: int | None = None, cls: int | None = None, table: list[Rule] | None = None
         ) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        NAMES[fn] = name
        if predicate is not None:
            BY_PREDICATE.setdefault(predicate, []).append(fn)
        elif cls is not None:
            BY_CLASS.setdefault(cls, []).append(fn)
        else:
            assert table is not None
            table.append(fn)
        return fn
    return register


def consequences(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    """Append to `out` the conclusions of every rule instance with (s, p, o) as a premise.

    It runs once per fact inserted or withdrawn, so the tables are spelt out here; `traced` runs the
    same ones through `triggered`, naming the rule of each conclusion (`tests/reasoning/test_rules.py` checks
    that the two agree).
    """
    fns = BY_PREDICATE.get(p)
    if fns is not None:
        for fn in fns:
            fn(st, s, p, o, out)
    if p == T:
        fns = BY_CLASS.get(o)
        if fns is not None:
            for fn in fns:
                fn(st, s, p, o, out)
        if o in st.ps[SCO] or o in st.ps[EQC] or o in st.po[EQC]:  # what ON_TYPE's rules read of o
            for fn in ON_TYPE:
                fn(st, s, p, o, out)
        if o in st.class_expressions:
            for fn in ON_EXPRESSION_TYPE:
                fn(st, s, p, o, out)
    elif p in (FIRST, REST):
        for fns, args in list_cell(st, s):
            for fn in fns:
                fn(st, *args, out)
    if p in st.axiomatized:
        for fn in ON_ASSERTION:
            fn(st, s, p, o, out)
    same = st.same_terms
    if same and (s in same or p in same or o in same):
        for fn in ON_SAME:
            fn(st, s, p, o, out)
    if o in st.literal_types:
        for fn in LITERALS:
            fn(st, s, p, o, out)


def consequences_of_reflexive(st: Store, s: int, p: int, o: int, out: list[Fact]) -> None:
    """What a reflexive sameAs / equivalence (s = o) entails: only eq-rep's copies of it when a term of it
    is the same as another (`c ≡ c`, `c sameAs d` → `d ≡ c`); every other rule reading it concludes a
    triple it already had."""
    same = st.same_terms
    if same and (s in same or p in same):
        for fn in ON_SAME:
            fn(st, s, p, o, out)


def traced(st: Store, s: int, p: int, o: int) -> list[tuple[str, Fact]]:
    """(rule name, conclusion) of every rule instance with (s, p, o) as a premise."""
    out: list[Fact] = []
    named: list[tuple[str, Fact]] = []
    for fns, args in triggered(st, s, p, o):
        for fn in fns:
            n = len(out)
            fn(st, *args, out)
            named.extend((NAMES[fn], c) for c in out[n:])
    return named


def triggered(st: Store, s: int, p: int, o: int) -> list[tuple[list[Rule], tuple[int, int, int]]]:
    """The rule tables a fact triggers, each with the fact it runs on."""
    calls: list[tuple[list[Rule], Fact]] = []
    fact = (s, p, o)
    if p in BY_PREDICATE:
        calls.append((BY_PREDICATE[p], fact))
    if p == T:
        if o in BY_CLASS:
            calls.append((BY_CLASS[o], fact))
        if o in st.ps[SCO] or o in st.ps[EQC] or o in st.po[EQC]:
            calls.append((ON_TYPE, fact))
        if o in st.class_expressions:
            calls.append((ON_EXPRESSION_TYPE, fact))
    elif p in (FIRST, REST):
        calls.extend(list_cell(st, s))
    if p in st.axiomatized:
        calls.append((ON_ASSERTION, fact))
    if st.same_terms and (s in st.same_terms or p in st.same_terms or o in st.same_terms):
        calls.append((ON_SAME, fact))
    if o in st.literal_types:
        calls.append((LITERALS, fact))
    return calls


def pairs(st: Store, p: int) -> Iterable[tuple[int, int]]:
    """Every (x, y) with (x p y) in the store."""
    d = st.ps.get(p)
    if d:
        for x, ys in d.items():
            for y in ys:
                yield x, y


def objects(st: Store, s: int, p: int) -> Iterable[int]:
    d = st.ps.get(p)
    return d.get(s, E) if d else E


def subjects(st: Store, p: int, o: int) -> Iterable[int]:
    d = st.po.get(p)
    return d.get(o, E) if d else E


def same_pairs(values: Iterable[int], out: list[Fact]) -> None:
    vs = list(values)
    for a in vs:
        for b in vs:
            if a != b:
                out.append((a, SAME, b))


# -- lists: the rules reading a list run again when a cell of it arrives or goes ----------------------------
def list_cell(st: Store, cell: int) -> list[tuple[list[Rule], tuple[int, int, int]]]:
    """Every instance of a rule reading a list holds all its cells: run them for each list through `cell`."""
    calls: list[tuple[list[Rule], Fact]] = []
    for head in st.heads(cell):
        for predicate in LIST_PREDICATES:
            for c in st.po[predicate].get(head, E):
                calls.append((BY_PREDICATE[predicate], (c, predicate, head)))
    return calls


def axioms() -> list[tuple[str, str, str]]:
    """The triples RL entails from nothing: cls-thing, cls-nothing1, prp-ap, dt-type1."""
    out = [(OWL + "Thing", RDF + "type", OWL + "Class"), (OWL + "Nothing", RDF + "type", OWL + "Class")]
    out += [(a, RDF + "type", OWL + "AnnotationProperty") for a in ANNOTATION_PROPERTIES]
    out += [(d, RDF + "type", RDFS + "Datatype") for d in RL_DATATYPES]
    return out


# The gate of ON_EXPRESSION_TYPE: facts that make a class one whose members some rule reads (cls-int*,
# cls-uni, cls-svf1, cls-avf, cls-hv1, cls-maxc2, cls-maxqc3, prp-key): the subject, or the object.
EXPRESSION_SUBJECT = frozenset({INT, AVF, HV, MAXC, MAXQC, KEY})
EXPRESSION_OBJECT = frozenset({FIRST, SVF, ONCLASS})

# The gate of ON_ASSERTION: facts that make their subject or object a property whose assertions some
# rule reads (prp-dom, prp-rng, prp-spo1, prp-eqp*, prp-inv*: the subject; prp-eqp2, prp-inv2, cls-svf1,
# cls-avf, cls-hv2, cls-maxc2, cls-maxqc3: the object of onProperty; prp-spo2, prp-key: a list item).
AXIOM_SUBJECT_PROPERTY = frozenset({DOM, RNG, SPO, EQP, INV})
AXIOM_OBJECT_PROPERTY = frozenset({EQP, INV, ONP, FIRST})
PROPERTY_CHARACTERISTICS = frozenset({SYMMETRIC, TRANSITIVE, FUNCTIONAL, INVERSE_FUNCTIONAL})
