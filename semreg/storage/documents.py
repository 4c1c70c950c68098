"""Instance records' documents, and reading all of them back at start-up (`semreg.storage.store.Store`).

An instance record is `urn:semreg:record:{id}:{revision}` in `urn:semreg:records`, with `sr:recordOf` the
instance, `sr:revision` and its document: the registration as accepted, as JSON. The document says its
own id and revision (`sr:document`), so that start-up reads only the documents: what reading costs is
the store turning long strings (IRIs, documents) back from their ids, and the record's IRI was the
longer half of it. At 1,000,000 records: the documents alone 7.4 s (parsed too), the documents with their
IRIs 20 s, every quad as Python objects 24 s.

Documents written before (`sr:json`, the revision only in the IRI) are still read, with their IRIs.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, cast

import orjson
import pyoxigraph as ox

from semreg import kept_json
from semreg.errors import StopAsked
from semreg.rdf.terms import SR

RECORD_PREFIX = "urn:semreg:record:"
RECORD_OF = ox.NamedNode(SR + "recordOf")  # an instance record's link to its instance
DOCUMENT = ox.NamedNode(SR + "document")  # the document, with "revision" (this version on)
OLD_DOCUMENT = ox.NamedNode(SR + "json")  # the document alone (earlier versions; ontology records still use it)
Document = tuple[int, str, dict[str, Any]]  # an instance record's revision, IRI and document
Documents = dict[str, "Document | list[Document]"]  # by instance id; a list when an id has more than one
STOP_EVERY = 16_384  # documents read between two looks at whether the server was asked to stop


def record_iri(instance_id: str, revision: int) -> str:
    return f"{RECORD_PREFIX}{instance_id}:{revision}"


def serialised(rec: dict[str, Any], revision: int) -> bytes:
    """The document's JSON, of exactly its length: it is also what waits for the RDF writer
    (`semreg.storage.at_rest`), which would otherwise serialise the record a second time."""
    return kept_json.dumps({**rec, "revision": revision})


def read(text: str | bytes) -> tuple[dict[str, Any], int] | None:
    """A document's record and revision, or None when it is not a readable document of this version."""
    try:
        rec = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(rec, dict) or not isinstance(rec.get("id"), str):
        return None
    rev = rec.pop("revision", None)
    return (rec, rev) if isinstance(rev, int) and not isinstance(rev, bool) else None


def read_all(store: ox.Store, graph: ox.NamedNode, stopped: Callable[[], bool] = lambda: False
             ) -> tuple[Documents, list[str], set[str]]:
    """Every instance record's document in `graph` by id, the IRIs of unreadable ones, and the IRIs of
    records an earlier version wrote (`rewrite_old` puts them in this version's form). `StopAsked` once
    `stopped()` says so (asked every `STOP_EVERY` documents: reading a million takes 15-40 s)."""
    documents: Documents = {}
    garbage: list[str] = []
    old_ones: set[str] = set()
    unreadable = 0
    query = f"SELECT ?j WHERE {{ GRAPH <{graph.value}> {{ ?r <{DOCUMENT.value}> ?j }} }}"
    for n, row in enumerate(cast(ox.QuerySolutions, store.query(query))):
        if not n % STOP_EVERY and stopped():
            raise StopAsked(f"reading the instance records stopped after {n}")
        found = read(text(row[0]))
        if found is None:
            unreadable += 1
            continue
        rec, rev = found
        _keep(documents, (rev, record_iri(rec["id"], rev), rec))
    if unreadable:  # rare (a damaged directory): their IRIs, to remove them
        for q in store.quads_for_pattern(None, DOCUMENT, None, graph):
            if read(text(q.object)) is None:
                garbage.append(text(q.subject))
    for subj, old, rev in _old_documents(store, graph):
        if old is None:
            garbage.append(subj)
        else:
            _keep(documents, (rev, subj, old))
            old_ones.add(subj)
    return documents, garbage, old_ones


def count_linked(store: ox.Store, graph: ox.NamedNode) -> int:
    """How many records in `graph` are linked to their instance: counted inside pyoxigraph, no string decoded
    (0.6 s at 1,000,000)."""
    query = f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{graph.value}> {{ ?r <{RECORD_OF.value}> ?i }} }}"
    row = next(iter(cast(ox.QuerySolutions, store.query(query))))
    return int(cast(ox.Literal, row[0]).value)


def linked(store: ox.Store, graph: ox.NamedNode) -> set[bytes]:
    """The IRIs of the records linked to their instance, as SPARQL's TSV writes them (`<...>`): serialized
    inside pyoxigraph, without Python's lock (10-11 s at 1,000,000)."""
    query = f"SELECT ?r WHERE {{ GRAPH <{graph.value}> {{ ?r <{RECORD_OF.value}> ?i }} }}"
    return set(cast(bytes, cast(ox.QuerySolutions, store.query(query)).serialize(
        format=ox.QueryResultsFormat.TSV)).split(b"\n"))


def rewrite_old(store: ox.Store, graph: ox.NamedNode, kept: list[Document], batch: int = 5_000) -> None:
    """Records an earlier version wrote, in this version's form: a batch's new documents in and old ones out
    in one SPARQL update, so one transaction (quad by quad, a million took 129 s)."""
    g, new, old = graph.value, DOCUMENT.value, OLD_DOCUMENT.value
    for first in range(0, len(kept), batch):
        chunk = kept[first:first + batch]
        inserted = " ".join(f"<{subj}> <{new}> {ox.Literal(serialised(rec, rev).decode())} ." for rev, subj, rec in chunk)
        values = " ".join(f"<{subj}>" for _, subj, _ in chunk)
        store.update(f"DELETE {{ GRAPH <{g}> {{ ?r <{old}> ?j }} }} WHERE {{ VALUES ?r {{ {values} }} "
                     f"GRAPH <{g}> {{ ?r <{old}> ?j }} }} ; INSERT DATA {{ GRAPH <{g}> {{ {inserted} }} }}")


def _old_documents(store: ox.Store, graph: ox.NamedNode) -> Iterator[tuple[str, dict[str, Any] | None, int]]:
    """Instance records written by earlier versions: (IRI, record or None when unreadable, revision)."""
    for q in store.quads_for_pattern(None, OLD_DOCUMENT, None, graph):
        subj = text(q.subject)
        if not subj.startswith(RECORD_PREFIX):
            continue  # an ontology's record, a saved query
        try:
            rev = int(subj.rsplit(":", 1)[1])
            rec = orjson.loads(text(q.object))
        except (ValueError, orjson.JSONDecodeError):
            rec = None
        if not isinstance(rec, dict) or not isinstance(rec.get("id"), str):
            yield subj, None, 0
        else:
            yield subj, rec, rev


def _keep(documents: Documents, doc: Document) -> bool:
    """`doc` among its instance's documents; False when that record's document is there already (a record
    with both forms is read once)."""
    iid = doc[2]["id"]
    found = documents.setdefault(iid, doc)
    if found is doc:
        return True
    if any(d[1] == doc[1] for d in (found if isinstance(found, list) else (found,))):
        return False
    documents[iid] = [*found, doc] if isinstance(found, list) else [found, doc]
    return True


def text(term: ox.NamedNode | ox.BlankNode | ox.Literal | ox.Triple) -> str:
    """The lexical value of a term (records never hold RDF-star triples)."""
    return str(term) if isinstance(term, ox.Triple) else term.value
