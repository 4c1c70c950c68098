"""RDF media types, one table for the server, the client and the CLI.

`FILE_SUFFIXES`: the media type a file is sent or read as, by its suffix (the client and
`semreg ontology put` guess with it, `semreg serve --ontology` reads files by it). `READ_AS`: the
syntax the server parses each accepted media type as, named by that syntax's main media type.
`WRITTEN`: the representations `GET /v1/ontologies/{name}` offers, Turtle first, under the names
`semreg ontology get --format` takes; `WRITTEN_AS`: those it offers after them, in another syntax.

`.n3` files are Turtle in practice (N3's formulae and rules are rare; the N3 vocabularies of the
shared data, FOAF, SOSA, SSN and GoodRelations, are plain Turtle): they travel as `text/n3`, and
`text/n3` is parsed as Turtle.

Standard library only: the client uses it without loading pyoxigraph.
"""
from __future__ import annotations

from pathlib import PurePath

TURTLE = "text/turtle"
N3 = "text/n3"
RDF_XML = "application/rdf+xml"
JSON_LD = "application/ld+json"
N_TRIPLES = "application/n-triples"

READ_AS: dict[str, str] = {
    TURTLE: TURTLE, "application/x-turtle": TURTLE, N3: TURTLE,
    RDF_XML: RDF_XML, "application/xml": RDF_XML,
    JSON_LD: JSON_LD,
    N_TRIPLES: N_TRIPLES, "text/plain": N_TRIPLES,
}

FILE_SUFFIXES: dict[str, str] = {
    ".ttl": TURTLE, ".n3": N3,
    ".owl": RDF_XML, ".rdf": RDF_XML, ".xml": RDF_XML,
    ".jsonld": JSON_LD, ".json": JSON_LD,
    ".nt": N_TRIPLES,
}

WRITTEN: dict[str, str] = {"turtle": TURTLE, "ntriples": N_TRIPLES, "rdfxml": RDF_XML, "jsonld": JSON_LD}
# Offered too, after those, and written in another syntax: a Turtle document is an N3 document, so a
# client that accepts only text/n3 gets Turtle under that name.
WRITTEN_AS: dict[str, str] = {N3: TURTLE}


def of_file(path: str | PurePath) -> str | None:
    """The media type a file is sent as, from its suffix (in any case); None for a suffix not in the table."""
    return FILE_SUFFIXES.get(PurePath(path).suffix.lower())
