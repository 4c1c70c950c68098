"""The registry as it was at a clean stop, in one file beside the store, read at the next start-up instead of
the instance records when they are still what it was taken from.

At a million instances, reading the records and sorting them out took 22-43 s of a start-up of 54-96 s:
pyoxigraph hands a million documents over one by one and each is parsed into a dict, then into a
registration. The file holds what the records would give, already sorted out, in `marshal`'s form
(a few seconds to read back); the records stay the durable truth:

- it is written last at a clean stop (nothing writes a record after it), to a temporary file renamed over;
- it says what it was taken from: how many instance records there were and the sum of their revisions, which
  any write of a record changes (a new record adds one and its revision, a replacement's revision is newer
  than the one it replaces, a removal takes a record away or replaces it by a tombstone). Start-up counts
  both inside pyoxigraph (1.3 s at a million, without Python's lock) and uses the file only when they match,
  so a write by anything else (an earlier version that knows nothing of the file, a crash after writes)
  sends the start-up back to the records;
- its content is checked against a digest, and it is removed once read (or found out of date).

`payload` is whatever the caller keeps in it (`semreg.registry.restore` keeps the registrations, their
revisions, statuses and first registration times, and the tombstones), made of what `marshal` writes.
"""
from __future__ import annotations

import hashlib
import logging
import marshal
import os
import sys
import time
from pathlib import Path
from typing import Any, cast

import pyoxigraph as ox

from semreg.storage.store import RECORDS, REVISION, Store

log = logging.getLogger("semreg.store")

FILE = "registry.snapshot"  # in the data directory, beside RocksDB's own files (which it leaves alone)
FORMAT = 1  # raise it when what a row means changes; a change of the registration's fields is caught by name
MAGIC = b"semreg-snapshot\n"


def fingerprint(store: Store) -> tuple[int, str]:
    """How many `sr:revision`s `urn:semreg:records` holds, and their sum (exact: each divided by 10⁹ as an
    `xsd:decimal`, whose sum a million revisions of 2⁶¹ do not overflow), counted inside pyoxigraph: the
    instance records', and the ontologies' and the RDF's markers (`semreg.storage.rdf_writes`), so that these
    changing too sends the start-up back to the records, which is safe. Only the instance records' would take
    a join: 10.7 s at a million, against 0.7 s."""
    query = (f"SELECT (COUNT(?v) AS ?n) (SUM(<http://www.w3.org/2001/XMLSchema#decimal>(?v) / 1000000000) AS ?s) "
             f"WHERE {{ GRAPH <{RECORDS.value}> {{ ?r <{REVISION.value}> ?v }} }}")
    with store.reading() as ox_store:
        row = next(iter(cast(ox.QuerySolutions, ox_store.query(query))))
    count, total = row[0], row[1]
    return int(cast(ox.Literal, count).value), cast(ox.Literal, total).value if total is not None else "0"


def path_of(store: Store) -> Path | None:
    return store.path / FILE if store.path is not None else None


def save(store: Store, payload: Any) -> int:
    """Write `payload` as taken from the store's records as they are now; its size in bytes (0 for a store in
    memory). Call it when nothing writes a record any more."""
    path = path_of(store)
    if path is None:
        return 0
    header = {"format": FORMAT, "python": list(sys.version_info[:2]), "marshal": marshal.version,
              "records": fingerprint(store)}
    body = marshal.dumps(payload)
    head = marshal.dumps({**header, "digest": hashlib.blake2b(body, digest_size=32).hexdigest()})
    partial = path.with_suffix(".partial")
    try:
        with open(partial, "wb") as out:
            out.write(MAGIC + len(head).to_bytes(8, "big") + head)
            out.write(body)
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, path)
    except OSError:
        partial.unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return len(body)


def take(store: Store) -> Any | None:
    """The payload of the snapshot the store's records are still what it was taken from, else None (said in
    the log); the file is removed either way."""
    path = path_of(store)
    if path is None or not path.exists():
        return None
    started = time.perf_counter()
    try:
        with open(path, "rb") as f:
            data = f.read()
        payload, why = _read(store, data)
    except OSError as exc:
        payload, why = None, f"it cannot be read: {exc}"
    finally:
        path.unlink(missing_ok=True)
    if why:
        log.warning("registry snapshot not used: the instance records are read instead", extra={"why": why})
        return None
    log.info("registry snapshot read", extra={"bytes": len(data), "ms": round((time.perf_counter() - started) * 1000)})
    return payload


def _read(store: Store, data: bytes) -> tuple[Any, str]:
    """The payload and "", or None and why it cannot be used."""
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 8:
        return None, "not a snapshot file"
    size = int.from_bytes(data[len(MAGIC):len(MAGIC) + 8], "big")
    start = len(MAGIC) + 8
    try:
        header = marshal.loads(data[start:start + size])
    except (EOFError, ValueError, TypeError):
        return None, "its header cannot be read"
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("marshal") != marshal.version \
            or header.get("python") != list(sys.version_info[:2]):
        return None, "written by another version"
    body = memoryview(data)[start + size:]
    if hashlib.blake2b(body, digest_size=32).hexdigest() != header.get("digest"):
        return None, "its content does not match its digest (cut short or damaged)"
    if tuple(header.get("records") or ()) != fingerprint(store):
        return None, "the instance records changed since it was written"
    try:
        return marshal.loads(body), ""
    except (EOFError, ValueError, TypeError):
        return None, "its content cannot be read"
