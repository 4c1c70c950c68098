"""The SPARQL 1.1 Service Description of `/sparql` (https://www.w3.org/TR/sparql11-service-description/).

Served for a GET or POST without a query. It states what a client cannot guess: the default graph is
the union of every graph, no entailment is applied at query time, and the entailed triples are
materialised in their own graph, `urn:semreg:inferred`.
"""
from __future__ import annotations

from functools import lru_cache
from typing import cast

import pyoxigraph
from pyoxigraph import BlankNode, Literal, NamedNode, QueryResultsFormat, RdfFormat, Triple

from semreg.errors import BadRequest
from semreg.sparql.formats import GRAPH, OFFERS, SOLUTIONS, Offer, require
from semreg.sparql.runner import Output

SD = "http://www.w3.org/ns/sparql-service-description#"
RDF_TYPE = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
RDFS_COMMENT = NamedNode("http://www.w3.org/2000/01/rdf-schema#comment")
SIMPLE_ENTAILMENT = NamedNode("http://www.w3.org/ns/entailment/Simple")
INFERRED = NamedNode("urn:semreg:inferred")
FORMATS = "http://www.w3.org/ns/formats/"
# The registry's IRIs (https://www.w3.org/ns/formats/); pyoxigraph names JSON-LD differently.
FORMAT_IRIS = {
    QueryResultsFormat.JSON: FORMATS + "SPARQL_Results_JSON",
    QueryResultsFormat.XML: FORMATS + "SPARQL_Results_XML",
    QueryResultsFormat.CSV: FORMATS + "SPARQL_Results_CSV",
    QueryResultsFormat.TSV: FORMATS + "SPARQL_Results_TSV",
    RdfFormat.TURTLE: FORMATS + "Turtle",
    RdfFormat.N_TRIPLES: FORMATS + "N-Triples",
    RdfFormat.JSON_LD: FORMATS + "JSON-LD",
    RdfFormat.RDF_XML: FORMATS + "RDF_XML",
}

PREFIXES = {
    "sd": SD,
    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    "formats": FORMATS,
    "ent": "http://www.w3.org/ns/entailment/",
}

SERVICE_NOTE = ("The default graph is the union of every graph. No entailment is applied at query time: the "
                "entailed triples of all ontologies (subclass, subproperty and type closure, and more) are "
                "materialised in the named graph urn:semreg:inferred, which the default graph includes. "
                "Queries are read-only and time-limited; SERVICE is not available.")
INFERRED_NOTE = "The entailed triples of all uploaded ontologies together, kept apart from the asserted ones."


def _sd(name: str) -> NamedNode:
    return NamedNode(SD + name)


def description_triples(endpoint_url: str) -> list[Triple]:
    """The description of the endpoint at `endpoint_url`, as triples."""
    service, dataset, default_graph, inferred = BlankNode("service"), BlankNode("dataset"), BlankNode(
        "default"), BlankNode("inferred")
    formats = dict.fromkeys(FORMAT_IRIS[offer.format] for kind in (SOLUTIONS, GRAPH) for offer in OFFERS[kind])
    return [
        Triple(service, RDF_TYPE, _sd("Service")),
        Triple(service, _sd("endpoint"), NamedNode(endpoint_url)),
        Triple(service, _sd("supportedLanguage"), _sd("SPARQL11Query")),
        *(Triple(service, _sd("resultFormat"), NamedNode(iri)) for iri in formats),
        Triple(service, _sd("feature"), _sd("UnionDefaultGraph")),
        Triple(service, _sd("defaultEntailmentRegime"), SIMPLE_ENTAILMENT),
        Triple(service, RDFS_COMMENT, Literal(SERVICE_NOTE, language="en")),
        Triple(service, _sd("defaultDataset"), dataset),
        Triple(dataset, RDF_TYPE, _sd("Dataset")),
        Triple(dataset, _sd("defaultGraph"), default_graph),
        Triple(default_graph, RDF_TYPE, _sd("Graph")),
        Triple(default_graph, RDFS_COMMENT, Literal("The union of every graph of the store.", language="en")),
        Triple(dataset, _sd("namedGraph"), inferred),
        Triple(inferred, RDF_TYPE, _sd("NamedGraph")),
        Triple(inferred, _sd("name"), INFERRED),
        Triple(inferred, RDFS_COMMENT, Literal(INFERRED_NOTE, language="en")),
    ]


@lru_cache(maxsize=64)
def describe(endpoint_url: str, offer: Offer) -> bytes:
    """The description serialised as `offer`; cached, as it changes only with the endpoint's URL."""
    rdf_format = cast(pyoxigraph.RdfFormat, offer.format)
    return cast(bytes, pyoxigraph.serialize(description_triples(endpoint_url), format=rdf_format, prefixes=PREFIXES))


def describe_output(url: str, accept: str | None) -> Output:
    """The service description of the endpoint at `url`, in the format `accept` prefers."""
    offer = require(accept, GRAPH, "the service description")
    iri = valid_iri(url)
    if iri is None:
        raise BadRequest("the request's Host and path do not make a valid IRI for the endpoint; fix the Host header.")
    return Output(offer.content_type, describe(iri, offer))


@lru_cache(maxsize=64)
def valid_iri(url: str) -> str | None:
    try:
        pyoxigraph.NamedNode(url)
    except ValueError:
        return None
    return url
