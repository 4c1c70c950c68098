"""Terms and tags: IRIs, CURIEs, the prefix map, and the tag forms of the contract.

A term is a full IRI (`http://x.org/o#Livro`), a bracketed IRI (`<http://x.org/o#Livro>`) or a CURIE
(`ex:Livro`). Internally every term is its full IRI as a `str`; the wildcard is `ANY` (`sr:Any`).
A tag is a `Tag(s, p, o)` of full IRIs, written as text `"S P O"` (full IRIs, space separated).
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

import pyoxigraph

from semreg.errors import BadRequest, InvalidTerm

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
OWL = "http://www.w3.org/2002/07/owl#"
XSD = "http://www.w3.org/2001/XMLSchema#"
SR = "https://w3id.org/semreg#"

ANY = SR + "Any"
RDF_TYPE = RDF + "type"

BUILTIN_PREFIXES: dict[str, str] = {"rdf": RDF, "rdfs": RDFS, "owl": OWL, "xsd": XSD, "sr": SR}

# The conventional prefixes of common vocabularies (prefix.cc's), known for an upload that uses a
# namespace of theirs without declaring any prefix for it (DBpedia's files declare none for dbo:).
CONVENTIONAL_PREFIXES: dict[str, tuple[str, ...]] = {
    "dbo": ("http://dbpedia.org/ontology/",),
    "schema": ("https://schema.org/", "http://schema.org/"),
    "foaf": ("http://xmlns.com/foaf/0.1/",),
    "sosa": ("http://www.w3.org/ns/sosa/",),
    "ssn": ("http://www.w3.org/ns/ssn/",),
    "gr": ("http://purl.org/goodrelations/v1#",),
    "dcterms": ("http://purl.org/dc/terms/",),
    "skos": ("http://www.w3.org/2004/02/skos/core#",),
}

# Schemes that make `scheme:rest` an IRI rather than a CURIE when no prefix of that name is known.
IRI_SCHEMES = frozenset({"http", "https", "urn", "tag", "mailto", "file", "ftp", "did", "data", "ldap", "geo", "info"})

_PREFIX_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$|^$")
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$")
_BAD_IRI_CHARS = re.compile(r'[\s<>"{}|^`\\]')
MAX_TERM_CHARS = 4096


class Tag(NamedTuple):
    """A triple pattern of full IRIs; `ANY` in a position is the wildcard."""

    s: str
    p: str = ANY
    o: str = ANY

    @property
    def text(self) -> str:
        return f"{self.s} {self.p} {self.o}"

    def as_json(self) -> dict[str, str]:
        return {"s": self.s, "p": self.p, "o": self.o}


def check_iri(iri: str, term: str | None = None) -> str:
    """Return `iri` if it is an absolute IRI, else raise `InvalidTerm` naming the term."""
    shown = term if term is not None else iri
    if not iri or len(iri) > MAX_TERM_CHARS or _BAD_IRI_CHARS.search(iri):
        raise InvalidTerm(f"'{_clip(shown)}' is not a valid IRI: it is empty, too long or has a character IRIs forbid.",
                          term=_clip(shown))
    scheme, sep, _ = iri.partition(":")
    if not sep or not _SCHEME_RE.match(scheme):
        raise InvalidTerm(f"'{_clip(shown)}' is a relative IRI; use a full IRI or a CURIE with a known prefix.",
                          term=_clip(shown))
    try:
        pyoxigraph.NamedNode(iri)
    except ValueError as exc:
        raise InvalidTerm(f"'{_clip(shown)}' is not a valid IRI: {exc}.", term=_clip(shown)) from exc
    return iri


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


EXPANDED_KEPT = 100_000  # terms remembered with what they expand to (bounded memory)


class PrefixMap:
    """CURIE prefixes: the built-ins, those declared in uploaded ontologies, and those set by clients.

    Client-set prefixes win over ontology declarations, which win over nothing; built-ins cannot be
    redefined, so `rdf:type` always means what the contract says.
    """

    def __init__(self, ontology: Mapping[str, str] | None = None, explicit: Mapping[str, str] | None = None) -> None:
        self._ontology: dict[str, str] = dict(ontology or {})
        self._explicit: dict[str, str] = dict(explicit or {})
        self._merged: dict[str, str] = {}
        self.listeners: list[Callable[[int, dict[str, str]], None]] = []  # (version, map) after each change
        self._rebuild()

    def _rebuild(self) -> None:
        self._merged = {**self._ontology, **self._explicit, **BUILTIN_PREFIXES}
        self.version = getattr(self, "version", 0) + 1  # what a term expanded to may have changed
        self._expanded: dict[str, str] = {}
        for listener in self.listeners:
            listener(self.version, self.as_dict())

    def set_ontology_prefixes(self, prefixes: Mapping[str, str]) -> None:
        self._ontology = dict(prefixes)
        self._rebuild()

    def set(self, prefix: str, iri: str) -> None:
        self._explicit[prefix] = iri
        self._rebuild()

    def delete(self, prefix: str) -> bool:
        found = self._explicit.pop(prefix, None) is not None
        self._rebuild()
        return found

    @property
    def explicit(self) -> dict[str, str]:
        return dict(self._explicit)

    @property
    def ontology(self) -> dict[str, str]:
        return dict(self._ontology)

    def as_dict(self) -> dict[str, str]:
        return dict(sorted(self._merged.items()))

    def get(self, prefix: str) -> str | None:
        return self._merged.get(prefix)

    def expand(self, term: str) -> str:
        """The full IRI a term stands for; `InvalidTerm` names the term when it stands for none. Terms
        recur (a service's tags share their classes): each valid one is checked once per prefix version."""
        if not isinstance(term, str):
            raise InvalidTerm(f"a term must be a string, not {type(term).__name__}.")
        known = self._expanded.get(term)
        if known is not None:
            return known
        iri = self._expand(term)
        if len(self._expanded) >= EXPANDED_KEPT:
            self._expanded.clear()
        self._expanded[term] = iri
        return iri

    def _expand(self, term: str) -> str:
        if not isinstance(term, str):
            raise InvalidTerm(f"a term must be a string, not {type(term).__name__}.")
        term = term.strip()
        if not term:
            raise InvalidTerm("a term is empty; give a full IRI, <IRI> or a CURIE such as ex:Livro.")
        if term.startswith("<"):
            if not term.endswith(">"):
                raise InvalidTerm(f"'{_clip(term)}' opens '<' but does not close it with '>'.", term=_clip(term))
            return check_iri(term[1:-1], term)
        prefix, sep, local = term.partition(":")
        if not sep:
            raise InvalidTerm(f"'{_clip(term)}' is neither an IRI nor a CURIE (prefix:name).", term=_clip(term))
        base = self._merged.get(prefix)
        if base is not None and not local.startswith("//"):
            return check_iri(base + local, term)
        if prefix.lower() in IRI_SCHEMES or local.startswith("//"):
            return check_iri(term)
        if not _PREFIX_RE.match(prefix):
            raise InvalidTerm(f"'{_clip(term)}' is neither an IRI nor a CURIE (prefix:name).", term=_clip(term))
        raise InvalidTerm(f"unknown prefix '{prefix}' in term '{_clip(term)}'; declare it in an ontology or with "
                          f"PUT /v1/prefixes/{prefix}, or use a full IRI.", term=_clip(term), prefix=prefix)

    def compact(self, iri: str) -> str:
        """The shortest CURIE for `iri`, or the IRI itself when no prefix covers it (for people, not APIs)."""
        best = ""
        best_prefix = None
        for prefix, base in self._merged.items():
            if iri.startswith(base) and len(base) > len(best):
                best, best_prefix = base, prefix
        if best_prefix is None:
            return iri
        return f"{best_prefix}:{iri[len(best):]}"


def split_iri(iri: str) -> tuple[str, str]:
    """`(namespace, local name)`: the namespace is the IRI up to its last `#`, or else its last `/`, or else
    its last `:`."""
    for mark in "#/:":
        cut = iri.rfind(mark)
        if cut >= 0:
            return iri[:cut + 1], iri[cut + 1:]
    return "", iri


def conventional_prefixes(iris: Iterable[str], declared: Mapping[str, str]) -> dict[str, str]:
    """The conventional prefixes (`CONVENTIONAL_PREFIXES`) of the vocabularies whose namespace `iris` use,
    for a document that declares neither that prefix nor any prefix for that namespace."""
    used = {split_iri(iri)[0] for iri in iris}
    declared_namespaces = set(declared.values())
    out = {}
    for prefix, namespaces in CONVENTIONAL_PREFIXES.items():
        if prefix in declared or declared_namespaces.intersection(namespaces):
            continue
        for namespace in namespaces:
            if any(n.startswith(namespace) for n in used):
                out[prefix] = namespace
                break
    return out


def validate_prefix_name(prefix: str) -> str:
    if not _PREFIX_RE.match(prefix) or not prefix:
        raise BadRequest(f"'{_clip(prefix)}' is not a valid prefix name (a letter or '_', then letters, digits, "
                         f"'_', '-' or '.').", field="prefix")
    if prefix in BUILTIN_PREFIXES:
        raise BadRequest(f"the prefix '{prefix}' is built in and cannot be redefined.", field="prefix")
    return prefix


def parse_component(value: Any, prefixes: PrefixMap, *, predicate: bool = False) -> str:
    """One position of a tag or query: a term, `sr:Any`, or (predicate only) `a` for `rdf:type`."""
    if value is None:
        return ANY
    if not isinstance(value, str):
        raise InvalidTerm(f"a term must be a string, not {type(value).__name__}.")
    if predicate and value.strip() == "a":
        return RDF_TYPE
    return prefixes.expand(value)


TAG_KEYS = frozenset({"s", "p", "o"})


def parse_tag(value: Any, prefixes: PrefixMap) -> Tag:
    """A tag from its JSON form `{"s", "p"?, "o"?}` or its string form of one or three terms."""
    if isinstance(value, str):
        parts = value.split()
        if len(parts) == 1:
            return Tag(parse_component(parts[0], prefixes), ANY, ANY)
        if len(parts) == 3:
            return Tag(parse_component(parts[0], prefixes), parse_component(parts[1], prefixes, predicate=True),
                       parse_component(parts[2], prefixes))
        raise BadRequest(f"the tag '{_clip(value)}' has {len(parts)} terms; a string tag has one term or three "
                         f"(subject predicate object).", tag=_clip(value))
    if isinstance(value, dict):
        if not value.keys() <= TAG_KEYS:
            unknown = set(value) - TAG_KEYS
            raise BadRequest(f"a tag object takes only s, p and o, not {', '.join(sorted(map(str, unknown)))}.")
        if "s" not in value:
            raise BadRequest("a tag object needs 's' (its subject term).")
        return Tag(parse_component(value["s"], prefixes), parse_component(value.get("p"), prefixes, predicate=True),
                   parse_component(value.get("o"), prefixes))
    raise BadRequest(f"a tag is a string of one or three terms or an object with s, p, o, not {type(value).__name__}.")


def parse_tags(values: Iterable[Any], prefixes: PrefixMap, positions: list[int] | None = None) -> list[Tag]:
    """Tags in order, duplicates dropped (a tag is a set member of its instance); `positions`, when given,
    receives the index in `values` of each tag returned."""
    seen: dict[Tag, None] = {}
    for n, value in enumerate(values):
        try:
            tag = parse_tag(value, prefixes)
        except BadRequest as exc:
            exc.message = f"tags[{n}]: {exc.message}"
            exc.extra.setdefault("field", f"tags[{n}]")
            raise
        if tag not in seen:
            seen[tag] = None
            if positions is not None:
                positions.append(n)
    return list(seen)
