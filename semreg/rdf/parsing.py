"""Ontology uploads: media types, parsing with the parser's line on error, declared prefixes, and blank
nodes of their own.

Whatever the bytes, `parse` gives a `Parsed` or a `BadRequest` (400) with the parser's message and the line
where it knows it. A term must be one the node's RDF parsers read back: its other parts parse the ontology
again as N-Triples or N-Quads (the SPARQL replica, the data directory, a backup), and pyoxigraph's parsers take
a term of at most 16 MiB (`LONGEST_TERM_BYTES`, as N-Triples writes it); a document that holds a longer one
is refused, whatever its syntax. An RDF/XML document is first read by expat within bounds (`xml_bounds`).
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import pyoxigraph as ox

from semreg.errors import BadRequest, NotAcceptable, UnsupportedMediaType
from semreg.rdf import xml_bounds
from semreg.rdf.media import FILE_SUFFIXES as FILE_SUFFIXES  # semreg.ontologies reads --ontology files by it
from semreg.rdf.media import READ_AS, WRITTEN, WRITTEN_AS
from semreg.rdf.negotiation import negotiate
from semreg.rdf.terms import conventional_prefixes

NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


def _rdf_format(media_type: str) -> ox.RdfFormat:
    fmt = ox.RdfFormat.from_media_type(media_type)
    if fmt is None:
        raise LookupError(f"pyoxigraph has no RDF format for {media_type}")
    return fmt


# Media type → parser format, and the representations of GET /v1/ontologies/{name}: from `semreg.rdf.media`.
PARSE_FORMATS = {media: _rdf_format(syntax) for media, syntax in READ_AS.items()}
SERIALIZE_FORMATS = {**{media: _rdf_format(media) for media in WRITTEN.values()},
                     **{media: _rdf_format(syntax) for media, syntax in WRITTEN_AS.items()}}
REPRESENTATIONS = tuple(SERIALIZE_FORMATS)  # in order of preference when Accept allows several
_XMLNS = re.compile(rb'xmlns:([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*["\']([^"\']+)["\']')
# pyoxigraph's parsers refuse a term past 16 MiB ("Reached the buffer maximal size"); a little room for its quotes
LONGEST_TERM_BYTES = 16 * 1024 * 1024 - 1024


@dataclass(frozen=True)
class Parsed:
    triples: list[ox.Triple]
    prefixes: dict[str, str]
    media_type: str
    terms: frozenset[str] = frozenset()  # every IRI of the triples (`semreg.reasoning.lexicon` knows them)
    conventional: dict[str, str] = field(default_factory=dict)  # prefixes of vocabularies it uses, undeclared


def iris(triples: list[ox.Triple]) -> frozenset[str]:
    named = ox.NamedNode
    return frozenset(t.value for triple in triples for t in (triple.subject, triple.predicate, triple.object)
                     if type(t) is named)


def validate_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise BadRequest(f"'{name[:100]}' is not a valid ontology name: use 1-128 letters, digits, '.', '_' or '-'.",
                         field="name")
    return name


def media_type_of(content_type: str | None) -> str:
    """The bare media type of a Content-Type header, or 415 when no parser takes it."""
    if not content_type:
        raise UnsupportedMediaType("an ontology needs a Content-Type: text/turtle, application/rdf+xml, "
                                   "application/ld+json or application/n-triples.")
    media = content_type.split(";", 1)[0].strip().lower()
    if media not in PARSE_FORMATS:
        raise UnsupportedMediaType(f"'{media}' is not an ontology format this server reads; send text/turtle, "
                                   f"application/rdf+xml, application/ld+json or application/n-triples.")
    return media


def parse(body: bytes, media_type: str, xml_depth: int = xml_bounds.DEPTH) -> Parsed:
    """Parse an upload; a syntax error becomes a 400 with the parser's line and column."""
    if not body.strip():
        raise BadRequest("the ontology is empty; send at least one triple.")
    fmt = PARSE_FORMATS[media_type]
    if fmt == ox.RdfFormat.RDF_XML:
        xml_bounds.check(body, media_type, xml_depth)
    try:
        triples, prefixes = _read(body, fmt)
    except SyntaxError as exc:
        raise BadRequest(f"the {media_type} document does not parse: {exc.msg}.", line=exc.lineno,
                         column=exc.offset) from exc
    except MemoryError as exc:  # pyoxigraph's, for a term past its buffer: not the process out of memory
        line = _long_line(body)
        raise BadRequest(f"the {media_type} document does not parse: it holds a term (a literal or an IRI) longer than "
                         f"the 16 MiB the RDF parsers read{f' (line {line})' if line else ''}.",
                         **({"line": line} if line else {})) from exc
    except (ValueError, OSError) as exc:
        raise BadRequest(f"the {media_type} document does not parse: {exc}.") from exc
    if not triples:
        raise BadRequest("the ontology has no triples (named graphs are ignored: send the triples in the default "
                         "graph).")
    if fmt == ox.RdfFormat.RDF_XML:
        for prefix, iri in _XMLNS.findall(body[:1_000_000]):
            prefixes.setdefault(prefix.decode(), iri.decode(errors="replace"))
    declared = {p: i for p, i in prefixes.items() if p and _absolute(i)}
    terms = iris(triples)
    _check_lengths(media_type, terms, triples)
    return Parsed(triples, declared, media_type, terms, conventional_prefixes(terms, declared))


