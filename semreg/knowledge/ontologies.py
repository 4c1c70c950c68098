"""The uploaded ontologies of a node: upload, replace, delete, restore, and the closure over them all.

An upload is parsed, reasoned over together with the others (`semreg.reasoning.reasoner` updates the closure and
the hierarchy index for what changed), recorded durably as one transaction (its metadata and the
document itself), and installed; its graph and the change to the closure graph reach the SPARQL
replica behind it (a `Published`: `semreg.sparql.feed` on a node). A failed parse changes nothing; so does a failure before
the record is written (the reasoner is taken back to the ontologies as they were). Parsed triples
stay in memory, so `GET /v1/ontologies/{name}` never waits for the graph to be written.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import pyoxigraph as ox

from semreg.errors import BadRequest, NotFound
from semreg.rdf import parsing, xml_bounds
from semreg.reasoning.reasoner import Hierarchy, Outcome, Reasoner
from semreg.storage.store import OntologyMeta, Store, now_rfc3339

log = logging.getLogger("semreg.ontologies")

Write = Callable[..., Awaitable[Any]]  # runs a store operation on the node's writer thread


class Published(Protocol):
    """Where the ontologies' graphs and the closure graph are published: the SPARQL replica's feed
    (`semreg.sparql.feed.ReplicaFeed`), which the node wires in. Each call returns the change's ticket."""

    def put_ontology(self, name: str, triples: list[ox.Triple], sha256: str = "") -> int: ...

    def remove_ontology(self, name: str) -> int: ...

    def put_inferred(self, triples: list[ox.Triple], state: str = "") -> int: ...

    def patch_inferred(self, added: Iterable[ox.Triple], removed: Iterable[ox.Triple], state: str = "") -> int: ...


class PublishedTo:
    """Publishes to several places (the SPARQL replica, the data directory's RDF); the first one's ticket."""

    def __init__(self, first: Published, *others: Published) -> None:
        self.sinks = (first, *others)

    def put_ontology(self, name: str, triples: list[ox.Triple], sha256: str = "") -> int:
        return [sink.put_ontology(name, triples, sha256) for sink in self.sinks][0]

    def remove_ontology(self, name: str) -> int:
        return [sink.remove_ontology(name) for sink in self.sinks][0]

    def put_inferred(self, triples: list[ox.Triple], state: str = "") -> int:
        return [sink.put_inferred(triples, state) for sink in self.sinks][0]

    def patch_inferred(self, added: Iterable[ox.Triple], removed: Iterable[ox.Triple], state: str = "") -> int:
        added, removed = _ReadOnce(added), _ReadOnce(removed)  # each sink reads them on its own thread
        return [sink.patch_inferred(added, removed, state) for sink in self.sinks][0]


class Unpublished:
    """Publishes nowhere: a node with neither the SPARQL replica (`--no-sparql`) nor a data directory. Its
    tickets are 0 (nothing waits on them)."""

    def put_ontology(self, name: str, triples: list[ox.Triple], sha256: str = "") -> int:
        return 0

    def remove_ontology(self, name: str) -> int:
        return 0

    def put_inferred(self, triples: list[ox.Triple], state: str = "") -> int:
        return 0

    def patch_inferred(self, added: Iterable[ox.Triple], removed: Iterable[ox.Triple], state: str = "") -> int:
        return 0


class _ReadOnce:
    """An iterable read by several threads, converted once, by whichever reads it first."""

    def __init__(self, source: Iterable[ox.Triple]) -> None:
        self._source: Iterable[ox.Triple] | None = source
        self._items: list[ox.Triple] = []
        self._lock = threading.Lock()

    def __iter__(self) -> Iterator[ox.Triple]:
        with self._lock:
            if self._source is not None:
                self._items, self._source = list(self._source), None
        return iter(self._items)


@dataclass(frozen=True)
class OntologyChange:
    meta: OntologyMeta
    created: bool
    reasoning_ms: float
    concepts: int
    timings_ms: dict[str, float] = field(default_factory=dict)
    inferred_total: int = 0  # triples in urn:semreg:inferred after the change


