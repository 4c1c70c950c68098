"""Why a registered tag matched a query: per component, the chain of subclass, subproperty, type or
equivalence steps between the registered term and the queried one (the steps `distance` counts).

    {"s": {"degree": "narrower", "steps": [{"s": ".../Livro", "p": rdfs:subClassOf, "o": ".../Obra",
                                            "asserted": true}]},
     "p": {"degree": "exact", "steps": []}, "o": {"degree": "exact", "steps": [], "wildcard": true}}

A step reads upwards, as the triple it stands for: narrower components go from the registered term up
to the queried one, broader ones from the queried term up to the registered one. A step is `asserted`
when some ontology states it (up to equivalent terms); a relation that is only entailed (through an
intersection, say) is one step that is not.
"""
from __future__ import annotations

from typing import Any

from semreg.rdf.terms import ANY, Tag
from semreg.reasoning.hierarchy import EQUIVALENT_CLASS, EQUIVALENT_PROPERTY, SAME_AS, SUB_CLASS, SUB_PROPERTY, TYPE, Hierarchy
from semreg.reasoning.matching import BROADER, EXACT, NARROWER, component_match
from semreg.reasoning.similarity import index_of


def explain(hierarchy: Hierarchy, registered: Tag, query: Tag, similar: bool = False) -> dict[str, Any]:
    """Each component's degree and steps; a component that does not match has `"degree": null` and, under
    `similar`, what makes it close (shared words, the deepest common ancestor: `similarity.Explanation`)."""
    out: dict[str, Any] = {}
    for name, r, q in zip("spo", registered, query):
        m = component_match(r, q, hierarchy)
        if m is None:
            out[name] = {"degree": None, "steps": [],
                         **({"similar": index_of(hierarchy).explain(q, r).as_json()} if similar else {})}
        elif ANY in (r, q):
            out[name] = {"degree": m[0], "steps": [], "wildcard": True}
        else:
            out[name] = {"degree": m[0], "steps": steps(hierarchy, r, q, m[0])}
    return out


def steps(hierarchy: Hierarchy, r: str, q: str, degree: str) -> list[dict[str, Any]]:
    if degree == EXACT:
        if r == q:
            return []
        return [{"s": r, "p": _equivalence(hierarchy.kind(r)), "o": q, "asserted": True}]
    lower, upper = (r, q) if degree == NARROWER else (q, r)
    assert degree in (NARROWER, BROADER)
    path = hierarchy.chain(lower, upper) or [lower, upper]
    asserted = len(path) > 2 or hierarchy.canon(upper) in hierarchy.asserted_up.get(hierarchy.canon(lower), ())
    return [{"s": a, "p": _step(hierarchy.kind(a)), "o": b, "asserted": asserted}
            for a, b in zip(path, path[1:])]


def _step(kind: str) -> str:
    return {"individual": TYPE, "property": SUB_PROPERTY}.get(kind, SUB_CLASS)


def _equivalence(kind: str) -> str:
    return {"individual": SAME_AS, "property": EQUIVALENT_PROPERTY}.get(kind, EQUIVALENT_CLASS)
