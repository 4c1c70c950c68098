"""Write-behind materialisation of derived RDF: ontology graphs, instances in the registry vocabulary,
and the closure.

Records are written before a request is acknowledged (`semreg.store`); their RDF form (five quads a
tag) is written here, on one background thread, batching whatever piled up since the last pass. A
1,000-tag instance is 5,000 quads, ~60 ms on disk: too slow for the request path, cheap in a batch.
`/sparql` awaits `barrier()` first, so a client that registered and then queries sees its write.

The registry vocabulary (https://w3id.org/semreg#, `sr:`):
    ?i a sr:Instance ; sr:id ?id ; sr:service ?svc ; sr:address ?a ; sr:port ?port ; sr:scheme ?sch ;
       sr:status ?st ; sr:weight ?w ; sr:capacity ?c ; sr:ttl ?ttl ; sr:deregisterAfter ?d ;
       sr:registeredAt ?when ; sr:meta [ sr:key ?k ; sr:value ?v ] ; sr:tag ?t .
    ?t a rdf:Statement ; rdf:subject ?s ; rdf:predicate ?p ; rdf:object ?o .
Wildcard components are `sr:Any`. Instance IRIs are `urn:semreg:instance:{id}`.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pyoxigraph as ox

from semreg import queries
from semreg.store import INFERRED, REGISTRY, Store, instance_node
from semreg.terms import RDF, SR, XSD

log = logging.getLogger("semreg.materialize")

_T = {name: ox.NamedNode(SR + name) for name in (
    "Instance", "id", "service", "address", "port", "scheme", "status", "weight", "capacity", "ttl",
    "deregisterAfter", "registeredAt", "tag", "meta", "key", "value", "checkHttp", "checkTcp")}
TYPE = ox.NamedNode(RDF + "type")
STATEMENT = ox.NamedNode(RDF + "Statement")
SUBJ, PRED, OBJ = (ox.NamedNode(RDF + x) for x in ("subject", "predicate", "object"))
INTEGER, DECIMAL, DATETIME = (ox.NamedNode(XSD + x) for x in ("integer", "decimal", "dateTime"))
BATCH_QUADS = 50_000


def instance_quads(view: dict[str, Any]) -> list[ox.Quad]:
    """The registry-vocabulary RDF of one instance view."""
    g = REGISTRY
    i = instance_node(view["id"])

    def lit(value: Any, datatype: ox.NamedNode | None = None) -> ox.Literal:
        return ox.Literal(str(value), datatype=datatype) if datatype else ox.Literal(str(value))

    q = [ox.Quad(i, TYPE, _T["Instance"], g), ox.Quad(i, _T["id"], lit(view["id"]), g),
         ox.Quad(i, _T["service"], lit(view["service"]), g), ox.Quad(i, _T["address"], lit(view["address"]), g),
         ox.Quad(i, _T["port"], lit(view["port"], INTEGER), g), ox.Quad(i, _T["scheme"], lit(view["scheme"]), g),
         ox.Quad(i, _T["status"], lit(view["status"]), g), ox.Quad(i, _T["weight"], lit(view["weight"], INTEGER), g),
         ox.Quad(i, _T["ttl"], lit(view["ttl"], DECIMAL), g),
         ox.Quad(i, _T["deregisterAfter"], lit(view["deregister_after"], DECIMAL), g)]
    if view.get("capacity") is not None:
        q.append(ox.Quad(i, _T["capacity"], lit(view["capacity"], INTEGER), g))
    if view.get("registered_at"):
        q.append(ox.Quad(i, _T["registeredAt"], lit(view["registered_at"], DATETIME), g))
    check = view.get("check") or {}
    if check.get("http"):
        q.append(ox.Quad(i, _T["checkHttp"], lit(check["http"]), g))
    if check.get("tcp"):
        q.append(ox.Quad(i, _T["checkTcp"], lit(check["tcp"]), g))
    for k, v in (view.get("meta") or {}).items():
        m = ox.BlankNode()
        q += [ox.Quad(i, _T["meta"], m, g), ox.Quad(m, _T["key"], lit(k), g), ox.Quad(m, _T["value"], lit(v), g)]
    for tag in view["tags"]:
        t = ox.BlankNode()
        q += [ox.Quad(i, _T["tag"], t, g), ox.Quad(t, TYPE, STATEMENT, g),
              ox.Quad(t, SUBJ, ox.NamedNode(tag["s"]), g), ox.Quad(t, PRED, ox.NamedNode(tag["p"]), g),
              ox.Quad(t, OBJ, ox.NamedNode(tag["o"]), g)]
    return q


class Materializer:
    """One background thread writing derived RDF; `barrier()` waits until what was asked is written."""

    def __init__(self, store: Store, on_error: Callable[[Exception], None] | None = None) -> None:
        self.store = store
        self._cond = threading.Condition()
        self._instances: dict[str, dict[str, Any] | None] = {}  # id → view to write, or None to remove
        self._inferred: tuple[list[ox.Triple], str] | None = None
        self._ontologies: dict[str, tuple[list[ox.Triple], str | None]] = {}  # name → (triples, sha or None: drop)
        self._requested = 0
        self._done = 0
        self._stopping = False
        self._on_error = on_error
        self._thread = threading.Thread(target=self._run, name="semreg-materialize", daemon=True)
        self.last_error: Exception | None = None
        self.written_quads = 0
        self.batches = 0  # passes written; part of the store generation

    def start(self) -> None:
        self._thread.start()

    def put_instance(self, view: dict[str, Any]) -> int:
        return self._request(lambda: self._instances.__setitem__(view["id"], view))

    def remove_instance(self, instance_id: str) -> int:
        return self._request(lambda: self._instances.__setitem__(instance_id, None))

    def put_inferred(self, triples: list[ox.Triple], state: str) -> int:
        return self._request(lambda: setattr(self, "_inferred", (triples, state)))

    def put_ontology(self, name: str, triples: list[ox.Triple], sha256: str) -> int:
        return self._request(lambda: self._ontologies.__setitem__(name, (triples, sha256)))

    def remove_ontology(self, name: str) -> int:
        return self._request(lambda: self._ontologies.__setitem__(name, ([], None)))

    def _request(self, change: Callable[[], None]) -> int:
        with self._cond:
            change()
            self._requested += 1
            self._cond.notify_all()
            return self._requested

    def wait(self, ticket: int | None = None, timeout_s: float | None = None) -> bool:
        """Block until everything requested up to `ticket` (default: now) is written."""
        with self._cond:
            target = self._requested if ticket is None else ticket
            return self._cond.wait_for(lambda: self._done >= target or self._stopping, timeout_s)

    @property
    def pending(self) -> int:
        return self._requested - self._done

    def stop(self, timeout_s: float = 30.0) -> None:
        """Write what is pending, then stop the thread."""
        self.wait(timeout_s=timeout_s)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._requested > self._done or self._stopping)
                if self._stopping and self._requested == self._done:
                    return
                target = self._requested
                instances, self._instances = self._instances, {}
                inferred, self._inferred = self._inferred, None
                ontologies, self._ontologies = self._ontologies, {}
            try:
                for name, (triples, sha256) in ontologies.items():
                    self.store.replace_ontology_graph(name, triples, sha256)
                self._write(instances, inferred)
            except Exception as exc:
                self.last_error = exc
                log.exception("materialising derived RDF failed; it will be rebuilt at the next start")
                if self._on_error:
                    self._on_error(exc)
            with self._cond:
                self.batches += 1
                self._done = target
                self._cond.notify_all()

    def _write(self, instances: dict[str, dict[str, Any] | None], inferred: tuple[list[ox.Triple], str] | None) -> None:
        started = time.perf_counter()
        st = self.store.ox
        if instances:
            self._remove_instances(list(instances))
            batch: list[ox.Quad] = []
            for view in instances.values():
                if view is not None:
                    batch += instance_quads(view)
                    if len(batch) >= BATCH_QUADS:
                        st.extend(batch)
                        self.written_quads += len(batch)
                        batch = []
            if batch:
                st.extend(batch)
                self.written_quads += len(batch)
        if inferred is not None:
            self.store.replace_inferred(*inferred)
        log.debug("materialised", extra={"instances": len(instances), "inferred": inferred is not None,
                                         "ms": round((time.perf_counter() - started) * 1000, 1)})

    def _remove_instances(self, ids: list[str]) -> None:
        """Each instance's derived RDF, tags and meta included, removed in one transaction."""
        st = self.store.ox
        for iid in ids:
            node = instance_node(iid)
            if next(iter(st.quads_for_pattern(node, None, None, REGISTRY)), None) is not None:
                st.update(queries.delete_instance(node.value))

    def reset_registry(self) -> None:
        """Drop every derived instance (start-up rebuilds them from the records)."""
        if self.store.ox.contains_named_graph(REGISTRY):
            self.store.ox.remove_graph(REGISTRY)


__all__ = ["Materializer", "instance_quads", "INFERRED", "REGISTRY"]
