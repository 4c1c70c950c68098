"""Hierarchies made from a few lines of Turtle, for the reasoning tests' tables."""
from __future__ import annotations

from semreg.rdf import parsing
from semreg.reasoning.hierarchy import Hierarchy
from semreg.reasoning.reasoner import Reasoner
from semreg.reasoning.rules.triggers import OWL, RDF, RDFS

EX = "http://example.org/h#"
PREFIXES = f"@prefix : <{EX}> . @prefix rdfs: <{RDFS}> . @prefix owl: <{OWL}> . @prefix rdf: <{RDF}> .\n"


def reasoner_of(turtle: str, **options) -> Reasoner:
    reasoner = Reasoner(**options)
    reasoner.put("t", parsing.parse((PREFIXES + turtle).encode(), "text/turtle").triples)
    return reasoner


def hierarchy(turtle: str) -> Hierarchy:
    return reasoner_of(turtle).hierarchy
