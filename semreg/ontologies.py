"""The uploaded ontologies of a node: upload, replace, delete, restore, and the closure over them all.

An upload is parsed, reasoned over together with the others (closure, hierarchy index), recorded
durably as one transaction (its metadata and the document itself), and installed; its graph and the
closure graph reach the SPARQL replica behind it (`semreg.replica_feed`). A failed parse changes nothing; so does a
failure before the record is written. Parsed triples stay in memory, so re-reasoning never reads the
store and `GET /v1/ontologies/{name}` never waits for the graph to be written.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pyoxigraph as ox

from semreg import ontology
from semreg.errors import BadRequest, NotFound
from semreg.reasoner import Closure, Hierarchy, build_hierarchy, compute_closure, hierarchy_triples
from semreg.replica_feed import ReplicaFeed
from semreg.store import OntologyMeta, Store, now_rfc3339

log = logging.getLogger("semreg.ontologies")

Write = Callable[..., Awaitable[Any]]  # runs a store operation on the node's writer thread


@dataclass(frozen=True)
class OntologyChange:
    meta: OntologyMeta
    created: bool
    reasoning_ms: float
    concepts: int
    timings_ms: dict[str, float] = field(default_factory=dict)


@contextlib.contextmanager
def phase(timings: dict[str, float], name: str):
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = (time.perf_counter() - started) * 1000


def reason(triples: list) -> tuple[Closure, Hierarchy, dict[str, float]]:
    """Closure, then the hierarchy index and what it adds to the closure; with their times in ms."""
    timings: dict[str, float] = {}
    with phase(timings, "closure"):
        closure = compute_closure(triples)
    with phase(timings, "index"):
        hierarchy = build_hierarchy(triples, closure.inferred)
        closure.inferred.extend(hierarchy_triples(hierarchy, [*triples, *closure.inferred]))
    return closure, hierarchy, timings


class Ontologies:
    def __init__(self, store: Store, replica: ReplicaFeed, write: Write,
                 install: Callable[[Hierarchy, dict[str, str], float], None]) -> None:
        self.store = store
        self.replica = replica
        self._write = write
        self._install_hierarchy = install
        self.metas: dict[str, OntologyMeta] = {}
        self.triples: dict[str, list[ox.Triple]] = {}
        self.sources: dict[str, bytes] = {}  # name → the document as uploaded (other nodes fetch it)
        self._lock = asyncio.Lock()

    def __contains__(self, name: str) -> bool:
        return name in self.metas

    def __len__(self) -> int:
        return len(self.metas)

    # -- start-up ----------------------------------------------------------------------------------
    async def restore(self) -> None:
        """Parse every recorded ontology, reason, install; rewrite graphs that are missing or stale."""
        records = await self._write(self.store.load_ontologies)
        for meta, source in records:
            try:
                parsed = await asyncio.to_thread(ontology.parse, source.encode(), meta.media_type)
            except BadRequest as exc:
                log.error("a recorded ontology no longer parses; it is left out", extra={"ontology": meta.name,
                                                                                          "reason": exc.message})
                continue
            self.metas[meta.name] = meta
            self.triples[meta.name] = parsed.triples
            self.sources[meta.name] = source.encode()
        for name, meta in self.metas.items():
            self.replica.put_ontology(name, self.triples[name], meta.sha256)
        closure, hierarchy, _ = await asyncio.to_thread(reason, self._all())
        self.replica.put_inferred(closure.inferred, self.closure_state())
        self._install_hierarchy(hierarchy, self.prefixes(), closure.seconds * 1000)

    # -- changes -----------------------------------------------------------------------------------
    async def put(self, name: str, body: bytes, content_type: str | None) -> OntologyChange:
        ontology.validate_name(name)
        media = ontology.media_type_of(content_type)
        timings: dict[str, float] = {}
        with phase(timings, "parse"):
            parsed = await asyncio.to_thread(ontology.parse, body, media)
        try:
            source = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadRequest(f"the ontology is not UTF-8 text (byte {exc.start}).") from exc
        async with self._lock:
            created = name not in self.metas
            others = [t for n, ts in self.triples.items() if n != name for t in ts]
            closure, hierarchy, reason_timings = await asyncio.to_thread(reason, [*others, *parsed.triples])
            timings.update(reason_timings)
            meta = OntologyMeta(name=name, triples=len(parsed.triples), inferred=len(closure.inferred),
                                uploaded_at=now_rfc3339(), media_type=media, prefixes=parsed.prefixes,
                                sha256=hashlib.sha256(body).hexdigest())
            with phase(timings, "store"):
                await self._write(self.store.save_ontology, meta, source)
            with phase(timings, "install"):
                self.metas[name] = meta
                self.triples[name] = parsed.triples
                self.sources[name] = body
                self.replica.put_ontology(name, parsed.triples, meta.sha256)
                self.replica.put_inferred(closure.inferred, self.closure_state())
                self._install_hierarchy(hierarchy, self.prefixes(), closure.seconds * 1000)
        reasoning_ms = timings["closure"] + timings["index"]
        log.info("ontology stored", extra={"ontology": name, "triples": meta.triples, "inferred": meta.inferred,
                                           "new": created, "reasoning_ms": round(reasoning_ms, 1),
                                           "timings_ms": {k: round(v, 1) for k, v in timings.items()}})
        return OntologyChange(meta, created, reasoning_ms, hierarchy.size, timings)

    async def delete(self, name: str) -> None:
        async with self._lock:
            if name not in self.metas:
                raise NotFound(f"no ontology named '{name}'.")
            others = [t for n, ts in self.triples.items() if n != name for t in ts]
            closure, hierarchy, _ = await asyncio.to_thread(reason, others)
            await self._write(self.store.delete_ontology, name)
            del self.metas[name]
            del self.triples[name]
            self.sources.pop(name, None)
            self.replica.remove_ontology(name)
            self.replica.put_inferred(closure.inferred, self.closure_state())
            self._install_hierarchy(hierarchy, self.prefixes(), closure.seconds * 1000)
        log.info("ontology deleted", extra={"ontology": name})

    async def load_file(self, path: Path) -> OntologyChange | None:
        """Preload a file (`--ontology`); an unchanged one is not reasoned over again."""
        media = ontology.FILE_SUFFIXES.get(path.suffix.lower())
        if media is None:
            raise BadRequest(f"{path}: unknown ontology file type '{path.suffix}'; use .ttl, .n3, .owl, .rdf, "
                             f".jsonld or .nt.")
        name = re.sub(r"[^A-Za-z0-9._-]", "-", path.stem)[:128] or "ontology"
        body = path.read_bytes()
        known = self.metas.get(name)
        if known is not None and known.sha256 == hashlib.sha256(body).hexdigest():
            log.info("ontology unchanged", extra={"ontology": name, "file": str(path)})
            return None
        return await self.put(name, body, media)

    # -- reads -------------------------------------------------------------------------------------
    def rdf(self, name: str, fmt: ox.RdfFormat) -> bytes:
        if name not in self.metas:
            raise NotFound(f"no ontology named '{name[:128]}'.")
        return cast(bytes, ox.serialize(self.triples[name], format=fmt, prefixes=self.metas[name].prefixes or None))

    def prefixes(self) -> dict[str, str]:
        """Prefixes declared in uploads; a later upload's declaration wins."""
        out: dict[str, str] = {}
        for meta in sorted(self.metas.values(), key=lambda m: m.uploaded_at):
            out.update(meta.prefixes)
        return out

    def closure_state(self) -> str:
        """What the closure was computed from, so start-up can tell whether the stored one is current."""
        text = "|".join(f"{m.name}@{m.sha256}" for m in sorted(self.metas.values(), key=lambda m: m.name))
        return hashlib.sha256(text.encode()).hexdigest()

    def _all(self) -> list[ox.Triple]:
        return [t for ts in self.triples.values() for t in ts]