def _read(body: bytes, fmt: ox.RdfFormat) -> tuple[list[ox.Triple], dict[str, str]]:
    """The default graph's triples, and the prefixes the document declares. Blank nodes are this document's
    own: labelled by its digest, so that two documents that both say `_:b0` do not share a node once reasoned
    over together, and a document parsed again (at start-up, or by another node from the same bytes) gets the
    same labels."""
    scope = "d" + hashlib.sha256(body).hexdigest()[:16] + "x"
    blanks: dict[ox.BlankNode, ox.BlankNode] = {}

    def own(node: ox.BlankNode) -> ox.BlankNode:
        mine = blanks.get(node)
        if mine is None:
            mine = blanks[node] = ox.BlankNode(f"{scope}{len(blanks)}")
        return mine

    parser = ox.parse(body, format=fmt)
    triples = []
    for q in parser:
        if not isinstance(q.graph_name, ox.DefaultGraph):
            continue
        s, o = q.subject, q.object
        if isinstance(s, ox.BlankNode):
            s = own(s)
        if isinstance(o, ox.BlankNode):
            o = own(o)
        triples.append(ox.Triple(s, q.predicate, o))
    return triples, dict(parser.prefixes or {})


def _check_lengths(media_type: str, terms: frozenset[str], triples: list[ox.Triple]) -> None:
    """Every term within `LONGEST_TERM_BYTES` as N-Triples writes it (escapes make it longer than its value)."""
    # a value this short cannot pass the limit once written: a character is at most 6 bytes (\uXXXX escaped)
    short = LONGEST_TERM_BYTES // 6
    if terms and max(map(len, terms)) > short:
        for iri in terms:
            if len(iri) > short and len(str(ox.NamedNode(iri)).encode()) > LONGEST_TERM_BYTES:
                _too_long(media_type, "an IRI", len(iri))
    literal = ox.Literal
    for t in triples:
        o = t.object
        if type(o) is literal and len(o.value) > short and len(str(o).encode()) > LONGEST_TERM_BYTES:
            _too_long(media_type, "a literal", len(o.value))


def _too_long(media_type: str, what: str, n: int) -> None:
    raise BadRequest(f"the {media_type} document holds {what} of {n} characters, longer than the 16 MiB the node's RDF "
                     f"parsers read back as N-Triples; keep each term under 16 MiB.")


def _long_line(body: bytes) -> int | None:
    """The first line (from 1) longer than the RDF parsers' buffer, if one is."""
    for n, line in enumerate(body.split(b"\n"), 1):
        if len(line) > LONGEST_TERM_BYTES:
            return n
    return None


def _absolute(iri: str) -> bool:
    try:
        ox.NamedNode(iri)
        return ":" in iri
    except ValueError:
        return False


def choose_representation(accept: str | None) -> tuple[str, ox.RdfFormat]:
    """The RDF representation for an `Accept` header (`semreg.rdf.negotiation`), Turtle by default; 406 if none."""
    media = negotiate(accept, REPRESENTATIONS)
    if media is None:
        raise NotAcceptable(f"none of '{(accept or '')[:200]}' is offered; ask for one of {', '.join(REPRESENTATIONS)}.")
    return media, SERIALIZE_FORMATS[media]
