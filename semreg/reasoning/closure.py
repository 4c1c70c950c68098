"""The OWL 2 RL closure of named graphs, kept up to date as graphs come and go.

`Closure` holds every asserted triple (by the graph that asserts it), every triple the rules in
`semreg.reasoning.rules.triggers` entail from them, and indexes by predicate. It changes in two ways, both exact:
- adding triples: semi-naive insertion. Each new fact is inserted once and triggers every rule instance
  it completes; a conclusion not yet known joins the queue. A rule instance fires when its last premise
  arrives, so the closure of A ∪ B costs, beyond the closure of A, only the instances that involve B.
- removing triples: delete and re-derive (DRed; `semreg.reasoning.rederive`): every fact with a
  derivation through a removed one is withdrawn, then every withdrawn fact that still has a derivation
  from what is left comes back.
So the result never depends on the order of changes: it is the least fixpoint of the rules over what is
asserted now (`tests/reasoning/test_closure.py` compares every sequence of changes with a fresh computation).

Two kinds of triples are in the closure without being premises of the rules:
- reflexive `owl:sameAs`, `owl:equivalentClass` and `owl:equivalentProperty` triples (eq-ref for every
  term, `c ≡ c`, `p ≡ p`) are stored and reported but inert: only eq-rep runs on them (`c ≡ c`, `c sameAs
  d` → `d ≡ c`), since every other rule that reads one concludes a triple it already had
  (`semreg.reasoning.rules.triggers`);
- the domains and ranges scm-dom1/2 and scm-rng1/2 propagate are a view (`semreg.reasoning.propagation`),
  brought up to date after each change and merged into what the change reports.

Terms are interned as integers (`semreg.reasoning.terms`). Triples whose subject is a literal, or whose
predicate is not an IRI, take part in reasoning but are not RDF: they are never reported as RDF.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator

import pyoxigraph as ox

from semreg.reasoning import rederive
from semreg.reasoning.propagation import Propagated
from semreg.reasoning.rederive import INERT, Change
from semreg.reasoning.rules import triggers
from semreg.reasoning.rules.triggers import (
    AXIOM_OBJECT_PROPERTY,
    AXIOM_SUBJECT_PROPERTY,
    EXPRESSION_OBJECT,
    EXPRESSION_SUBJECT,
    FIRST,
    NIL,
    PROPERTY_CHARACTERISTICS,
    REST,
    SAME,
    VOCABULARY,
    Fact,
    T,
)
from semreg.reasoning.terms import LITERAL, NAMED, Terms

SYSTEM = ""  # the graph name of the axioms RL entails from nothing (never removed)
_GATES = AXIOM_SUBJECT_PROPERTY | AXIOM_OBJECT_PROPERTY | EXPRESSION_SUBJECT | EXPRESSION_OBJECT | {SAME}
_E: tuple[()] = ()


class Closure:
    """Asserted facts by graph, their OWL 2 RL closure, and the indexes the rules read."""

    def __init__(self, terms: Terms | None = None) -> None:
        self.terms = terms or Terms()
        self.ps: dict[int, dict[int, set[int]]] = {}
        self.po: dict[int, dict[int, set[int]]] = {}
        for i in range(len(VOCABULARY)):
            self.ps[i] = {}
            self.po[i] = {}
        self.size = 0
        self.asserted: dict[Fact, int] = {}  # fact → number of graphs asserting it
        self.asserted_ps: dict[int, dict[int, set[int]]] = {}  # the asserted facts, as `ps` indexes all
        self.graphs: dict[str, set[Fact]] = {}
        self.axiomatized: set[int] = set()  # properties some rule reads assertions of (a superset)
        self.class_expressions: set[int] = set()  # classes some rule reads the members of (a superset)
        self.same_terms: set[int] = set()  # terms in some owl:sameAs fact (a superset)
        self.same_literals: set[int] = set()  # literals with a data value in some owl:sameAs fact (a superset)
        self.literal_types = self.terms.literal_types
        self.literal_values = self.terms.literal_values
        self.same_value = self.terms.same_value
        self._cards: dict[int, bool] = {}
        self.propagated = Propagated()  # scm-dom1/2, scm-rng1/2
        self.reflexive: set[int] = set()  # x with (x sameAs x) in the closure, or on its way there (eq-ref)
        axioms = [tuple(self.terms.iri_id(x) for x in t) for t in triggers.axioms()]
        self.assert_graph(SYSTEM, axioms)  # type: ignore[arg-type]

    # -- what rules read ---------------------------------------------------------------------------------
    def has(self, s: int, p: int, o: int) -> bool:
        d = self.ps.get(p)
        return d is not None and o in d.get(s, _E)

    def holds(self, s: int, p: int, o: int) -> bool:
        """In the closure: a fact the rules read (`has`), or a propagated domain or range."""
        return self.has(s, p, o) or self.propagated.has(s, p, o)

    def members(self, head: int) -> tuple[int, ...] | None:
        # A cell can have several rdf:first (or rdf:rest) values only when eq-rep copied them from
        # owl:sameAs terms; any one of them gives the same closure, and the least id keeps it stable.
        firsts, rests = self.ps[FIRST], self.ps[REST]
        out: list[int] = []
        seen: set[int] = set()
        node = head
        while node != NIL:
            if node in seen:
                return None
            seen.add(node)
            f, r = firsts.get(node), rests.get(node)
            if not f or not r:
                return None
            out.append(min(f))
            node = min(r)
        return tuple(out)

    def heads(self, cell: int) -> Iterable[int]:
        rest_of = self.po[REST]
        found = {cell}
        todo = [cell]
        while todo:
            for prev in rest_of.get(todo.pop(), _E):
                if prev not in found:
                    found.add(prev)
                    todo.append(prev)
        return found

    def cardinality_one(self, literal: int) -> bool:
        hit = self._cards.get(literal)
        if hit is None:
            term = self.terms.terms[literal]
            hit = False
            if isinstance(term, ox.Literal):
                import rdflib

                # owlrl compares the literal's value with 1, as rdflib converts it ("1"^^xsd:integer, "1.0"^^xsd:decimal)
                value = rdflib.Literal(term.value, datatype=rdflib.URIRef(term.datatype.value)).value
                hit = type(value) is not bool and value == 1
            self._cards[literal] = hit
        return hit

    # -- changes -----------------------------------------------------------------------------------------
    def intern(self, triples: Iterable[ox.Triple | ox.Quad]) -> list[Fact]:
        """Facts for pyoxigraph triples (RDF-star triples left out)."""
        known = self.terms._ids.get
        new = self.terms.id
        out: list[Fact] = []
        for t in triples:
            s, p, o = t.subject, t.predicate, t.object
            if isinstance(s, ox.Triple) or isinstance(o, ox.Triple):
                continue
            si, pi, oi = known(s), known(p), known(o)
            out.append((new(s) if si is None else si, new(p) if pi is None else pi, new(o) if oi is None else oi))
        return out

    def assert_graph(self, name: str, facts: Iterable[Fact]) -> Change:
        """Make `name` assert exactly `facts` (replacing what it asserted before); update the closure."""
        new = set(facts)
        old = self.graphs.get(name, set())
        gone, came = old - new, new - old
        self.graphs[name] = new
        if not new and name != SYSTEM:
            del self.graphs[name]
        lost = []
        for f in gone:
            n = self.asserted[f] - 1
            if n:
                self.asserted[f] = n
            else:
                del self.asserted[f]
                s, p, o = f
                objs = self.asserted_ps[p][s]
                objs.discard(o)
                if not objs:
                    del self.asserted_ps[p][s]
                lost.append(f)
        fresh = []
        for f in came:
            n = self.asserted.get(f, 0)
            self.asserted[f] = n + 1
            if not n:
                s, p, o = f
                self.asserted_ps.setdefault(p, {}).setdefault(s, set()).add(o)
                fresh.append(f)
        change = Change()
        if lost:
            self._delete(lost, change)
        if fresh:
            self.insert_facts(fresh, change)
        if change.added or change.removed:
            self._propagate(change)
        return change

    def _propagate(self, change: Change) -> None:
        """Bring the domains and ranges of `propagated` up to date; a triple that moved between the
        closure's own facts and that view neither came nor went."""
        gained, lost = self.propagated.update(self, change.added, change.removed)
        # the view holds only what the closure's own facts lack: a lost triple now among them came in with
        # this change, and a gained one that was among them went with it
        stayed = {f for f in lost if self.has(*f)}
        was_removed = set(change.removed) if gained and change.removed else set()
        back = {f for f in gained if f in was_removed}
        if stayed:
            change.added = [f for f in change.added if f not in stayed]
        if back:
            change.removed = [f for f in change.removed if f not in back]
        change.added += [f for f in gained if f not in back]
        change.removed += [f for f in lost if f not in stayed]

    def retract_graph(self, name: str) -> Change:
        return self.assert_graph(name, ())

    def insert_facts(self, facts: Iterable[Fact], change: Change) -> None:
        """Insert facts and everything they entail with what is there (semi-naive), noting them in `change`."""
        # List cells first: a rule reading a list sees it whole, never a prefix of it.
        queue = deque(sorted(facts, key=lambda f: f[1] != FIRST and f[1] != REST))
        added = change.added
        ps, po = self.ps, self.po
        gates = _GATES
        consequences, reflexive_consequences = triggers.consequences, triggers.consequences_of_reflexive
        pop, push = queue.popleft, queue.append
        out: list[Fact] = []
        before = len(added)
        reflexive, kinds = self.reflexive, self.terms.kinds
        reflect = self._reflect
        while queue:
            f = pop()
            s, p, o = f
            d = ps.get(p)
            if d is None:
                d = ps[p] = {}
                po[p] = {}
            objs = d.get(s)
            if objs is None:
                d[s] = {o}
            elif o in objs:
                continue
            else:
                objs.add(o)
            subs = po[p].get(o)
            if subs is None:
                po[p][o] = {s}
            else:
                subs.add(s)
            added.append(f)
            # eq-ref, for every term RDF can have as a subject (spelt out: this runs for every fact)
            if s not in reflexive and kinds[s] != LITERAL:
                reflect(s, added)
            if p not in reflexive and kinds[p] != LITERAL:
                reflect(p, added)
            if o not in reflexive and kinds[o] != LITERAL:
                reflect(o, added)
            if s == o and p in INERT:
                reflexive_consequences(self, s, p, o, out)
            else:
                if p in gates or (p == T and o in PROPERTY_CHARACTERISTICS):
                    self._open_gates(s, p, o)
                consequences(self, s, p, o, out)
            for c in out:
                cs, cp, co = c
                dd = ps.get(cp)
                if dd is None or co not in dd.get(cs, _E):
                    push(c)
            out.clear()
        self.size += len(added) - before

    def _reflect(self, x: int, added: list[Fact]) -> None:
        """(x sameAs x) into the closure at once (eq-ref): it is inert, so it need not wait in the queue."""
        self.reflexive.add(x)
        if SAME not in self.reflexive:
            self._reflect(SAME, added)
        objs = self.ps[SAME].get(x)
        if objs is None:
            self.ps[SAME][x] = {x}
        elif x in objs:
            return
        else:
            objs.add(x)
        subs = self.po[SAME].get(x)
        if subs is None:
            self.po[SAME][x] = {x}
        else:
            subs.add(x)
        added.append((x, SAME, x))

    def _open_gates(self, s: int, p: int, o: int) -> None:
        if p in EXPRESSION_SUBJECT:
            self.class_expressions.add(s)
        if p in EXPRESSION_OBJECT:
            self.class_expressions.add(o)
        if p == T:
            self.axiomatized.add(s)  # a characteristic (prp-symp, prp-trp, prp-fp, prp-ifp)
            return
        if s == o and p == triggers.SPO:
            return  # scm-op's p ⊑ p: prp-spo1 concludes nothing new from it
        if p in AXIOM_SUBJECT_PROPERTY:
            self.axiomatized.add(s)
        if p in AXIOM_OBJECT_PROPERTY:
            self.axiomatized.add(o)
        if p == SAME:
            self.same_terms.add(s)
            self.same_terms.add(o)
            if s in self.literal_values:  # eq-sym puts every such literal in subject position
                self.same_literals.add(s)

    def _delete(self, lost: list[Fact], change: Change) -> None:
        rederive.withdraw(self, lost, change)

    def remove_fact(self, f: Fact) -> None:
        """Take one fact out of the indexes (delete and re-derive decides which: `rederive`)."""
        s, p, o = f
        objs = self.ps[p][s]
        objs.discard(o)
        if not objs:
            del self.ps[p][s]
        subs = self.po[p][o]
        subs.discard(s)
        if not subs:
            del self.po[p][o]
        if s == o and p == SAME:
            self.reflexive.discard(s)
        self.size -= 1

    # -- reads -------------------------------------------------------------------------------------------
    def facts(self, predicate: int | None = None) -> Iterator[Fact]:
        """Every fact of the closure (with `predicate`), the propagated domains and ranges included."""
        preds = self.ps.items() if predicate is None else [(predicate, self.ps.get(predicate, {}))]
        for p, d in preds:
            for s, objs in d.items():
                for o in objs:
                    yield s, p, o
        yield from self.propagated.facts(predicate)

    def is_asserted(self, f: Fact) -> bool:
        return f in self.asserted and any(f in facts for name, facts in self.graphs.items() if name != SYSTEM)

    def is_rdf(self, f: Fact) -> bool:
        """Whether a fact is reported as RDF: not generalised (literal subject, predicate not an IRI)."""
        s, p, o = f
        kinds = self.terms.kinds
        return kinds[s] != LITERAL and kinds[p] == NAMED

    def triple(self, f: Fact) -> ox.Triple | None:
        """The RDF triple of a fact, or None (see `is_rdf`)."""
        if not self.is_rdf(f):
            return None
        terms = self.terms.terms
        s, p, o = f
        return ox.Triple(terms[s], terms[p], terms[o])  # type: ignore[arg-type]

    def user_asserted(self) -> set[Fact]:
        out: set[Fact] = set()
        for name, facts in self.graphs.items():
            if name != SYSTEM:
                out |= facts
        return out
