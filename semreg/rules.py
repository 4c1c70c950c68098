"""The OWL 2 RL rules (W3C OWL 2 Profiles §4.3, tables 4-9), each as forward triggers over a fact store.

A rule instance is found when its last premise arrives: every rule is registered once per premise it
can be triggered by, and each trigger looks the other premises up in the store. `consequences()`
appends to `out` the conclusion of every instance that has the given fact as one of its premises and
the rest in the store; that is all semi-naive insertion, over-deletion and re-derivation need
(`semreg.closure`).

Terms are small integers; the vocabulary below has fixed ids, so a rule compares ids, not IRIs. Facts
are `(s, p, o)` tuples of ids. The store (`semreg.closure.Closure`) offers `ps[p][s] → {o}`,
`po[p][o] → {s}` (a dict per predicate, present for every vocabulary predicate), `members(head)` (the
items of a well-formed RDF list, or None), `heads(cell)` (the list heads whose walk reaches `cell`),
`cardinality_one(lit)`, `literal_types[lit]` and the gates `axiomatized` and `same_terms`.

How the rules read RL where it leaves room, following owlrl (the reference the tests compare with):
- `scm-op`/`scm-dp` hold for `rdf:Property` too; `scm-sco`/`scm-spo` derive no reflexive triple from a
  cycle (owlrl skips `c1 = c3`), so `c ⊑ c` holds only for declared classes (`scm-cls`) and `p ⊑ p`
  for declared properties; `scm-svf1`, `scm-avf1` and `scm-hv` use those reflexive triples.
- Reflexive `owl:sameAs`, `owl:equivalentClass` and `owl:equivalentProperty` triples (`eq-ref`, and the
  `c ≡ c` of `scm-cls`) are not kept: no rule draws anything from them (every rule that reads them has
  `x ≠ y` in owlrl), except axioms about `owl:sameAs` itself, which semreg does not support.
- Rules that only detect inconsistency (`eq-diff*`, `prp-irp`, `prp-asyp`, `prp-pdw`, `prp-adp`,
  `prp-npa*`, `cls-nothing2`, `cls-com`, `cls-maxc1`, `cls-maxqc1/2`, `cax-dw`, `cax-adc`,
  `dt-not-type`) are left out: inconsistencies are data here.
- Lists must be well formed (each cell has one `rdf:first` and one `rdf:rest`, ending in `rdf:nil`).
- Literals are typed by their datatype when it is an OWL 2 RL datatype (`dt-type2`), and by the
  datatypes above it, as owlrl does; a literal without a datatype of its own (plain or language-tagged,
  which pyoxigraph reports as `xsd:string` / `rdf:langString`) is not typed, as in rdflib.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import product
from typing import Protocol

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
OWL = "http://www.w3.org/2002/07/owl#"
XSD = "http://www.w3.org/2001/XMLSchema#"

# Fixed ids: VOCABULARY[i] has id i in every term table.
VOCABULARY = (
    RDF + "type", RDFS + "subClassOf", RDFS + "subPropertyOf", OWL + "equivalentClass",
    OWL + "equivalentProperty", OWL + "sameAs", RDFS + "domain", RDFS + "range", OWL + "inverseOf",
    OWL + "onProperty", OWL + "someValuesFrom", OWL + "allValuesFrom", OWL + "hasValue",
    OWL + "intersectionOf", OWL + "unionOf", OWL + "oneOf", OWL + "propertyChainAxiom", OWL + "hasKey",
    OWL + "maxCardinality", OWL + "maxQualifiedCardinality", OWL + "onClass", RDF + "first", RDF + "rest",
    RDF + "nil", OWL + "Thing", OWL + "Nothing", OWL + "Class", OWL + "ObjectProperty",
    OWL + "DatatypeProperty", RDF + "Property", OWL + "SymmetricProperty", OWL + "TransitiveProperty",
    OWL + "FunctionalProperty", OWL + "InverseFunctionalProperty", OWL + "AnnotationProperty",
    RDFS + "Datatype", RDFS + "label",
)
(T, SCO, SPO, EQC, EQP, SAME, DOM, RNG, INV, ONP, SVF, AVF, HV, INT, UNI, ONEOF, CHAIN, KEY, MAXC, MAXQC,
 ONCLASS, FIRST, REST, NIL, THING, NOTHING, CLASS, OBJECT_PROPERTY, DATATYPE_PROPERTY, RDF_PROPERTY,
 SYMMETRIC, TRANSITIVE, FUNCTIONAL, INVERSE_FUNCTIONAL, ANNOTATION_PROPERTY, DATATYPE, LABEL) = range(len(VOCABULARY))

# Predicates whose objects are RDF lists, and the rules that read them (re-run when a list cell arrives).
LIST_PREDICATES = (INT, UNI, ONEOF, CHAIN, KEY)

# prp-ap: the annotation properties OWL 2 RL names (owlrl's OWLRL_Annotation_properties).
ANNOTATION_PROPERTIES = tuple(RDFS + n for n in ("label", "comment", "seeAlso", "isDefinedBy")) + tuple(
    OWL + n for n in ("deprecated", "versionInfo", "priorVersion", "backwardCompatibleWith", "incompatibleWith"))

# dt-type1: the OWL 2 RL datatypes (owlrl's OWL_RL_Datatypes), and what each is below (its
# OWL_Datatype_Subsumptions), by local name. `tests/test_rules.py` checks both against owlrl.
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
# Datatypes rdflib gives no literal of its own: plain and language-tagged literals have none there.
UNTYPED_LITERALS = (XSD + "string", RDF + "langString")

Fact = tuple[int, int, int]
E: tuple = ()


class Store(Protocol):
    ps: dict[int, dict[int, set[int]]]
    po: dict[int, dict[int, set[int]]]
    axiomatized: set[int]
    class_expressions: set[int]
    same_terms: set[int]
    literal_types: dict[int, tuple[int, ...]]

    def members(self, head: int) -> tuple[int, ...] | None: ...

    def heads(self, cell: int) -> Iterable[int]: ...

    def cardinality_one(self, literal: int) -> bool: ...


Rule = Callable[[Store, int, int, int, list], None]
NAMES: dict[Rule, str] = {}
BY_PREDICATE: dict[int, list[Rule]] = {}  # triggered by a fact with this predicate
BY_CLASS: dict[int, list[Rule]] = {}  # by (x rdf:type C) for this C
ON_TYPE: list[Rule] = []  # by every (x rdf:type c)
ON_EXPRESSION_TYPE: list[Rule] = []  # by (x rdf:type c) when c is in `class_expressions`
ON_ASSERTION: list[Rule] = []  # by every (x p y) whose p is in `axiomatized`
ON_SAME: list[Rule] = []  # by every fact with a term in `same_terms`


def rule(name: str, *, predicate: int | None = None, cls: int | None = None, table: list[Rule] | None = None):
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
    same ones through `triggered`, naming the rule of each conclusion (`tests/test_rules.py` checks
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
        dt_type2(st, s, p, o, out)


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
    calls = []
    fact = (s, p, o)
    if p in BY_PREDICATE:
        calls.append((BY_PREDICATE[p], fact))
    if p == T:
        if o in BY_CLASS:
            calls.append((BY_CLASS[o], fact))
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


def _pairs(st: Store, p: int) -> Iterable[tuple[int, int]]:
    """Every (x, y) with (x p y) in the store."""
    d = st.ps.get(p)
    if d:
        for x, ys in d.items():
            for y in ys:
                yield x, y


def _objects(st: Store, s: int, p: int) -> Iterable[int]:
    d = st.ps.get(p)
    return d.get(s, E) if d else E


def _subjects(st: Store, p: int, o: int) -> Iterable[int]:
    d = st.po.get(p)
    return d.get(o, E) if d else E


def _same_pairs(values: Iterable[int], out: list[Fact]) -> None:
    vs = list(values)
    for a in vs:
        for b in vs:
            if a != b:
                out.append((a, SAME, b))


# -- Table 4: equality ----------------------------------------------------------------------------------
@rule("eq-sym", predicate=SAME)
def eq_sym(st, s, p, o, out):
    out.append((o, SAME, s))


@rule("eq-trans", predicate=SAME)
def eq_trans(st, s, p, o, out):
    for z in st.ps[SAME].get(o, E):  # (s = o), (o = z)
        if z != s:
            out.append((s, SAME, z))
    for x in st.po[SAME].get(s, E):  # (x = s), (s = o)
        if x != o:
            out.append((x, SAME, o))


@rule("eq-rep-s", predicate=SAME)
def eq_rep_s_by_same(st, s, p, o, out):
    for q, d in st.ps.items():
        for y in d.get(s, E):
            out.append((o, q, y))


@rule("eq-rep-p", predicate=SAME)
def eq_rep_p_by_same(st, s, p, o, out):
    for x, y in _pairs(st, s):
        out.append((x, o, y))


@rule("eq-rep-o", predicate=SAME)
def eq_rep_o_by_same(st, s, p, o, out):
    for q, d in st.po.items():
        for x in d.get(s, E):
            out.append((x, q, o))


@rule("eq-rep-s", table=ON_SAME)
def eq_rep_s(st, s, p, o, out):
    for s2 in st.ps[SAME].get(s, E):
        out.append((s2, p, o))


@rule("eq-rep-p", table=ON_SAME)
def eq_rep_p(st, s, p, o, out):
    for p2 in st.ps[SAME].get(p, E):
        out.append((s, p2, o))


@rule("eq-rep-o", table=ON_SAME)
def eq_rep_o(st, s, p, o, out):
    for o2 in st.ps[SAME].get(o, E):
        out.append((s, p, o2))


# -- Table 5: properties --------------------------------------------------------------------------------
@rule("prp-dom", table=ON_ASSERTION)
def prp_dom(st, s, p, o, out):
    for c in st.ps[DOM].get(p, E):
        out.append((s, T, c))


@rule("prp-dom", predicate=DOM)
def prp_dom_by_axiom(st, s, p, o, out):
    d = st.ps.get(s)
    if d:
        out.extend((x, T, o) for x in d)


@rule("prp-rng", table=ON_ASSERTION)
def prp_rng(st, s, p, o, out):
    for c in st.ps[RNG].get(p, E):
        out.append((o, T, c))


@rule("prp-rng", predicate=RNG)
def prp_rng_by_axiom(st, s, p, o, out):
    d = st.po.get(s)
    if d:
        out.extend((y, T, o) for y in d)


@rule("prp-fp", table=ON_ASSERTION)
def prp_fp(st, s, p, o, out):
    if FUNCTIONAL in st.ps[T].get(p, E):
        for y2 in _objects(st, s, p):
            if y2 != o:
                out.append((o, SAME, y2))
                out.append((y2, SAME, o))


@rule("prp-fp", cls=FUNCTIONAL)
def prp_fp_by_axiom(st, s, p, o, out):
    for ys in (st.ps.get(s) or {}).values():
        _same_pairs(ys, out)


@rule("prp-ifp", table=ON_ASSERTION)
def prp_ifp(st, s, p, o, out):
    if INVERSE_FUNCTIONAL in st.ps[T].get(p, E):
        for x2 in _subjects(st, p, o):
            if x2 != s:
                out.append((s, SAME, x2))
                out.append((x2, SAME, s))


@rule("prp-ifp", cls=INVERSE_FUNCTIONAL)
def prp_ifp_by_axiom(st, s, p, o, out):
    for xs in (st.po.get(s) or {}).values():
        _same_pairs(xs, out)


@rule("prp-symp", table=ON_ASSERTION)
def prp_symp(st, s, p, o, out):
    if SYMMETRIC in st.ps[T].get(p, E):
        out.append((o, p, s))


@rule("prp-symp", cls=SYMMETRIC)
def prp_symp_by_axiom(st, s, p, o, out):
    for x, y in _pairs(st, s):
        out.append((y, s, x))


@rule("prp-trp", table=ON_ASSERTION)
def prp_trp(st, s, p, o, out):
    if TRANSITIVE in st.ps[T].get(p, E):
        for z in _objects(st, o, p):  # (s p o), (o p z)
            out.append((s, p, z))
        for x in _subjects(st, p, s):  # (x p s), (s p o)
            out.append((x, p, o))


@rule("prp-trp", cls=TRANSITIVE)
def prp_trp_by_axiom(st, s, p, o, out):
    for x, y in list(_pairs(st, s)):
        for z in _objects(st, y, s):
            out.append((x, s, z))


@rule("prp-spo1", table=ON_ASSERTION)
def prp_spo1(st, s, p, o, out):
    for p2 in st.ps[SPO].get(p, E):
        if p2 != p:
            out.append((s, p2, o))


@rule("prp-spo1", predicate=SPO)
def prp_spo1_by_axiom(st, s, p, o, out):
    if s != o:
        for x, y in _pairs(st, s):
            out.append((x, o, y))


@rule("prp-eqp1", table=ON_ASSERTION)
def prp_eqp1(st, s, p, o, out):
    for p2 in st.ps[EQP].get(p, E):
        out.append((s, p2, o))


@rule("prp-eqp2", table=ON_ASSERTION)
def prp_eqp2(st, s, p, o, out):
    for p1 in st.po[EQP].get(p, E):
        out.append((s, p1, o))


@rule("prp-eqp1", predicate=EQP)
def prp_eqp1_by_axiom(st, s, p, o, out):
    for x, y in _pairs(st, s):
        out.append((x, o, y))


@rule("prp-eqp2", predicate=EQP)
def prp_eqp2_by_axiom(st, s, p, o, out):
    for x, y in _pairs(st, o):
        out.append((x, s, y))


@rule("prp-inv1", table=ON_ASSERTION)
def prp_inv1(st, s, p, o, out):
    for p2 in st.ps[INV].get(p, E):
        out.append((o, p2, s))


@rule("prp-inv2", table=ON_ASSERTION)
def prp_inv2(st, s, p, o, out):
    for p1 in st.po[INV].get(p, E):
        out.append((o, p1, s))


@rule("prp-inv1", predicate=INV)
def prp_inv1_by_axiom(st, s, p, o, out):
    for x, y in _pairs(st, s):
        out.append((y, o, x))


@rule("prp-inv2", predicate=INV)
def prp_inv2_by_axiom(st, s, p, o, out):
    for x, y in _pairs(st, o):
        out.append((y, s, x))


def _chain_paths(st: Store, chain: tuple[int, ...], start: int, stop: int, node: int, forward: bool) -> set[int]:
    """The nodes reached from `node` along chain[start:stop] (forwards), or that reach it (backwards)."""
    frontier = {node}
    steps = chain[start:stop] if forward else reversed(chain[start:stop])
    for q in steps:
        nxt: set[int] = set()
        for u in frontier:
            nxt.update(_objects(st, u, q) if forward else _subjects(st, q, u))
        frontier = nxt
        if not frontier:
            break
    return frontier


@rule("prp-spo2", table=ON_ASSERTION)
def prp_spo2(st, s, p, o, out):
    for cell in st.po[FIRST].get(p, E):
        for head in st.heads(cell):
            props = st.po[CHAIN].get(head)
            chain = st.members(head) if props else None
            if chain is None:
                continue
            for i, q in enumerate(chain):
                if q == p:
                    lefts = _chain_paths(st, chain, 0, i, s, forward=False)
                    rights = _chain_paths(st, chain, i + 1, len(chain), o, forward=True)
                    out.extend((u, prop, v) for prop in props for u in lefts for v in rights)


@rule("prp-spo2", predicate=CHAIN)
def prp_spo2_by_axiom(st, s, p, o, out):
    chain = st.members(o)
    if chain:
        for u, v in list(_pairs(st, chain[0])):
            out.extend((u, s, w) for w in _chain_paths(st, chain, 1, len(chain), v, forward=True))


def _key_matches(st: Store, cls: int, keys: tuple[int, ...], x: int, out: list[Fact]) -> None:
    """prp-key for one individual x of cls: every other instance of cls with the same key values."""
    values = [list(_objects(st, x, k)) for k in keys]
    instances = st.po[T].get(cls, E)
    for combo in product(*values):
        same = set(instances)
        for k, z in zip(keys, combo):
            same &= set(_subjects(st, k, z))
            if not same:
                break
        for y in same:
            if y != x:
                out.append((x, SAME, y))
                out.append((y, SAME, x))


@rule("prp-key", predicate=KEY)
def prp_key_by_axiom(st, s, p, o, out):
    keys = st.members(o)
    if keys:
        for x in list(st.po[T].get(s, E)):
            _key_matches(st, s, keys, x, out)


@rule("prp-key", table=ON_EXPRESSION_TYPE)
def prp_key_by_type(st, s, p, o, out):
    for head in st.ps[KEY].get(o, E):
        keys = st.members(head)
        if keys:
            _key_matches(st, o, keys, s, out)


@rule("prp-key", table=ON_ASSERTION)
def prp_key(st, s, p, o, out):
    for cell in st.po[FIRST].get(p, E):
        for head in st.heads(cell):
            keys = st.members(head)
            if keys:
                for cls in st.po[KEY].get(head, E):
                    if cls in st.ps[T].get(s, E):
                        _key_matches(st, cls, keys, s, out)


# -- Table 6: classes -----------------------------------------------------------------------------------
def _list_users(st: Store, member: int, predicate: int) -> list[tuple[int, tuple[int, ...]]]:
    """(c, items) for every (c predicate list) whose well-formed list holds `member`."""
    cells = st.po[FIRST].get(member)
    if not cells:
        return []
    found: list[tuple[int, tuple[int, ...]]] = []
    for cell in cells:
        for head in st.heads(cell):
            users = st.po[predicate].get(head)
            if users:
                items = st.members(head)
                if items is not None:
                    found.extend((c, items) for c in users)
    return found


@rule("cls-int1", table=ON_EXPRESSION_TYPE)
def cls_int1(st, s, p, o, out):
    types = st.ps[T].get(s, E)
    for c, items in _list_users(st, o, INT):
        if all(m in types for m in items):
            out.append((s, T, c))


@rule("cls-int1", predicate=INT)
def cls_int1_by_axiom(st, s, p, o, out):
    items = st.members(o)
    if items:
        types = st.ps[T]
        for y in list(st.po[T].get(items[0], E)):
            if all(m in types.get(y, E) for m in items):
                out.append((y, T, s))


@rule("cls-int2", table=ON_EXPRESSION_TYPE)
def cls_int2(st, s, p, o, out):
    for head in st.ps[INT].get(o, E):
        for m in st.members(head) or E:
            out.append((s, T, m))


@rule("cls-int2", predicate=INT)
def cls_int2_by_axiom(st, s, p, o, out):
    items = st.members(o) or E
    for y in st.po[T].get(s, E):
        out.extend((y, T, m) for m in items)


@rule("cls-uni", table=ON_EXPRESSION_TYPE)
def cls_uni(st, s, p, o, out):
    for c, _ in _list_users(st, o, UNI):
        out.append((s, T, c))


@rule("cls-uni", predicate=UNI)
def cls_uni_by_axiom(st, s, p, o, out):
    for m in st.members(o) or E:
        for y in st.po[T].get(m, E):
            out.append((y, T, s))


def _restrictions_on(st: Store, p: int) -> Iterable[int]:
    return st.po[ONP].get(p, E)


@rule("cls-svf1", table=ON_ASSERTION)
def cls_svf(st, s, p, o, out):
    # cls-svf2 is the case y = owl:Thing, which needs no type of v (owlrl reads it so for every y = Thing).
    types = st.ps[T].get(o, E)
    for x in _restrictions_on(st, p):
        for y in st.ps[SVF].get(x, E):
            if y == THING or y in types:
                out.append((s, T, x))


@rule("cls-svf1", table=ON_EXPRESSION_TYPE)
def cls_svf1_by_type(st, s, p, o, out):
    if o != THING:
        for x in st.po[SVF].get(o, E):
            for q in st.ps[ONP].get(x, E):
                for u in _subjects(st, q, s):
                    out.append((u, T, x))


@rule("cls-svf1", predicate=SVF)
def cls_svf_by_filler(st, s, p, o, out):
    types = st.ps[T]
    for q in st.ps[ONP].get(s, E):
        for u, v in _pairs(st, q):
            if o == THING or o in types.get(v, E):
                out.append((u, T, s))


@rule("cls-svf1", predicate=ONP)
def cls_svf_by_property(st, s, p, o, out):
    types = st.ps[T]
    for y in st.ps[SVF].get(s, E):
        for u, v in _pairs(st, o):
            if y == THING or y in types.get(v, E):
                out.append((u, T, s))


@rule("cls-avf", table=ON_ASSERTION)
def cls_avf(st, s, p, o, out):
    types = st.ps[T].get(s, E)
    for x in _restrictions_on(st, p):
        if x in types:
            for y in st.ps[AVF].get(x, E):
                out.append((o, T, y))


@rule("cls-avf", table=ON_EXPRESSION_TYPE)
def cls_avf_by_type(st, s, p, o, out):
    for y in st.ps[AVF].get(o, E):
        for q in st.ps[ONP].get(o, E):
            for v in _objects(st, s, q):
                out.append((v, T, y))


@rule("cls-avf", predicate=AVF)
def cls_avf_by_filler(st, s, p, o, out):
    for q in st.ps[ONP].get(s, E):
        for u in st.po[T].get(s, E):
            for v in _objects(st, u, q):
                out.append((v, T, o))


@rule("cls-avf", predicate=ONP)
def cls_avf_by_property(st, s, p, o, out):
    for y in st.ps[AVF].get(s, E):
        for u in st.po[T].get(s, E):
            for v in _objects(st, u, o):
                out.append((v, T, y))


@rule("cls-hv1", table=ON_EXPRESSION_TYPE)
def cls_hv1(st, s, p, o, out):
    for y in st.ps[HV].get(o, E):
        for q in st.ps[ONP].get(o, E):
            out.append((s, q, y))


@rule("cls-hv1", predicate=HV)
def cls_hv1_by_value(st, s, p, o, out):
    for q in st.ps[ONP].get(s, E):
        for u in st.po[T].get(s, E):
            out.append((u, q, o))


@rule("cls-hv1", predicate=ONP)
def cls_hv1_by_property(st, s, p, o, out):
    for y in st.ps[HV].get(s, E):
        for u in st.po[T].get(s, E):
            out.append((u, o, y))


@rule("cls-hv2", table=ON_ASSERTION)
def cls_hv2(st, s, p, o, out):
    for x in _restrictions_on(st, p):
        if o in st.ps[HV].get(x, E):
            out.append((s, T, x))


@rule("cls-hv2", predicate=HV)
def cls_hv2_by_value(st, s, p, o, out):
    for q in st.ps[ONP].get(s, E):
        for u in _subjects(st, q, o):
            out.append((u, T, s))


@rule("cls-hv2", predicate=ONP)
def cls_hv2_by_property(st, s, p, o, out):
    for y in st.ps[HV].get(s, E):
        for u in _subjects(st, o, y):
            out.append((u, T, s))


def _max_one(st: Store, x: int, predicate: int) -> bool:
    return any(st.cardinality_one(n) for n in st.ps[predicate].get(x, E))


def _qualified(st: Store, cls: int, ys: Iterable[int]) -> list[int]:
    if cls == THING:
        return list(ys)
    types = st.ps[T]
    return [y for y in ys if cls in types.get(y, E)]


def _maxc2(st: Store, x: int, u: int, out: list[Fact]) -> None:
    for q in st.ps[ONP].get(x, E):
        _same_pairs(_objects(st, u, q), out)


def _maxqc(st: Store, x: int, u: int, out: list[Fact]) -> None:
    for q in st.ps[ONP].get(x, E):
        for c in st.ps[ONCLASS].get(x, E):
            _same_pairs(_qualified(st, c, _objects(st, u, q)), out)


@rule("cls-maxc2", table=ON_EXPRESSION_TYPE)
def cls_maxc2_by_type(st, s, p, o, out):
    if st.ps[MAXC].get(o) and _max_one(st, o, MAXC):
        _maxc2(st, o, s, out)


@rule("cls-maxc2", table=ON_ASSERTION)
def cls_maxc2(st, s, p, o, out):
    types = st.ps[T].get(s, E)
    for x in _restrictions_on(st, p):
        if x in types and _max_one(st, x, MAXC):
            for y2 in _objects(st, s, p):
                if y2 != o:
                    out.append((o, SAME, y2))
                    out.append((y2, SAME, o))


@rule("cls-maxc2", predicate=MAXC)
def cls_maxc2_by_axiom(st, s, p, o, out):
    if st.cardinality_one(o):
        for u in list(st.po[T].get(s, E)):
            _maxc2(st, s, u, out)


@rule("cls-maxc2", predicate=ONP)
def cls_maxc2_by_property(st, s, p, o, out):
    if _max_one(st, s, MAXC):
        for u in list(st.po[T].get(s, E)):
            _same_pairs(_objects(st, u, o), out)


@rule("cls-maxqc3", table=ON_EXPRESSION_TYPE)
def cls_maxqc_by_type(st, s, p, o, out):
    if st.ps[MAXQC].get(o) and _max_one(st, o, MAXQC):
        _maxqc(st, o, s, out)
    # (y T c) as the qualifying type of a value
    if o != THING:
        for x in st.po[ONCLASS].get(o, E):
            if _max_one(st, x, MAXQC):
                members = st.po[T].get(x, E)
                for q in st.ps[ONP].get(x, E):
                    for u in _subjects(st, q, s):
                        if u in members:
                            _same_pairs(_qualified(st, o, _objects(st, u, q)), out)


@rule("cls-maxqc3", table=ON_ASSERTION)
def cls_maxqc(st, s, p, o, out):
    types = st.ps[T].get(s, E)
    for x in _restrictions_on(st, p):
        if x in types and _max_one(st, x, MAXQC):
            for c in st.ps[ONCLASS].get(x, E):
                _same_pairs(_qualified(st, c, _objects(st, s, p)), out)


@rule("cls-maxqc3", predicate=MAXQC)
def cls_maxqc_by_axiom(st, s, p, o, out):
    if st.cardinality_one(o):
        for u in list(st.po[T].get(s, E)):
            _maxqc(st, s, u, out)


@rule("cls-maxqc3", predicate=ONCLASS)
def cls_maxqc_by_class(st, s, p, o, out):
    if _max_one(st, s, MAXQC):
        for u in list(st.po[T].get(s, E)):
            for q in st.ps[ONP].get(s, E):
                _same_pairs(_qualified(st, o, _objects(st, u, q)), out)


@rule("cls-maxqc3", predicate=ONP)
def cls_maxqc_by_property(st, s, p, o, out):
    if _max_one(st, s, MAXQC):
        for u in list(st.po[T].get(s, E)):
            for c in st.ps[ONCLASS].get(s, E):
                _same_pairs(_qualified(st, c, _objects(st, u, o)), out)


@rule("cls-oo", predicate=ONEOF)
def cls_oo(st, s, p, o, out):
    for y in st.members(o) or E:
        out.append((y, T, s))


# -- Table 7: class axioms ------------------------------------------------------------------------------
@rule("cax-sco", table=ON_TYPE)
def cax_sco(st, s, p, o, out):
    for c2 in st.ps[SCO].get(o, E):
        if c2 != o:
            out.append((s, T, c2))


@rule("cax-sco", predicate=SCO)
def cax_sco_by_axiom(st, s, p, o, out):
    if s != o:
        for x in st.po[T].get(s, E):
            out.append((x, T, o))


@rule("cax-eqc1", table=ON_TYPE)
def cax_eqc1(st, s, p, o, out):
    for c2 in st.ps[EQC].get(o, E):
        out.append((s, T, c2))


@rule("cax-eqc2", table=ON_TYPE)
def cax_eqc2(st, s, p, o, out):
    for c1 in st.po[EQC].get(o, E):
        out.append((s, T, c1))


@rule("cax-eqc1", predicate=EQC)
def cax_eqc1_by_axiom(st, s, p, o, out):
    for x in st.po[T].get(s, E):
        out.append((x, T, o))


@rule("cax-eqc2", predicate=EQC)
def cax_eqc2_by_axiom(st, s, p, o, out):
    for x in st.po[T].get(o, E):
        out.append((x, T, s))


# -- Table 8: datatypes ---------------------------------------------------------------------------------
LITERALS: list[Rule] = []


@rule("dt-type2", table=LITERALS)
def dt_type2(st, s, p, o, out):
    out.extend((o, T, dt) for dt in st.literal_types[o])


# -- Table 9: schema vocabulary -------------------------------------------------------------------------
@rule("scm-cls", cls=CLASS)
def scm_cls(st, s, p, o, out):
    out.append((s, SCO, s))
    out.append((s, SCO, THING))
    out.append((NOTHING, SCO, s))


@rule("scm-op/scm-dp", cls=OBJECT_PROPERTY)
def scm_op(st, s, p, o, out):
    out.append((s, SPO, s))


BY_CLASS[DATATYPE_PROPERTY] = [scm_op]
BY_CLASS[RDF_PROPERTY] = [scm_op]


@rule("scm-sco", predicate=SCO)
def scm_sco(st, s, p, o, out):
    if s != o:
        for c3 in st.ps[SCO].get(o, E):  # (s ⊑ o), (o ⊑ c3)
            if c3 != s:
                out.append((s, SCO, c3))
    for c1 in st.po[SCO].get(s, E):  # (c1 ⊑ s), (s ⊑ o)
        if c1 != s and c1 != o:
            out.append((c1, SCO, o))


@rule("scm-eqc1", predicate=EQC)
def scm_eqc1(st, s, p, o, out):
    if s != o:  # an asserted x ≡ x concludes nothing (owlrl), not even x ⊑ x
        out.append((s, SCO, o))
        out.append((o, SCO, s))


@rule("scm-eqc2", predicate=SCO)
def scm_eqc2(st, s, p, o, out):
    if s != o and s in st.ps[SCO].get(o, E):
        out.append((s, EQC, o))
        out.append((o, EQC, s))


@rule("scm-spo", predicate=SPO)
def scm_spo(st, s, p, o, out):
    if s != o:
        for p3 in st.ps[SPO].get(o, E):
            if p3 != s:
                out.append((s, SPO, p3))
    for p1 in st.po[SPO].get(s, E):
        if p1 != s and p1 != o:
            out.append((p1, SPO, o))


@rule("scm-eqp1", predicate=EQP)
def scm_eqp1(st, s, p, o, out):
    if s != o:  # an asserted x ≡ x concludes nothing (owlrl), not even x ⊑ x
        out.append((s, SPO, o))
        out.append((o, SPO, s))


@rule("scm-eqp2", predicate=SPO)
def scm_eqp2(st, s, p, o, out):
    if s != o and s in st.ps[SPO].get(o, E):
        out.append((s, EQP, o))
        out.append((o, EQP, s))


# scm-dom1, scm-dom2, scm-rng1, scm-rng2 are left out on purpose. They conclude only rdfs:domain and
# rdfs:range triples, which no rule reads but prp-dom, prp-rng and themselves, and every type they lead
# to is reached without them: scm-dom1 then prp-dom ((p dom c1), (c1 ⊑ c2), (x p y) → (x type c2)) is
# prp-dom then cax-sco; scm-dom2 then prp-dom ((p2 dom c), (p1 ⊑ p2), (x p1 y)) is prp-spo1 then
# prp-dom; the same for ranges. With DBpedia's 3,000 domains and ranges over a deep class tree they were
# 35,000 of the 90,000 triples its closure adds and half the time. (That holds unless an ontology makes
# statements about rdfs:domain or rdfs:range themselves, which semreg does not support.)


def _restriction_pairs(st: Store, on: int, c: int) -> Iterable[tuple[int, int]]:
    """(c', filler) of every restriction c' with the same property as c, by `on` (someValuesFrom, ...)."""
    for q in st.ps[ONP].get(c, E):
        for c2 in st.po[ONP].get(q, E):
            for y2 in st.ps[on].get(c2, E):
                yield c2, y2


def _scm_filler(name: str, on: int) -> None:
    """scm-svf1 / scm-avf1: restrictions on one property, fillers y1 ⊑ y2 (avf: c1 ⊑ c2 the same way)."""

    def by_restriction(st, s, p, o, out):  # s a restriction with filler o; the other restriction c2 / y2
        sco = st.ps[SCO]
        for c2, y2 in _restriction_pairs(st, on, s):
            if y2 in sco.get(o, E):
                out.append((s, SCO, c2))
            if o in sco.get(y2, E):
                out.append((c2, SCO, s))

    def by_property(st, s, p, o, out):  # (s ONP o)
        sco = st.ps[SCO]
        for y1 in st.ps[on].get(s, E):
            for c2 in st.po[ONP].get(o, E):
                for y2 in st.ps[on].get(c2, E):
                    if y2 in sco.get(y1, E):
                        out.append((s, SCO, c2))
                    if y1 in sco.get(y2, E):
                        out.append((c2, SCO, s))

    def by_subclass(st, s, p, o, out):  # (y1 ⊑ y2) = (s SCO o)
        for c1 in st.po[on].get(s, E):
            for q in st.ps[ONP].get(c1, E):
                for c2 in st.po[ONP].get(q, E):
                    if o in st.ps[on].get(c2, E):
                        out.append((c1, SCO, c2))

    rule(name, predicate=on)(by_restriction)
    rule(name, predicate=ONP)(by_property)
    rule(name, predicate=SCO)(by_subclass)


def _scm_property(name: str, on: int, reverse: bool) -> None:
    """scm-svf2 / scm-avf2 / scm-hv: restrictions with one filler (value), properties p1 ⊑ p2.

    The conclusion is c1 ⊑ c2 (c2 ⊑ c1 for allValuesFrom) where c1 is on p1 and c2 on p2.
    """

    def emit(c1: int, c2: int, out: list[Fact]) -> None:
        out.append((c2, SCO, c1) if reverse else (c1, SCO, c2))

    def by_restriction(st, s, p, o, out):  # (s on o): s as c1 and as c2
        spo = st.ps[SPO]
        for c in st.po[on].get(o, E):
            for p_s in st.ps[ONP].get(s, E):
                for p_c in st.ps[ONP].get(c, E):
                    if p_c in spo.get(p_s, E):
                        emit(s, c, out)
                    if p_s in spo.get(p_c, E):
                        emit(c, s, out)

    def by_property(st, s, p, o, out):  # (s ONP o)
        spo = st.ps[SPO]
        for y in st.ps[on].get(s, E):
            for c in st.po[on].get(y, E):
                for p_c in st.ps[ONP].get(c, E):
                    if p_c in spo.get(o, E):
                        emit(s, c, out)
                    if o in spo.get(p_c, E):
                        emit(c, s, out)

    def by_subproperty(st, s, p, o, out):  # (p1 ⊑ p2) = (s SPO o)
        for c1 in st.po[ONP].get(s, E):
            for y in st.ps[on].get(c1, E):
                for c2 in st.po[on].get(y, E):
                    if o in st.ps[ONP].get(c2, E):
                        emit(c1, c2, out)

    rule(name, predicate=on)(by_restriction)
    rule(name, predicate=ONP)(by_property)
    rule(name, predicate=SPO)(by_subproperty)


_scm_filler("scm-svf1", SVF)
_scm_filler("scm-avf1", AVF)
_scm_property("scm-svf2", SVF, reverse=False)
_scm_property("scm-avf2", AVF, reverse=True)
_scm_property("scm-hv", HV, reverse=False)


@rule("scm-int", predicate=INT)
def scm_int(st, s, p, o, out):
    for m in st.members(o) or E:
        out.append((s, SCO, m))


@rule("scm-uni", predicate=UNI)
def scm_uni(st, s, p, o, out):
    for m in st.members(o) or E:
        out.append((m, SCO, s))


# -- lists: a consumer's rules run again when a cell of its list arrives or goes ------------------------
_CONSUMERS = {INT: [scm_int, cls_int1_by_axiom, cls_int2_by_axiom], UNI: [scm_uni, cls_uni_by_axiom],
              ONEOF: [cls_oo], CHAIN: [prp_spo2_by_axiom], KEY: [prp_key_by_axiom]}


def list_cell(st: Store, cell: int) -> list[tuple[list[Rule], tuple[int, int, int]]]:
    """Every instance of a rule reading a list holds all its cells: run them for each list through `cell`."""
    calls = []
    for head in st.heads(cell):
        for predicate, fns in _CONSUMERS.items():
            for c in st.po[predicate].get(head, E):
                calls.append((fns, (c, predicate, head)))
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
