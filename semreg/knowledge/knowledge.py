"""What every node holds whole: the ontologies, the CURIE prefixes, the closure's hierarchy index and the saved
queries (`semreg.knowledge.queries`).

Instances are partitioned (`semreg.registry.shard`); this is not: it is small, and every node needs all of it to
expand a query itself. A new closure is installed at once (the next request uses it) and announced to
the listeners (`on_hierarchy`): each shard's catalogue re-indexes, watches recompute, metrics observe.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from semreg.errors import Conflict, InvalidTerm, NotFound
from semreg.knowledge.ontologies import Ontologies, Published, Write
from semreg.knowledge.queries import SavedQueries
from semreg.rdf import xml_bounds
from semreg.rdf.terms import ANY, PrefixMap, Tag, check_iri, validate_prefix_name
from semreg.reasoning import expansion
from semreg.reasoning.lexicon import Lexicon
from semreg.reasoning.matching import DEGREES, RANK, SIMILAR, floor_of, needs_directions
from semreg.reasoning.reasoner import Hierarchy
from semreg.reasoning.similarity import index_of
from semreg.storage.store import Store
from semreg.work.lane import offload

log = logging.getLogger("semreg.knowledge")

HierarchyListener = Callable[[Hierarchy, float], None]  # (the new hierarchy, seconds the closure took)


class Knowledge:
    def __init__(self, store: Store, write: Write, replica: Published, strict_terms: bool = False,
                 xml_depth: int = xml_bounds.DEPTH) -> None:
        self.store = store
        self._write = write
        self.prefixes = PrefixMap()
        self.hierarchy = Hierarchy()
        self.lexicon = Lexicon()
        self.strict_terms = strict_terms
        self.ontologies = Ontologies(store, replica, write, self._install, xml_depth)
        self.queries = SavedQueries(store, write)
        self._listeners: list[HierarchyListener] = []
        self.closure_ms = 0.0
        self.closure_rebuilds = 0

    def on_hierarchy(self, listener: HierarchyListener) -> None:
        self._listeners.append(listener)

    async def open(self, files: Iterable[Path] = ()) -> None:
        """Restore prefixes and ontologies from the records, then preload `files` (unchanged ones skip)."""
        for prefix, iri in (await self._write(self.store.load_prefixes)).items():
            self.prefixes.set(prefix, iri)
        await self.ontologies.restore()
        await self.queries.restore()
        for path in files:
            await self.ontologies.load_file(path)

    def _install(self, hierarchy: Hierarchy, prefixes: dict[str, str], ms: float) -> None:
        _log_prefix_changes(self.prefixes.ontology, prefixes)
        self.prefixes.set_ontology_prefixes(prefixes)
        self.hierarchy = hierarchy
        self.lexicon = Lexicon(dict(self.ontologies.terms))
        self.closure_ms = ms
        self.closure_rebuilds += 1
        for listener in self._listeners:
            listener(hierarchy, ms / 1000)

    # -- prefixes ----------------------------------------------------------------------------------
    def check_prefix_change(self, prefix: str, iri: str, force: bool) -> None:
        """409 naming the ontologies that declare `prefix` as another namespace, unless `force`: a prefix
        an ontology declares is how every client's CURIEs reach its terms, so redefining it is meant or
        a mistake, and the request must say which."""
        validate_prefix_name(prefix)
        declared = {name: ns for name, ns in self.ontologies.declaring(prefix).items() if ns != iri}
        if not declared or force:
            return
        names = ", ".join(f"'{name}' (as {ns})" for name, ns in sorted(declared.items()))
        which = "the ontology" if len(declared) == 1 else "the ontologies"
        raise Conflict(f"the prefix '{prefix}' is declared by {which} {names}; redefining it changes what "
                       f"{prefix}: means for every client. Add ?force=true to redefine it anyway.",
                       prefix=prefix, iri=iri, ontologies=dict(sorted(declared.items())))

    async def put_prefix(self, prefix: str, iri: str, by: str | None = None, forced: bool = False) -> bool:
        """Set a client prefix; True when it is new. `by` names who asked (None: applied from the cluster)."""
        validate_prefix_name(prefix)
        check_iri(iri)
        created = prefix not in self.prefixes.explicit
        previous = self.prefixes.get(prefix)
        await self._write(self.store.set_prefix, prefix, iri)
        self.prefixes.set(prefix, iri)
        log.info("prefix set", extra={"prefix": prefix, "iri": iri, "previous": previous, "forced": forced,
                                      "by": by, "declared_by": sorted(self.ontologies.declaring(prefix))})
        return created

    async def delete_prefix(self, prefix: str, by: str | None = None) -> None:
        if prefix not in self.prefixes.explicit:
            raise NotFound(f"no client-set prefix '{prefix}' (prefixes declared in ontologies go with them).")
        previous = self.prefixes.get(prefix)
        await self._write(self.store.delete_prefix, prefix)
        self.prefixes.delete(prefix)
        log.info("prefix deleted", extra={"prefix": prefix, "previous": previous, "now": self.prefixes.get(prefix),
                                          "by": by})

    # -- reads -------------------------------------------------------------------------------------
    def knows_all(self, named: Iterable[tuple[str, str]]) -> bool:
        """Whether the uploaded ontologies know every term of `(field, iri)` pairs (no warning to make)."""
        return self.knows_every(iri for _, iri in named)

    def knows_every(self, iris: Iterable[str]) -> bool:
        """Whether the uploaded ontologies know every one of these terms."""
        knows = self.lexicon.knows
        return all(knows(iri) for iri in set(iris))  # each term once (tags share them)

    def term_warnings(self, named: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
        """The warnings (JSON) about terms no uploaded ontology knows among `(field, iri)` pairs; with
        `strict_terms`, a 400 naming the first of them instead. The close known terms are looked for on a
        worker thread when this runs as request work (`semreg.work.lane.offload`): difflib over the names of a
        20,000-class ontology takes tens of milliseconds a term."""
        found = offload(self.lexicon.check, list(named))
        if not found:
            return []
        compact = self.prefixes.compact
        warnings = [w.as_json(compact) for w in found]
        if self.strict_terms:
            first = found[0]
            raise InvalidTerm(f"{first.message(compact)} This registry refuses such terms (--strict-terms).",
                              field=first.field, term=first.iri, suggestions=list(first.suggestions),
                              warnings=warnings)
        return warnings

    def expand(self, query: Tag, match: frozenset[str]) -> dict[str, list[dict[str, Any]]]:
        """What each component of `query` expands to, ranked: exact, narrower, broader (the wildcard
        last), then by distance and term; with `similar` asked, then the terms close to it, best first, each
        with why (`semreg.reasoning.similarity.Explanation`)."""
        components: dict[str, list[dict[str, Any]]] = {}
        want_narrower, want_broader = needs_directions(match)
        for name, q in zip("spo", query):
            found = expansion.candidates(self.hierarchy, q, want_narrower, want_broader)
            if found is None:
                components[name] = [{"iri": ANY, "degree": DEGREES[0], "distance": 0, "wildcard": True}]
                continue
            rows = sorted(found.items(), key=lambda r: (RANK[r[1][0]], r[0] == ANY, r[1][1], r[0]))
            components[name] = [{"iri": t, "degree": d, "distance": n, **({"wildcard": True} if t == ANY else {})}
                                for t, (d, n) in rows]
            floor = floor_of(match)
            if floor is not None:
                components[name] += self._similar_terms(q, set(found), floor)
        return components

    def _similar_terms(self, q: str, logical: set[str], floor: float) -> list[dict[str, Any]]:
        index = index_of(self.hierarchy)
        related = logical | self.hierarchy.ancestors(q) | self.hierarchy.descendants(q) | self.hierarchy.equivalents(q)
        return [{"iri": t, "degree": SIMILAR, "distance": 0, **index.explain(q, t).as_json()}
                for t, _ in index.nearest(q, self.hierarchy.kinds.keys(), floor) if t not in related]

    def concepts(self) -> list[dict[str, Any]]:
        """Every class, property and individual of the hierarchy, by IRI, with its asserted parents."""
        h = self.hierarchy
        terms = set(h.kinds) | set(h.asserted_parents)
        return [{"iri": t, "kind": h.kind(t), "label": h.labels.get(t), "parents": sorted(h.asserted_parents.get(t, ()))}
                for t in sorted(terms)]

    def concept(self, iri: str, registered: Callable[[str], bool]) -> dict[str, Any]:
        """A concept's kind, label and relatives; `registered(iri)` says whether some tag names it."""
        h = self.hierarchy
        if not (iri in h.kinds or h.canon(iri) in h.up or registered(iri)):
            raise NotFound(f"'{iri}' is not a concept of any uploaded ontology nor a term of any registered tag.")
        parents = sorted(h.asserted_parents.get(iri, ()))
        children = sorted(c for c, ps in h.asserted_parents.items() if iri in ps)
        return {"iri": iri, "kind": h.kind(iri), "label": h.labels.get(iri),
                "equivalents": sorted(h.equivalents(iri) - {iri}), "parents": parents, "children": children,
                "ancestors": sorted(h.ancestors(iri)), "descendants": sorted(h.descendants(iri))}


def _log_prefix_changes(before: dict[str, str], after: dict[str, str]) -> None:
    """One line when uploads change the prefixes they declare: which came, which went, which now mean another
    namespace."""
    changed = {p: [before[p], iri] for p, iri in after.items() if p in before and before[p] != iri}
    added = {p: iri for p, iri in after.items() if p not in before}
    removed = sorted(set(before) - set(after))
    if changed or added or removed:
        log.info("ontology prefixes changed", extra={"added": added, "changed": changed, "removed": removed})