@contextlib.contextmanager
def phase(timings: dict[str, float], name: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = (time.perf_counter() - started) * 1000


class Ontologies:
    def __init__(self, store: Store, replica: Published, write: Write,
                 install: Callable[[Hierarchy, dict[str, str], float], None], xml_depth: int = xml_bounds.DEPTH) -> None:
        self.store = store
        self.xml_depth = xml_depth  # how deep an RDF/XML document's elements may nest (`semreg.rdf.xml_bounds`)
        self.replica = replica
        self._write = write
        self._install_hierarchy = install
        self.metas: dict[str, OntologyMeta] = {}
        self.triples: dict[str, list[ox.Triple]] = {}
        self.terms: dict[str, frozenset[str]] = {}  # name → the IRIs of its triples
        self.conventional: dict[str, dict[str, str]] = {}  # name → prefixes of vocabularies it uses undeclared
        self.sources: dict[str, bytes] = {}  # name → the document as uploaded (other nodes fetch it)
        self._reasoner = Reasoner()
        self._lock = asyncio.Lock()

    def __contains__(self, name: str) -> bool:
        return name in self.metas

    def parse(self, body: bytes, media_type: str) -> parsing.Parsed:
        """A document as an upload is parsed (a 400 when it is not one); the caller's thread does the work."""
        return parsing.parse(body, media_type, self.xml_depth)

    def __len__(self) -> int:
        return len(self.metas)

    # -- start-up ----------------------------------------------------------------------------------
    async def restore(self) -> None:
        """Parse every recorded ontology, reason, install; the replica gets every graph whole."""
        records = await self._write(self.store.load_ontologies)
        for meta, source in records:
            try:
                parsed = await asyncio.to_thread(self.parse, source.encode(), meta.media_type)
            except BadRequest as exc:
                log.error("a recorded ontology no longer parses; it is left out", extra={"ontology": meta.name,
                                                                                          "reason": exc.message})
                continue
            self.metas[meta.name] = meta
            self.triples[meta.name] = parsed.triples
            self.terms[meta.name] = parsed.terms
            self.conventional[meta.name] = parsed.conventional
            self.sources[meta.name] = source.encode()
        for name, meta in self.metas.items():
            self.replica.put_ontology(name, self.triples[name], meta.sha256)
        outcome = await asyncio.to_thread(self._reasoner.rebuild, self.triples)
        self.replica.put_inferred(self._reasoner.inferred(), self.closure_state())
        self._install_hierarchy(outcome.hierarchy, self.prefixes(), outcome.reasoning_ms)

    # -- changes -----------------------------------------------------------------------------------
    async def put(self, name: str, body: bytes, content_type: str | None) -> OntologyChange:
        parsing.validate_name(name)
        media = parsing.media_type_of(content_type)
        timings: dict[str, float] = {}
        with phase(timings, "parse"):
            parsed = await asyncio.to_thread(self.parse, body, media)
        try:
            source = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadRequest(f"the ontology is not UTF-8 text (byte {exc.start}).") from exc
        # Shielded: once the reasoner has the change, it is recorded or undone, even if the request goes away.
        meta, created, outcome = await asyncio.shield(self._put(name, parsed, media, body, source, timings))
        reasoning_ms = outcome.reasoning_ms
        log.info("ontology stored", extra={"ontology": name, "triples": meta.triples, "inferred": meta.inferred,
                                           "inferred_total": outcome.inferred_count,
                                           "new": created, "reasoning_ms": round(reasoning_ms, 1),
                                           "timings_ms": {k: round(v, 1) for k, v in timings.items()}})
        return OntologyChange(meta, created, reasoning_ms, outcome.hierarchy.size, timings, outcome.inferred_count)

    async def _put(self, name: str, parsed: parsing.Parsed, media: str, body: bytes, source: str,
                   timings: dict[str, float]) -> tuple[OntologyMeta, bool, Outcome]:
        async with self._lock:
            created = name not in self.metas
            outcome = await asyncio.to_thread(self._reasoner.put, name, parsed.triples)
            timings.update(outcome.timings_ms)
            sha256 = hashlib.sha256(body).hexdigest()
            known = self.metas.get(name)
            # what the upload added; the same document again adds nothing, and keeps what it added the first time
            inferred = known.inferred if known is not None and known.sha256 == sha256 else outcome.inferred_gained
            meta = OntologyMeta(name=name, triples=len(parsed.triples), inferred=inferred, uploaded_at=now_rfc3339(),
                                media_type=media, prefixes=parsed.prefixes, sha256=sha256)
            with phase(timings, "store"):
                await self._undo_on_failure(name, self._write(self.store.save_ontology, meta, source))
            with phase(timings, "install"):
                self.metas[name] = meta
                self.triples[name] = parsed.triples
                self.terms[name] = parsed.terms
                self.conventional[name] = parsed.conventional
                self.sources[name] = body
                self.replica.put_ontology(name, parsed.triples, meta.sha256)
                self._install(outcome)
        return meta, created, outcome

    async def delete(self, name: str) -> None:
        await asyncio.shield(self._delete(name))
        log.info("ontology deleted", extra={"ontology": name})

    async def _delete(self, name: str) -> None:
        async with self._lock:
            if name not in self.metas:
                raise NotFound(f"no ontology named '{name}'.")
            outcome = await asyncio.to_thread(self._reasoner.delete, name)
            await self._undo_on_failure(name, self._write(self.store.delete_ontology, name))
            del self.metas[name]
            del self.triples[name]
            self.terms.pop(name, None)
            self.conventional.pop(name, None)
            self.sources.pop(name, None)
            self.replica.remove_ontology(name)
            self._install(outcome)

    async def _undo_on_failure(self, name: str, write: Awaitable[Any]) -> None:
        """Await the durable write of a change; if it fails, take the reasoner back to the recorded ontologies."""
        try:
            await write
        except Exception:
            if name in self.triples:
                await asyncio.to_thread(self._reasoner.put, name, self.triples[name])
            else:
                await asyncio.to_thread(self._reasoner.delete, name)
            raise

    def _install(self, outcome: Outcome) -> None:
        """Send the closure graph to the replica behind the change, whole or as a patch, and install the new
        index."""
        if outcome.full:
            self.replica.put_inferred(self._reasoner.inferred(), self.closure_state())
        else:
            self.replica.patch_inferred(outcome.inferred_added, outcome.inferred_removed, self.closure_state())
        self._install_hierarchy(outcome.hierarchy, self.prefixes(), outcome.reasoning_ms)

    async def load_file(self, path: Path) -> OntologyChange | None:
        """Preload a file (`--ontology`); an unchanged one is not reasoned over again."""
        media = parsing.FILE_SUFFIXES.get(path.suffix.lower())
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
        """Prefixes declared in uploads (a later upload's declaration wins), and the conventional prefixes of
        the common vocabularies uploads use without declaring one (`semreg.rdf.terms.CONVENTIONAL_PREFIXES`),
        which a declaration overrides."""
        out: dict[str, str] = {}
        uploads = sorted(self.metas.values(), key=lambda m: m.uploaded_at)
        for meta in uploads:
            out.update(self.conventional.get(meta.name, {}))
        for meta in uploads:
            out.update(meta.prefixes)
        return out

    def declaring(self, prefix: str) -> dict[str, str]:
        """The uploads that give `prefix` a namespace (declared, or the conventional one), with that namespace."""
        out = {name: ns[prefix] for name, ns in self.conventional.items() if prefix in ns}
        return {**out, **{name: meta.prefixes[prefix] for name, meta in self.metas.items() if prefix in meta.prefixes}}

    def closure_state(self) -> str:
        """What the closure was computed from, so start-up can tell whether the stored one is current."""
        text = "|".join(f"{m.name}@{m.sha256}" for m in sorted(self.metas.values(), key=lambda m: m.name))
        return hashlib.sha256(text.encode()).hexdigest()
