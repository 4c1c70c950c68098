"""Durable truth in pyoxigraph: the submitted documents, written before a request is acknowledged.

`urn:semreg:records`: one record per instance (`sr:document`, the registration as accepted, with its
revision), one per ontology (its metadata and the uploaded document, `sr:source`), client-set prefixes,
saved queries (`<urn:semreg:query:NAME> a sr:SavedQuery ; sr:name ; sr:owner ; sr:json`).
Written synchronously, transactionally, before a request is acknowledged; start-up reads them.

The same registrations as RDF in the registry vocabulary (`urn:semreg:registry`), the ontologies'
graphs and their closure follow on a thread of their own (`semreg.storage.at_rest`, told through
`on_written`), so the data directory is a plain RDF dataset. In memory, the hierarchy, the registry and
the query processes' replica (`semreg.sparql.feed`) are derived from the records.

Crash consistency of records: a replacement adds the new revision in one transaction and then removes
the old one, so a crash leaves at most an extra older revision, which start-up discards; a record
missing any of its three triples is garbage and discarded too.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson
import pyoxigraph as ox

from semreg.rdf.terms import RDF, SR, XSD
from semreg.storage import documents
from semreg.storage.documents import text as _text
from semreg.storage.handle import Handle, reads
from semreg.storage.ontology_meta import OntologyMeta as OntologyMeta  # semreg.knowledge.ontologies reads it here
from semreg.timefmt import now_rfc3339 as now_rfc3339  # semreg.knowledge.ontologies stamps uploads with it

log = logging.getLogger("semreg.store")

RECORDS = ox.NamedNode("urn:semreg:records")
REGISTRY = ox.NamedNode("urn:semreg:registry")
INFERRED = ox.NamedNode("urn:semreg:inferred")
# a record made durable (`Store.on_written`): id, record (None: removed), revision, its document, and whether the
# id had no record before (a registration never seen, or seen removed)
Written = tuple[str, "dict[str, Any] | None", int, "bytes | None", bool]
ONTOLOGY_PREFIX = "urn:semreg:ontology:"
OWNED_PREFIXES = ("urn:semreg:",)

TYPE = ox.NamedNode(RDF + "type")
RECORD_OF = documents.RECORD_OF
REVISION = ox.NamedNode(SR + "revision")
JSON = documents.OLD_DOCUMENT  # an ontology record's or a saved query's document (and instance records' before)
NAME = ox.NamedNode(SR + "name")
ONTOLOGY = ox.NamedNode(SR + "Ontology")
PREFIX = ox.NamedNode(SR + "Prefix")
SAVED_QUERY = ox.NamedNode(SR + "SavedQuery")
OWNER = ox.NamedNode(SR + "owner")
QUERY_NODE = "urn:semreg:query:"
NAMESPACE = ox.NamedNode(SR + "namespace")
CLOSURE_STATE = ox.NamedNode("urn:semreg:closure")  # written by earlier versions; removed at start
SOURCE = ox.NamedNode(SR + "source")
MATERIALIZED = ox.NamedNode(SR + "materializedFrom")  # likewise
XSD_INTEGER = ox.NamedNode(XSD + "integer")
XSD_DOUBLE = ox.NamedNode(XSD + "double")
THIS_NODE = ox.NamedNode("urn:semreg:node")
LAST_ON_RING = ox.NamedNode(SR + "lastOnRing")  # wall seconds this node last compared records with the ring


class StoreError(Exception):
    """The data directory cannot be used (locked by another process, unreadable, corrupt)."""


INSTANCE_PREFIX = "urn:semreg:instance:"  # an instance's IRI: this and its id


def instance_node(instance_id: str) -> ox.NamedNode:
    return ox.NamedNode(INSTANCE_PREFIX + instance_id)


def ontology_graph(name: str) -> ox.NamedNode:
    return ox.NamedNode(ONTOLOGY_PREFIX + name)


class Store:
    """pyoxigraph on disk (or in memory) and the record layout above. Thread-safe for one writer."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        if path is not None and path.exists() and not path.is_dir():
            raise StoreError(f"the data directory {path} is a file, not a directory; give --data-dir a directory.")
        try:
            if path is not None:
                path.mkdir(parents=True, exist_ok=True)
            self._handle = Handle(path)
            self.ox = self._handle.ox
        except (OSError, RuntimeError, ValueError) as exc:
            raise StoreError(_explain_open_error(path, exc)) from exc
        self._lock = threading.Lock()
        # told each record made durable, under the lock (`Written`)
        self.on_written: Callable[[list[Written]], None] | None = None
        self._revisions: dict[str, int] = {}
        # whether a write that acknowledges a request is queued or running (the node's writer thread tells):
        # the data directory's RDF is written in the gaps between them
        self.foreground: Callable[[], bool] = lambda: False
        self._ontology_revisions: dict[str, int] = {}
        self._max_ontology_revision = 0

    def reading(self) -> contextlib.AbstractContextManager[ox.Store]:
        """`ox`, not closed under a caller that reads it without the lock while it reads."""
        return self._handle.reading()

    def reopen(self) -> bool:
        """Close the store and open it again, giving RocksDB's block caches back (`semreg.storage.handle`);
        False when that could not be done now. Only from the thread writing the RDF (the one user of `ox`
        holding neither the lock nor `reading()`)."""
        def let_go() -> None:
            self.ox = None  # type: ignore[assignment]  # the handle's reference must be the last one

        with self._lock:
            try:
                return self._handle.reopen(let_go)
            finally:
                self.ox = self._handle.ox

    # -- instance records --------------------------------------------------------------------------
    @reads
    def load_records(self, stopped: Callable[[], bool] = lambda: False) -> list[tuple[dict[str, Any], int]]:
        """Every instance record, newest revision per id; removes superseded and partial ones (`StopAsked`
        while reading, once `stopped()` says so: nothing is removed then).

        A record losing its `sr:recordOf` is being removed (it goes first, its document last, and a record
        is written in one transaction), so one without is garbage: the records with a link are a subset of
        those with a document. While the documents are read (`semreg.storage.documents`), another thread
        counts the links (its query runs in pyoxigraph without Python's lock, and decodes no string: 0.6 s
        at 1,000,000). As many links as documents: every record is whole. Only otherwise (a crash in the
        middle of a removal) are the linked records listed, which takes 10-11 s at 1,000,000 and held a
        second core through every start-up: start-up read a million records in 21 s with the list, 16 s
        with the count."""
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="semreg-records") as pool:
            links = pool.submit(documents.count_linked, self.ox, RECORDS)
            found, garbage, old_ones = documents.read_all(self.ox, RECORDS, stopped)
            documented = len(garbage) + sum(len(d) if isinstance(d, list) else 1 for d in found.values())
            linked = None if links.result() == documented else documents.linked(self.ox, RECORDS)
        best: dict[str, tuple[int, str, dict[str, Any]]] = {}
        for iid, docs in found.items():
            for doc in (sorted(docs, key=lambda d: -d[0]) if isinstance(docs, list) else (docs,)):
                if iid not in best and (linked is None or f"<{doc[1]}>".encode() in linked):
                    best[iid] = doc
                else:
                    garbage.append(doc[1])
        del linked, found
        for subj in garbage:
            self._remove_subject(ox.NamedNode(subj), RECORDS)
        if garbage:
            log.warning("discarded stale or partial records", extra={"count": len(garbage)})
        if old_ones:
            started = time.perf_counter()
            rewrite = [doc for doc in best.values() if doc[1] in old_ones]
            documents.rewrite_old(self.ox, RECORDS, rewrite)
            log.info("instance records of an earlier version rewritten in this one's form (read faster)",
                     extra={"records": len(rewrite), "ms": round((time.perf_counter() - started) * 1000)})
        self._revisions = {iid: rev for iid, (rev, _, _) in best.items()}
        return [(rec, rev) for rev, _, rec in best.values()]

    def save_records(self, items: Iterable[tuple[dict[str, Any], int]]) -> None:
        """Write instance records (record, revision) in one transaction, then drop older revisions."""
        items = list(items)
        quads = []
        superseded = []
        texts = [documents.serialised(rec, rev) for rec, rev in items]
        new: list[bool] = []
        with self._lock:
            for (rec, rev), text in zip(items, texts):
                iid = rec["id"]
                node = ox.NamedNode(documents.record_iri(iid, rev))
                quads += [ox.Quad(node, RECORD_OF, instance_node(iid), RECORDS),
                          ox.Quad(node, REVISION, ox.Literal(str(rev), datatype=XSD_INTEGER), RECORDS),
                          ox.Quad(node, documents.DOCUMENT, ox.Literal(text.decode()), RECORDS)]
                old = self._revisions.get(iid)
                new.append(old is None)
                if old is not None and old != rev:
                    superseded.append((iid, old))
            self.ox.extend(quads)
            for rec, rev in items:
                self._revisions[rec["id"]] = rev
            for iid, old in superseded:
                self._remove_subject(ox.NamedNode(documents.record_iri(iid, old)), RECORDS)
            if self.on_written is not None:
                self.on_written([(rec["id"], rec, rev, text, fresh)
                                 for (rec, rev), text, fresh in zip(items, texts, new)])

    def revisions(self) -> dict[str, int]:
        """Each instance record's revision (tombstones' too), as now."""
        with self._lock:
            return dict(self._revisions)

    def adopt_revisions(self, revisions: dict[str, int]) -> None:
        """Each instance record's revision, known without reading the records (`semreg.storage.snapshot`)."""
        with self._lock:
            self._revisions = revisions

    @reads
    def read_record(self, instance_id: str) -> tuple[dict[str, Any], int] | None:
        """One instance's current record and revision, read from the store."""
        rev = self._revisions.get(instance_id)
        if rev is None:
            return None
        node = ox.NamedNode(documents.record_iri(instance_id, rev))
        for q in self.ox.quads_for_pattern(node, documents.DOCUMENT, None, RECORDS):
            found = documents.read(_text(q.object))
            return (found[0], rev) if found is not None else None
        for q in self.ox.quads_for_pattern(node, JSON, None, RECORDS):  # written by an earlier version
            try:
                return orjson.loads(_text(q.object)), rev
            except orjson.JSONDecodeError:
                return None
        return None

    def delete_record(self, instance_id: str) -> None:
        with self._lock:
            rev = self._revisions.pop(instance_id, None)
            if rev is not None:
                self._remove_subject(ox.NamedNode(documents.record_iri(instance_id, rev)), RECORDS)
                if self.on_written is not None:
                    self.on_written([(instance_id, None, rev, None, False)])

    def _remove_subject(self, subject: ox.NamedNode, graph: ox.NamedNode) -> None:
        # record removal order: the link first and the document last, so a crash midway leaves a document
        # without its link, which start-up finds and discards
        quads = list(self.ox.quads_for_pattern(subject, None, None, graph))
        quads.sort(key=lambda q: (q.predicate != RECORD_OF, q.predicate in (JSON, documents.DOCUMENT)))
        for q in quads:
            self.ox.remove(q)

    # -- ontologies --------------------------------------------------------------------------------
    # An ontology's record holds its metadata and the uploaded document itself (`sr:source`): the
    # durable truth of an upload is one transaction, whatever its size; its graph is derived.
    def save_ontology(self, meta: OntologyMeta, source: str) -> None:
        with self._lock:
            old = self._ontology_revisions.get(meta.name, 0)
            rev = max(old, self._max_ontology_revision) + 1
            self._max_ontology_revision = rev
            node = ox.NamedNode(f"urn:semreg:ontology-record:{meta.name}:{rev}")
            self.ox.extend([ox.Quad(node, TYPE, ONTOLOGY, RECORDS), ox.Quad(node, NAME, ox.Literal(meta.name), RECORDS),
                            ox.Quad(node, REVISION, ox.Literal(str(rev), datatype=XSD_INTEGER), RECORDS),
                            ox.Quad(node, JSON, ox.Literal(orjson.dumps(meta.__dict__).decode()), RECORDS),
                            ox.Quad(node, SOURCE, ox.Literal(source), RECORDS)])
            self._ontology_revisions[meta.name] = rev
            if old:
                self._remove_subject(ox.NamedNode(f"urn:semreg:ontology-record:{meta.name}:{old}"), RECORDS)

    def delete_ontology(self, name: str) -> None:
        with self._lock:
            rev = self._ontology_revisions.pop(name, None)
            if rev is not None:
                self._remove_subject(ox.NamedNode(f"urn:semreg:ontology-record:{name}:{rev}"), RECORDS)

    @reads
    def load_ontologies(self) -> list[tuple[OntologyMeta, str]]:
        """Each ontology's newest complete record (metadata, source); older and partial ones removed."""
        parts: dict[str, dict[str, Any]] = {}
        subjects = {q.subject for p in (NAME, SOURCE) for q in self.ox.quads_for_pattern(None, p, None, RECORDS)
                    if _text(q.subject).startswith("urn:semreg:ontology-record:")}  # not every instance record's quads
        for subject in subjects:
            slot = parts.setdefault(_text(subject), {})
            for q in self.ox.quads_for_pattern(subject, None, None, RECORDS):
                key = {NAME: "name", REVISION: "rev", JSON: "json", SOURCE: "source"}.get(q.predicate)
                if key is not None:
                    slot[key] = _text(q.object)
        best: dict[str, tuple[int, str, OntologyMeta, str]] = {}
        garbage = []
        for subj, slot in parts.items():
            try:
                rev = int(slot["rev"])
                meta = OntologyMeta(**orjson.loads(slot["json"]))
                source = slot["source"]
            except (KeyError, ValueError, TypeError, orjson.JSONDecodeError):
                garbage.append(subj)
                continue
            prev = best.get(meta.name)
            if prev is None or prev[0] < rev:
                if prev is not None:
                    garbage.append(prev[1])
                best[meta.name] = (rev, subj, meta, source)
            else:
                garbage.append(subj)
        for subj in garbage:
            self._remove_subject(ox.NamedNode(subj), RECORDS)
        self._ontology_revisions = {name: rev for name, (rev, _, _, _) in best.items()}
        self._max_ontology_revision = max(self._ontology_revisions.values(), default=0)
        return [(meta, source) for _, _, meta, source in sorted(best.values(), key=lambda b: b[2].name)]

    def foreign_quads(self) -> Iterable[ox.Quad]:
        """The quads of the graphs semreg does not own (put in the data directory by other tools): the
        default graph and any named graph outside `urn:semreg:`. `/sparql` serves them as they are."""
        with self._handle.reading() as store:
            graphs: list[Any] = [ox.DefaultGraph()]
            graphs += [g for g in store.named_graphs()
                       if not (isinstance(g, ox.NamedNode) and g.value.startswith(OWNED_PREFIXES))]
            for graph in graphs:
                yield from store.quads_for_pattern(None, None, None, graph)

    def drop_derived_graphs(self) -> list[str]:
        """Remove graphs of semreg's that are none of the records, the registry, the closure or an ontology's
        (and the bookkeeping of derived RDF an earlier version wrote)."""
        dropped = []
        kept = (RECORDS, REGISTRY, INFERRED)
        with self._lock:
            for graph in list(self.ox.named_graphs()):
                if (isinstance(graph, ox.NamedNode) and graph not in kept and graph.value.startswith(OWNED_PREFIXES)
                        and not graph.value.startswith(ONTOLOGY_PREFIX)):
                    self.ox.remove_graph(graph)
                    dropped.append(graph.value)
            for q in list(self.ox.quads_for_pattern(None, MATERIALIZED, None, RECORDS)):
                self.ox.remove(q)
            for q in list(self.ox.quads_for_pattern(CLOSURE_STATE, None, None, RECORDS)):
                self.ox.remove(q)
        return dropped

    # -- this node in a ring ------------------------------------------------------------------------
    @reads
    def load_last_on_ring(self) -> float | None:
        for q in self.ox.quads_for_pattern(THIS_NODE, LAST_ON_RING, None, RECORDS):
            try:
                return float(_text(q.object))
            except ValueError:
                return None
        return None

    def save_last_on_ring(self, wall: float) -> None:
        with self._lock:
            self._remove_subject(THIS_NODE, RECORDS)
            self.ox.add(ox.Quad(THIS_NODE, LAST_ON_RING, ox.Literal(repr(float(wall)), datatype=XSD_DOUBLE), RECORDS))

    # -- prefixes ----------------------------------------------------------------------------------
    @reads
    def load_prefixes(self) -> dict[str, str]:
        out = {}
        for q in self.ox.quads_for_pattern(None, NAMESPACE, None, RECORDS):
            for n in self.ox.quads_for_pattern(q.subject, NAME, None, RECORDS):
                out[_text(n.object)] = _text(q.object)
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

    # -- saved queries ------------------------------------------------------------------------------
    @reads
    def load_queries(self) -> list[tuple[str, str | None, dict[str, Any]]]:
        """Every saved query: (name, owner, its JSON); an unreadable one is left out and logged."""
        out = []
        for q in self.ox.quads_for_pattern(None, TYPE, SAVED_QUERY, RECORDS):
            fields = {p.predicate: _text(p.object) for p in self.ox.quads_for_pattern(q.subject, None, None, RECORDS)}
            try:
                out.append((fields[NAME], fields.get(OWNER), orjson.loads(fields[JSON])))
            except (KeyError, orjson.JSONDecodeError):
                log.warning("discarded an unreadable saved query", extra={"record": _text(q.subject)})
        return sorted(out, key=lambda item: item[0])

    def save_query(self, name: str, owner: str | None, query: dict[str, Any]) -> None:
        node = ox.NamedNode(QUERY_NODE + name)
        quads = [ox.Quad(node, TYPE, SAVED_QUERY, RECORDS), ox.Quad(node, NAME, ox.Literal(name), RECORDS),
                 ox.Quad(node, JSON, ox.Literal(orjson.dumps(query).decode()), RECORDS)]
        if owner is not None:
            quads.append(ox.Quad(node, OWNER, ox.Literal(owner), RECORDS))
        with self._lock:
            self._remove_subject(node, RECORDS)
            self.ox.extend(quads)

    def delete_query(self, name: str) -> None:
        with self._lock:
            self._remove_subject(ox.NamedNode(QUERY_NODE + name), RECORDS)

    def flush(self) -> None:
        if self.path is not None:
            self.ox.flush()


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
