"""The feed of the query replica: what `/sparql` answers from, kept current behind the writes.

The durable truth is the records (`semreg.storage.store`); the RDF that SPARQL sees is derived from them:
each ontology's triples, the closure of all of them, and every instance in the registry vocabulary
(`semreg.storage.vocabulary`, five quads a tag). This module turns changes of those into replica changes
(`semreg.sparql.replica`) on one background thread, batching whatever piled up since its last pass (a
1,000-tag instance is 5,000 quads), and hands them to `on_replica` (the query pool), in order. The
closure graph comes whole (start-up, a change computed from scratch) or as patches (a change to one
ontology changes little of it), which a pass folds into one.

It keeps what it last published (views packed, `semreg.sparql.packed_views`; triples), so that
`request_snapshot()` can publish a whole snapshot between two passes: snapshot and changes form one ordered
stream, and a new query process starts from the snapshot and applies what follows it. `/sparql` waits for the passes pending
when a query arrives (`pending`, `wait()`), so a client that registered and then queries sees its write. Each
change gets a ticket when it is asked for (`on_requested`), and each pass ends with `("ticket", n)` in
the stream: a query process that has read ticket `n` has every change asked for up to it.
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import pyoxigraph as ox

from semreg.sparql import replica
from semreg.sparql.packed_views import PackedViews
from semreg.storage.store import INFERRED, instance_node, ontology_graph
from semreg.storage.vocabulary import instance_nquads

log = logging.getLogger("semreg.replica_feed")

View = dict[str, Any]


class ReplicaFeed:
    """One background thread; `wait()` returns once everything asked for until then was published."""

    def __init__(self, foreign: Callable[[], Iterable[ox.Quad]] = tuple) -> None:
        """`foreign`: quads served as they are, read at each snapshot (graphs put in the data directory
        by other tools, `Store.foreign_quads`)."""
        self.on_replica: Callable[[tuple], None] | None = None  # called on the feed's thread, in order
        # called with each change's ticket as it is asked for (before the write is acknowledged)
        self.on_requested: Callable[[int], None] | None = None
        self.foreign = foreign
        self._cond = threading.Condition()
        self._instances: dict[str, View | None] = {}  # id → view to publish, or None to remove
        self._inferred: list[ox.Triple] | None = None
        self._patches: list[tuple[Iterable[ox.Triple], Iterable[ox.Triple]]] = []  # (added, removed), in order
        self._ontologies: dict[str, list[ox.Triple] | None] = {}  # name → triples, or None to drop
        self._snapshot_wanted = False
        self._requested = 0
        self._done = 0
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="semreg-replica-feed", daemon=True)
        # what was last published, for snapshots (only the feed's thread touches these)
        # each instance's view, packed (~0.1 KB against ~0.75 as JSON and ~3.5 as a dict), for every instance shown
        self._views = PackedViews()
        self._graphs: dict[str, list[ox.Triple]] = {}
        self._closure: set[ox.Triple] = set()  # the closure graph (urn:semreg:inferred)
        self.last_error: Exception | None = None
        self.published_changes = 0
        self.passes = 0

    def start(self) -> None:
        self._thread.start()

    # -- what changed (from the event loop) -----------------------------------------------------------
    def put_instance(self, view: View) -> int:
        return self._request(lambda: self._instances.__setitem__(view["id"], view))

    def remove_instance(self, instance_id: str) -> int:
        return self._request(lambda: self._instances.__setitem__(instance_id, None))

    def put_inferred(self, triples: list[ox.Triple], state: str = "") -> int:
        def change() -> None:
            self._inferred = triples
            self._patches = []
        return self._request(change)

    def patch_inferred(self, added: Iterable[ox.Triple], removed: Iterable[ox.Triple], state: str = "") -> int:
        """Change the closure graph by what one ontology change added to it and removed from it; the
        triples are read on the feed's thread. (`state`, what the closure is then computed from, matters
        only to a copy on disk.)"""
        return self._request(lambda: self._patches.append((added, removed)))

    def put_ontology(self, name: str, triples: list[ox.Triple], sha256: str = "") -> int:
        return self._request(lambda: self._ontologies.__setitem__(name, triples))

    def remove_ontology(self, name: str) -> int:
        return self._request(lambda: self._ontologies.__setitem__(name, None))

    def request_snapshot(self) -> None:
        """Publish a snapshot of everything to `on_replica` after the pass in progress."""
        with self._cond:
            self._snapshot_wanted = True
            self._cond.notify_all()

    def _request(self, change: Callable[[], None]) -> int:
        with self._cond:
            change()
            self._requested += 1
            if self.on_requested is not None:
                self.on_requested(self._requested)
            self._cond.notify_all()
            return self._requested

    # -- waiting ----------------------------------------------------------------------------------------
    def wait(self, ticket: int | None = None, timeout_s: float | None = None) -> bool:
        """Block until everything requested up to `ticket` (default: now) is published."""
        with self._cond:
            target = self._requested if ticket is None else ticket
            return self._cond.wait_for(lambda: self._done >= target or self._stopping, timeout_s)

    @property
    def pending(self) -> int:
        return self._requested - self._done

    def stop(self, timeout_s: float = 30.0) -> None:
        """Publish what is pending, then stop the thread."""
        self.wait(timeout_s=timeout_s)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    # -- the thread ---------------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._requested > self._done or self._stopping or self._snapshot_wanted)
                if self._stopping and self._requested == self._done:
                    return
                target = self._requested
                instances, self._instances = self._instances, {}
                inferred, self._inferred = self._inferred, None
                patches, self._patches = self._patches, []
                ontologies, self._ontologies = self._ontologies, {}
                snapshot, self._snapshot_wanted = self._snapshot_wanted, False
            try:
                self._pass(instances, ontologies, inferred, patches, snapshot)
            except Exception as exc:  # the thread must live on: a failed pass is logged, the next one runs
                self.last_error = exc
                log.exception("publishing replica changes failed; SPARQL may miss them until the next restart")
            del instances, ontologies, inferred, patches  # not kept while the thread waits for the next changes
            publish = self.on_replica
            if publish is not None:
                publish(("ticket", target))  # everything asked for up to `target` is in the stream before it
            with self._cond:
                self.passes += 1
                self._done = target
                self._cond.notify_all()

    def _pass(self, instances: dict[str, View | None], ontologies: dict[str, list[ox.Triple] | None],
              inferred: list[ox.Triple] | None, patches: list[tuple[Iterable[ox.Triple], Iterable[ox.Triple]]],
              snapshot: bool) -> None:
        started = time.perf_counter()
        publish = self.on_replica
        changes: list[replica.Change] = []
        for name, triples in ontologies.items():
            graph = ontology_graph(name).value
            if triples is None:
                self._graphs.pop(graph, None)
            else:
                self._graphs[graph] = triples
            if publish is not None:
                changes.append(replica.graph_change(ontology_graph(name), triples))
        if instances:
            # what a copy may hold of them is what was published before: a new instance has nothing to remove
            gone = [instance_node(i).value for i in instances if i in self._views]
            put = [instance_node(i).value for i, view in instances.items() if view is not None]
            for iid, view in instances.items():
                if view is None:
                    self._views.pop(iid)
                else:
                    self._views.put(iid, view)
            if publish is not None:
                added = "".join(instance_nquads(view) for view in instances.values() if view is not None)
                changes.append(replica.instances_change(gone, added, put))
        if inferred is not None or patches:
            gained, lost = self._patch_closure(inferred, patches)
            if publish is not None and inferred is not None:
                changes.append(replica.graph_change(INFERRED, list(self._closure)))
            elif publish is not None and (gained or lost):
                changes.append(replica.patch_change(INFERRED, lost, gained))
        if publish is not None and changes:
            publish(("changes", changes))
            self.published_changes += len(changes)
        if publish is not None and snapshot:
            publish(("snapshot", self._snapshot()))
        log.debug("replica changes published", extra={"instances": len(instances), "ontologies": len(ontologies),
                                                       "inferred": inferred is not None, "patches": len(patches),
                                                       "snapshot": snapshot,
                                                       "ms": round((time.perf_counter() - started) * 1000, 1)})

    def _patch_closure(self, inferred: list[ox.Triple] | None,
                       patches: list[tuple[Iterable[ox.Triple], Iterable[ox.Triple]]]
                       ) -> tuple[set[ox.Triple], set[ox.Triple]]:
        """Bring the closure graph kept here up to date: replace it when it came whole, then apply the
        patches in order. Returns what the patches added and removed, folded into one patch."""
        if inferred is not None:
            self._closure = set(inferred)
        graph = self._closure
        added: set[ox.Triple] = set()
        removed: set[ox.Triple] = set()
        for came, went in patches:
            for t in went:
                if t in graph:
                    graph.discard(t)
                    if t in added:
                        added.discard(t)
                    else:
                        removed.add(t)
            for t in came:
                if t not in graph:
                    graph.add(t)
                    if t in removed:
                        removed.discard(t)
                    else:
                        added.add(t)
        return added, removed

    def _snapshot(self) -> bytes:
        graphs = ((ox.Quad(t.subject, t.predicate, t.object, ox.NamedNode(g)) for t in triples)
                  for g, triples in sorted({**self._graphs, INFERRED.value: self._closure}.items()))
        quads = itertools.chain(self.foreign(), itertools.chain.from_iterable(graphs))
        head = bytes(ox.serialize(quads, format=ox.RdfFormat.N_QUADS) or b"")
        return head + "".join(instance_nquads(view) for view in self._views.values()).encode()
