"""Durable truth in pyoxigraph: the submitted documents, written before a request is acknowledged.

Graphs (the default graph of `/sparql` is their union):
- `urn:semreg:records`: one record per instance (`sr:json`, the registration as accepted, with a
  revision), ontology metadata and client-set prefixes. Written synchronously, transactionally.
- `urn:semreg:ontology:{name}`: each uploaded ontology's triples, written synchronously.
- `urn:semreg:registry` and `urn:semreg:inferred`: derived RDF (instances in the registry vocabulary,
  the closure) materialised by `semreg.materialize.Materializer` behind the writes and rebuilt from
  the records at start-up; `/sparql` waits for it to catch up before it answers.

Crash consistency of records: a replacement adds the new revision in one transaction and then removes
the old one, so a crash leaves at most an extra older revision, which start-up discards; a record
missing any of its three triples is garbage and discarded too.
"""
from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyoxigraph as ox

from semreg.terms import RDF, SR, XSD

log = logging.getLogger("semreg.store")

RECORDS = ox.NamedNode("urn:semreg:records")
REGISTRY = ox.NamedNode("urn:semreg:registry")
INFERRED = ox.NamedNode("urn:semreg:inferred")
ONTOLOGY_PREFIX = "urn:semreg:ontology:"
OWNED_PREFIXES = ("urn:semreg:",)

TYPE = ox.NamedNode(RDF + "type")
RECORD_OF = ox.NamedNode(SR + "recordOf")
REVISION = ox.NamedNode(SR + "revision")
JSON = ox.NamedNode(SR + "json")
NAME = ox.NamedNode(SR + "name")
ONTOLOGY = ox.NamedNode(SR + "Ontology")
PREFIX = ox.NamedNode(SR + "Prefix")
NAMESPACE = ox.NamedNode(SR + "namespace")
CLOSURE_OF = ox.NamedNode(SR + "closureOf")
CLOSURE_STATE = ox.NamedNode("urn:semreg:closure")
XSD_INTEGER = ox.NamedNode(XSD + "integer")


class StoreError(Exception):
    """The data directory cannot be used (locked by another process, unreadable, corrupt)."""


def instance_node(instance_id: str) -> ox.NamedNode:
    return ox.NamedNode("urn:semreg:instance:" + instance_id)


def ontology_graph(name: str) -> ox.NamedNode:
    return ox.NamedNode(ONTOLOGY_PREFIX + name)


@dataclass(frozen=True)
class OntologyMeta:
    name: str
    triples: int
    inferred: int
    uploaded_at: str
    media_type: str
    prefixes: dict[str, str]
    sha256: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "triples": self.triples, "inferred": self.inferred,
                "uploaded_at": self.uploaded_at, "media_type": self.media_type}


