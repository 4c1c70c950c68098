"""The query replica: the graphs `/sparql` answers from, copied into the query processes' own stores.

The durable store is written by the server; the query processes (`semreg.sparql.worker`) each hold an
in-memory copy of its visible graphs, made from a snapshot and kept current by changes, both plain
data that can cross a process (or a network) boundary:

    snapshot: bytes                                   N-Quads of every visible graph
    ("graph", iri, ntriples | None)                   replace (None: drop) one named graph
    ("patch", iri, removed ntriples, added ntriples)  remove these triples from one graph, then add those
    ("instances", [instance IRI, ...], nquads)        remove these instances' RDF, then add the quads

Blank node labels are kept as written, in snapshots and changes alike, so a blank node that two graphs
share (an ontology's class expression and the closure's triples about it) stays one node in the copy.
"""
from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Sequence
from typing import Any

import pyoxigraph as ox

from semreg.sparql import queries

Change = tuple[Any, ...]


def snapshot(store: ox.Store, hidden: Iterable[ox.NamedNode] = ()) -> bytes:
    """N-Quads of every graph of `store` but the `hidden` ones (the default graph included)."""
    hidden = set(hidden)
    graphs: list[Any] = [ox.DefaultGraph()]
    graphs += sorted((g for g in store.named_graphs() if g not in hidden), key=str)
    quads = itertools.chain.from_iterable(store.quads_for_pattern(None, None, None, g) for g in graphs)
    return bytes(ox.serialize(quads, format=ox.RdfFormat.N_QUADS) or b"")


def load(store: ox.Store, data: bytes) -> None:
    """Replace everything in `store` with a snapshot."""
    store.clear()
    if data:
        store.extend(_quads(data))


def graph_change(graph: ox.NamedNode, triples: Sequence[ox.Triple] | None) -> Change:
    data = None if triples is None else bytes(ox.serialize(triples, format=ox.RdfFormat.N_TRIPLES) or b"")
    return ("graph", graph.value, data)


def patch_change(graph: ox.NamedNode, removed: Collection[ox.Triple], added: Collection[ox.Triple]) -> Change:
    return ("patch", graph.value, _ntriples(removed), _ntriples(added))


def _ntriples(triples: Collection[ox.Triple]) -> bytes:
    return bytes(ox.serialize(triples, format=ox.RdfFormat.N_TRIPLES) or b"") if triples else b""


def instances_change(removed: Sequence[str], quads: Sequence[ox.Quad] | str) -> Change:
    """Instances removed (their IRIs; a replaced one is removed, then added) and added (quads, or their
    N-Quads text)."""
    if isinstance(quads, str):
        data = quads.encode()
    else:
        data = bytes(ox.serialize(quads, format=ox.RdfFormat.N_QUADS) or b"") if quads else b""
    return ("instances", list(removed), data)


def apply(store: ox.Store, changes: Iterable[Change]) -> None:
    """Apply changes in order; an unknown kind is a programming error, not data."""
    for change in changes:
        kind = change[0]
        if kind == "graph":
            _, iri, data = change
            graph = ox.NamedNode(iri)
            if store.contains_named_graph(graph):
                store.remove_graph(graph)
            if data:
                store.extend(ox.Quad(t.subject, t.predicate, t.object, graph)
                             for t in ox.parse(data, format=ox.RdfFormat.N_TRIPLES, lenient=True))
        elif kind == "patch":
            _, iri, removed, added = change
            graph = ox.NamedNode(iri)
            for t in _triples(removed):
                store.remove(ox.Quad(t.subject, t.predicate, t.object, graph))
            store.extend(ox.Quad(t.subject, t.predicate, t.object, graph) for t in _triples(added))
        elif kind == "instances":
            _, removed, data = change
            for iri in removed:
                node = ox.NamedNode(iri)
                if next(iter(store.quads_for_pattern(node, None, None)), None) is not None:
                    store.update(queries.delete_instance(iri))
            if data:
                store.extend(_quads(data))
        else:
            raise ValueError(f"unknown replica change {kind!r}")


def _quads(data: bytes) -> Iterable[ox.Quad]:
    return ox.parse(data, format=ox.RdfFormat.N_QUADS, lenient=True)


def _triples(data: bytes) -> Iterable[ox.Quad]:
    return ox.parse(data, format=ox.RdfFormat.N_TRIPLES, lenient=True) if data else ()
