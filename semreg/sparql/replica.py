"""The query replica: the graphs `/sparql` answers from, copied into the query processes' own stores.

The durable store is written by the server; the query processes (`semreg.sparql.worker`) each hold an
in-memory copy of its visible graphs, made from a snapshot and kept current by changes, both plain
data that can cross a process (or a network) boundary:

    snapshot: bytes                                   N-Quads of every visible graph
    ("graph", iri, ntriples | None)                   replace (None: drop) one named graph
    ("patch", iri, removed ntriples, added ntriples)  remove these triples from one graph, then add those
    ("instances", [instance IRI, ...], nquads, put)   remove these instances' RDF, then add the quads; `put`
                                                      lists the instances the quads are of (None: not said)

The feed (`semreg.sparql.feed`) lists as removed only the instances a copy may hold (published before):
looking each new one up cost the template on disk about a tenth of its time under a stream of registrations.
`merged` makes one change of consecutive instance changes about different instances, so that a copy on disk
takes a burst of passes held for it in one bulk load (`apply`'s `bulk_bytes`): ~260 µs an instance of 3 tags
in loads of 500 instances, ~190 in loads of 5,000, ~165 in loads of 20,000.

Blank node labels are kept as written, in snapshots and changes alike, so a blank node that two graphs
share (an ontology's class expression and the closure's triples about it) stays one node in the copy.

pyoxigraph's in-memory store never gives back what replaced quads took: replacing 3,000 × 30 quads with new
values twenty times took one from 55 to 760 MB RSS while it held 90,000 quads throughout (`malloc_trim`
returned 1%). A copy that has taken in changes worth more than half its size (`Wear`) is therefore rebuilt
from its own snapshot, which costs what loading it cost and bounds what it keeps of replaced quads; so is
one that took in a tenth of its size once the changes stop (the end of a bulk load).
"""
from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Sequence
from typing import Any

import pyoxigraph as ox

from semreg.sparql import queries

Change = tuple[Any, ...]
WEAR_RATIO = 0.5  # a copy is rebuilt once its changes weigh this much of its snapshot ...
WEAR_FLOOR_BYTES = 4 << 20  # ... and at least this much (a small copy is not rebuilt at every change)
SETTLED_RATIO = 0.1  # ... or, once the changes stop coming for a while, this much (`Wear.settled`)
SETTLE_S = 10.0  # how long "a while" is: a bulk load has ended
REMOVAL_BYTES = 2048  # what a removed instance weighs (its quads are not in the change): about 3 tags' worth


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


def rebuilt(store: ox.Store) -> tuple[ox.Store, int]:
    """A fresh store holding what `store` holds, and the size of the snapshot it was made from."""
    data = snapshot(store)
    fresh = ox.Store()
    load(fresh, data)
    return fresh, len(data)


def weight(changes: Iterable[Change]) -> int:
    """What changes weigh against a snapshot's size: the bytes of RDF they carry, removals estimated."""
    total = 0
    for change in changes:
        if change[0] == "instances":
            total += len(change[2] or b"") + REMOVAL_BYTES * len(change[1])
        elif change[0] == "patch":
            total += len(change[2]) + len(change[3])
        elif change[0] == "graph":
            total += len(change[2] or b"")
    return total


class Wear:
    """How much a copy took in since it was built from a snapshot of `size` bytes."""

    def __init__(self, size: int = 0) -> None:
        self.size = size
        self.changed = 0

    def add(self, changed: int) -> None:
        self.changed += changed

    @property
    def worn(self) -> bool:
        return self.changed > max(WEAR_FLOOR_BYTES, self.size * WEAR_RATIO)

    @property
    def settled(self) -> bool:
        """Whether the copy is worth rebuilding once no change has come for `SETTLE_S`: a store that grew by
        changes (a bulk load) holds ~550 bytes a quad, one loaded from a snapshot ~340 (100,000 instances:
        1.65 GB against ~1 GB, shared by the template and every query process)."""
        return self.changed > max(WEAR_FLOOR_BYTES, self.size * SETTLED_RATIO)

    def renew(self, size: int) -> None:
        self.size, self.changed = size, 0


def graph_change(graph: ox.NamedNode, triples: Sequence[ox.Triple] | None) -> Change:
    data = None if triples is None else bytes(ox.serialize(triples, format=ox.RdfFormat.N_TRIPLES) or b"")
    return ("graph", graph.value, data)


def patch_change(graph: ox.NamedNode, removed: Collection[ox.Triple], added: Collection[ox.Triple]) -> Change:
    return ("patch", graph.value, _ntriples(removed), _ntriples(added))


def _ntriples(triples: Collection[ox.Triple]) -> bytes:
    return bytes(ox.serialize(triples, format=ox.RdfFormat.N_TRIPLES) or b"") if triples else b""


def instances_change(removed: Sequence[str], quads: Sequence[ox.Quad] | str,
                     put: Sequence[str] | None = None) -> Change:
    """Instances removed (their IRIs; a replaced one is removed, then added) and added (quads, or their
    N-Quads text), and `put`, the IRIs of the instances those quads are of (without it, `merged` never
    joins the change with another)."""
    if isinstance(quads, str):
        data = quads.encode()
    else:
        data = bytes(ox.serialize(quads, format=ox.RdfFormat.N_QUADS) or b"") if quads else b""
    return ("instances", list(removed), data, None if put is None else list(put))


def merged(batches: Iterable[Sequence[Change]]) -> list[Change]:
    """The changes of `batches`, in order, with consecutive instance changes that say which instances they
    put, and touch no instance another of them touches, made one (their removals, then all their quads:
    the same as applying them in turn, since none undoes what another did)."""
    out: list[Change] = []
    removed: list[str] = []
    put: list[str] = []
    parts: list[bytes] = []
    touched: set[str] = set()

    def close() -> None:
        if parts:
            out.append(("instances", removed.copy(), b"".join(parts), put.copy()))
        for kept in (removed, put, parts, touched):
            kept.clear()

    for change in itertools.chain.from_iterable(batches):
        joinable = change[0] == "instances" and len(change) > 3 and change[3] is not None
        if not joinable:
            if parts:
                close()
            out.append(change)
            continue
        iris = [*change[1], *change[3]]
        if not touched.isdisjoint(iris):
            close()
        removed.extend(change[1])
        put.extend(change[3])
        parts.append(change[2])
        touched.update(iris)
    close()
    return out


def apply(store: ox.Store, changes: Iterable[Change], bulk_bytes: int | None = None) -> None:
    """Apply changes in order; an unknown kind is a programming error, not data. With `bulk_bytes`, instances
    whose N-Quads are at least that long go in with one bulk load (`Store.bulk_extend`: tables made beside the
    store, no transaction), for a copy on disk that nothing reads while it is written (`semreg.sparql.worker`)."""
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
            removed, data = change[1], change[2]
            for iri in removed:
                node = ox.NamedNode(iri)
                if next(iter(store.quads_for_pattern(node, None, None)), None) is not None:
                    store.update(queries.delete_instance(iri))
            if data and bulk_bytes is not None and len(data) >= bulk_bytes:
                store.bulk_extend(_quads(data))  # parsed here, so blank nodes keep their labels
            elif data:
                store.extend(_quads(data))
        else:
            raise ValueError(f"unknown replica change {kind!r}")


def _quads(data: bytes) -> Iterable[ox.Quad]:
    return ox.parse(data, format=ox.RdfFormat.N_QUADS, lenient=True)


def _triples(data: bytes) -> Iterable[ox.Quad]:
    return ox.parse(data, format=ox.RdfFormat.N_TRIPLES, lenient=True) if data else ()
