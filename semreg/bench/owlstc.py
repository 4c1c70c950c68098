"""Reading OWLS-TC 3 (the OWL-S service retrieval test collection) as semreg sees it.

The collection's directory (`--shared-data`/owls-tc3) holds `services/1.1/*.owls` (1,007 OWL-S 1.1
services), `queries/1.1/*.owls` (the requests, in the same form), `ontology/*.owl` (the domain ontologies,
base IRI `http://127.0.0.1/ontology/FILE`) and `owls-tc3-dev.xml` (relevance judgments, binary and graded
0-3). A service's inputs and outputs are the `process:parameterType` of its profile's `profile:hasInput` /
`profile:hasOutput`, given by reference (`rdf:resource="#X"`) or inline.

The OWL-S upper ontologies (Service, Profile, Process, Grounding and their helpers) are left out: no
parameter type names their terms. Some ontologies name nodes with `rdf:ID` values that are not XML names
(`1PERSON`, empty, repeated): those are rewritten to `rdf:about="#value"` (the same IRI) and the file is
read with rdflib, then handed over as N-Triples, which any strict parser reads.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

RDF = "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}"
PROFILE = "{http://www.daml.org/services/owl-s/1.1/Profile.owl#}"
PROCESS = "{http://www.daml.org/services/owl-s/1.1/Process.owl#}"
BASE = "http://127.0.0.1/"
ONTOLOGY_BASE = BASE + "ontology/"
# the OWL-S upper ontologies: the language services are written in, not what they handle
UPPER = frozenset({"ActorDefault.owl", "Expression.owl", "Grounding.owl", "ObjectList.owl", "Process.owl",
                   "Profile.owl", "ProfileDeprecatedElements.owl", "Service.owl"})
_RDF_ID = re.compile(rb'rdf:ID\s*=\s*"([^"]*)"')
_ENCODING = re.compile(rb'^<\?xml[^>]*encoding\s*=\s*["\']([A-Za-z0-9._-]+)["\']')


@dataclass(frozen=True)
class Service:
    """A service or a request: its file, its input and output classes (full IRIs, in file order)."""

    file: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    @property
    def instance_id(self) -> str:
        """An id the registry takes (`[A-Za-z0-9._:-]{1,128}`), one per file."""
        return re.sub(r"[^A-Za-z0-9._:-]", "_", self.file.removesuffix(".owls"))[:128]


@dataclass(frozen=True)
class Request:
    """A request with its judgments: service file → grade (binary relevance is grade > 0 of `relevant`)."""

    service: Service
    name: str
    relevant: frozenset[str]  # service files judged relevant (binary set)
    grades: dict[str, int]  # service file → graded relevance 0-3


@dataclass(frozen=True)
class Collection:
    services: tuple[Service, ...]
    requests: tuple[Request, ...]
    ontologies: tuple[Path, ...]


def read_service(path: Path) -> Service:
    """A service description's input and output classes."""
    root = ET.parse(path).getroot()
    types: dict[str, str] = {}
    for element in root.iter():
        found = element.find(PROCESS + "parameterType")
        if found is None or not (found.text or "").strip():
            continue
        name = element.get(RDF + "ID")
        about = element.get(RDF + "about")
        key = name if name is not None else (about or "").rsplit("#", 1)[-1]
        types[key] = found.text.strip()  # type: ignore[union-attr]
    inputs: list[str] = []
    outputs: list[str] = []
    for profile in root.iter(PROFILE + "Profile"):
        for tag, into in ((PROFILE + "hasInput", inputs), (PROFILE + "hasOutput", outputs)):
            for ref in profile.iter(tag):
                resource = ref.get(RDF + "resource")
                if resource is not None:
                    key = resource.rsplit("#", 1)[-1]
                else:
                    inner = next(iter(ref), None)
                    key = "" if inner is None else inner.get(RDF + "ID") or (inner.get(RDF + "about") or "").rsplit("#", 1)[-1]
                kind = types.get(key)
                if kind is not None and kind not in into:
                    into.append(kind)
    return Service(path.name, tuple(inputs), tuple(outputs))


def _text(element: ET.Element | None) -> str:
    return "" if element is None or element.text is None else element.text.strip()


def _file_of(uri: str) -> str:
    return uri.split("#", 1)[0].rsplit("/", 1)[-1]


def read_judgments(path: Path) -> dict[str, tuple[str, frozenset[str], dict[str, int]]]:
    """Request file → (its name, the relevant service files, service file → grade)."""
    root = ET.parse(path).getroot()
    binary: dict[str, tuple[str, set[str]]] = {}
    for request in root.iter("binaryrelevanceset"):
        for req in request.iter("request"):
            relevant = {_file_of(_text(o.find("uri"))) for o in req.iter("offer") if _text(o.find("relevant")) == "1"}
            binary[_file_of(_text(req.find("uri")))] = (_text(req.find("name")), relevant)
    grades: dict[str, dict[str, int]] = {}
    for scale in root.iter("relevancegrades"):
        for req in scale.iter("request"):
            graded = grades.setdefault(_file_of(_text(req.find("uri"))), {})
            for offer in req.iter("offer"):
                value = _text(offer.find("grade/value"))
                if value:
                    graded[_file_of(_text(offer.find("uri")))] = int(value)
    return {file: (name, frozenset(relevant), grades.get(file, {})) for file, (name, relevant) in binary.items()}


def read_collection(directory: Path) -> Collection:
    """Every service, the requests that have judgments, and the domain ontologies, in file name order."""
    services = tuple(read_service(p) for p in sorted((directory / "services" / "1.1").glob("*.owls")))
    judgments = read_judgments(directory / "owls-tc3-dev.xml")
    requests = []
    for path in sorted((directory / "queries" / "1.1").glob("*.owls")):
        judged = judgments.get(path.name)
        if judged is not None:
            requests.append(Request(read_service(path), *judged))
    ontologies = tuple(p for p in sorted((directory / "ontology").glob("*.owl")) if p.name not in UPPER)
    return Collection(services, tuple(requests), ontologies)


def ontology_ntriples(path: Path) -> bytes:
    """An ontology file as N-Triples: `rdf:ID`s rewritten, any declared encoding, base IRI as published."""
    import rdflib  # only here: reading the collection's own files needs no RDF library

    raw = path.read_bytes()
    declared = _ENCODING.match(raw)
    text = raw.decode(declared.group(1).decode() if declared else "utf-8", errors="replace")
    fixed = _RDF_ID.sub(lambda m: b'rdf:about="#' + m.group(1) + b'"', text.encode("utf-8"))
    fixed = _ENCODING.sub(lambda m: m.group(0).replace(m.group(1), b"UTF-8"), fixed, count=1)
    graph = rdflib.Graph()
    graph.parse(data=fixed, format="xml", publicID=ONTOLOGY_BASE + path.name)
    return graph.serialize(format="nt", encoding="utf-8")