class Store:
    """pyoxigraph on disk (or in memory) and the record layout above. Thread-safe for one writer."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        if path is not None and path.exists() and not path.is_dir():
            raise StoreError(f"the data directory {path} is a file, not a directory; give --data-dir a directory.")
        try:
            if path is None:
                self.ox = ox.Store()
            else:
                path.mkdir(parents=True, exist_ok=True)
                self.ox = ox.Store(str(path))
        except (OSError, RuntimeError, ValueError) as exc:
            raise StoreError(_explain_open_error(path, exc)) from exc
        self._lock = threading.Lock()
        self._revisions: dict[str, int] = {}

    # -- instance records --------------------------------------------------------------------------
    def load_records(self) -> list[tuple[dict[str, Any], int]]:
        """Every instance record, newest revision per id; removes superseded and partial ones."""
        parts: dict[str, dict[str, Any]] = {}
        for q in self.ox.quads_for_pattern(None, None, None, RECORDS):
            subj = q.subject.value
            if not subj.startswith("urn:semreg:record:"):
                continue
            p = q.predicate
            slot = parts.setdefault(subj, {})
            if p == JSON:
                slot["json"] = q.object.value
            elif p == REVISION:
                slot["rev"] = int(q.object.value)
            elif p == RECORD_OF:
                slot["of"] = q.object.value
        best: dict[str, tuple[int, str, dict[str, Any]]] = {}
        garbage: list[str] = []
        for subj, slot in parts.items():
            if {"json", "rev", "of"} - slot.keys():
                garbage.append(subj)
                continue
            try:
                rec = orjson.loads(slot["json"])
            except orjson.JSONDecodeError:
                garbage.append(subj)
                continue
            iid = rec.get("id")
            prev = best.get(iid)
            if prev is None or prev[0] < slot["rev"]:
                if prev is not None:
                    garbage.append(prev[1])
                best[iid] = (slot["rev"], subj, rec)
            else:
                garbage.append(subj)
        for subj in garbage:
            self._remove_subject(ox.NamedNode(subj), RECORDS)
        if garbage:
            log.warning("discarded stale or partial records", extra={"count": len(garbage)})
        self._revisions = {iid: rev for iid, (rev, _, _) in best.items()}
        return [(rec, rev) for rev, _, rec in best.values()]

    def save_records(self, items: Iterable[tuple[dict[str, Any], int]]) -> None:
        """Write instance records (record, revision) in one transaction, then drop older revisions."""
        items = list(items)
        quads = []
        superseded = []
        with self._lock:
            for rec, rev in items:
                iid = rec["id"]
                node = ox.NamedNode(f"urn:semreg:record:{iid}:{rev}")
                quads += [ox.Quad(node, RECORD_OF, instance_node(iid), RECORDS),
                          ox.Quad(node, REVISION, ox.Literal(str(rev), datatype=XSD_INTEGER), RECORDS),
                          ox.Quad(node, JSON, ox.Literal(orjson.dumps(rec).decode()), RECORDS)]
                old = self._revisions.get(iid)
                if old is not None and old != rev:
                    superseded.append((iid, old))
            self.ox.extend(quads)
            for rec, rev in items:
                self._revisions[rec["id"]] = rev
            for iid, old in superseded:
                self._remove_subject(ox.NamedNode(f"urn:semreg:record:{iid}:{old}"), RECORDS)

    def delete_record(self, instance_id: str) -> None:
        with self._lock:
            rev = self._revisions.pop(instance_id, None)
            if rev is not None:
                self._remove_subject(ox.NamedNode(f"urn:semreg:record:{instance_id}:{rev}"), RECORDS)

    def _remove_subject(self, subject: ox.NamedNode, graph: ox.NamedNode) -> None:
        # record removal order: the link first, so a crash midway leaves a partial (discarded) record
        quads = list(self.ox.quads_for_pattern(subject, None, None, graph))
        quads.sort(key=lambda q: q.predicate != RECORD_OF)
        for q in quads:
            self.ox.remove(q)

    # -- ontologies --------------------------------------------------------------------------------
    def replace_ontology(self, meta: OntologyMeta, triples: list[ox.Triple]) -> None:
        """Replace one ontology's graph and metadata. Callers have parsed and reasoned before this."""
        graph = ontology_graph(meta.name)
        with self._lock:
            if self.ox.contains_named_graph(graph):
                self.ox.remove_graph(graph)
            self.ox.extend([ox.Quad(t.subject, t.predicate, t.object, graph) for t in triples])
            self._write_meta(meta)

    def _write_meta(self, meta: OntologyMeta) -> None:
        node = ox.NamedNode(f"urn:semreg:ontology-record:{meta.name}")
        self._remove_subject(node, RECORDS)
        self.ox.extend([ox.Quad(node, TYPE, ONTOLOGY, RECORDS), ox.Quad(node, NAME, ox.Literal(meta.name), RECORDS),
                        ox.Quad(node, JSON, ox.Literal(orjson.dumps(meta.__dict__).decode()), RECORDS)])

    def delete_ontology(self, name: str) -> None:
        with self._lock:
            self._remove_subject(ox.NamedNode(f"urn:semreg:ontology-record:{name}"), RECORDS)
            graph = ontology_graph(name)
            if self.ox.contains_named_graph(graph):
                self.ox.remove_graph(graph)

    def load_ontology_metas(self) -> list[OntologyMeta]:
        out = []
        for q in self.ox.quads_for_pattern(None, JSON, None, RECORDS):
            if q.subject.value.startswith("urn:semreg:ontology-record:"):
                try:
                    out.append(OntologyMeta(**orjson.loads(q.object.value)))
                except (orjson.JSONDecodeError, TypeError):
                    log.warning("ignored an unreadable ontology record", extra={"subject": q.subject.value})
        return sorted(out, key=lambda m: m.name)

    def ontology_triples(self, name: str) -> Iterator[ox.Quad]:
        return self.ox.quads_for_pattern(None, None, None, ontology_graph(name))

    def closure_state(self) -> str | None:
        for q in self.ox.quads_for_pattern(CLOSURE_STATE, CLOSURE_OF, None, RECORDS):
            return q.object.value
        return None

    def replace_inferred(self, triples: list[ox.Triple], state: str) -> None:
        """The closure graph, and the ontology set it was computed from (so start-up can skip it)."""
        with self._lock:
            self._remove_subject(CLOSURE_STATE, RECORDS)
            if self.ox.contains_named_graph(INFERRED):
                self.ox.remove_graph(INFERRED)
            self.ox.extend([ox.Quad(t.subject, t.predicate, t.object, INFERRED) for t in triples])
            self.ox.add(ox.Quad(CLOSURE_STATE, CLOSURE_OF, ox.Literal(state), RECORDS))

    # -- prefixes ----------------------------------------------------------------------------------
    def load_prefixes(self) -> dict[str, str]:
        out = {}
        for q in self.ox.quads_for_pattern(None, NAMESPACE, None, RECORDS):
            for n in self.ox.quads_for_pattern(q.subject, NAME, None, RECORDS):
                out[n.object.value] = q.object.value
        return out

    def set_prefix(self, prefix: str, iri: str) -> None:
        node = ox.NamedNode(f"urn:semreg:prefix:{prefix}")
        with self._lock:
            self._remove_subject(node, RECORDS)
            self.ox.extend([ox.Quad(node, TYPE, PREFIX, RECORDS), ox.Quad(node, NAME, ox.Literal(prefix), RECORDS),
                            ox.Quad(node, NAMESPACE, ox.Literal(iri), RECORDS)])

    def delete_prefix(self, prefix: str) -> None:
        with self._lock:
            self._remove_subject(ox.NamedNode(f"urn:semreg:prefix:{prefix}"), RECORDS)

    def flush(self) -> None:
        if self.path is not None:
            self.ox.flush()


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _explain_open_error(path: Path | None, exc: Exception) -> str:
    text = str(exc)
    if "corrupt" in text.lower():
        return (f"the data directory {path} holds a damaged store ({text}); restore it from a backup, or start "
                f"with another --data-dir.")
    if "lock" in text.lower():
        return (f"the data directory {path} is in use by another process (its lock is held); stop that "
                f"semreg, or start this one with another --data-dir.")
    if "permission" in text.lower():
        return f"the data directory {path} cannot be opened: permission denied ({text})."
    return f"the data directory {path} cannot be opened as a semreg store: {text}"
