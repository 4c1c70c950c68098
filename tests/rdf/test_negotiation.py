"""Accept negotiation (RFC 9110, section 12.5.1) as a table: the most specific matching range decides."""
from __future__ import annotations

import pytest

from semreg.rdf.negotiation import MAX_CACHED_HEADER, negotiate, parse_accept

RDF = ("text/turtle", "application/n-triples", "application/rdf+xml", "application/ld+json")
RESULTS = ("application/sparql-results+json", "text/csv", "text/tab-separated-values", "application/json")


@pytest.mark.parametrize(("accept", "offers", "chosen"), [
    # no preference: the first offer
    (None, RDF, "text/turtle"),
    ("", RDF, "text/turtle"),
    ("  ", RDF, "text/turtle"),
    ("*/*", RDF, "text/turtle"),
    (None, (), None),
    # q-values order the offers; equal q keeps the route's order
    ("application/rdf+xml;q=0.9, text/turtle;q=0.1", RDF, "application/rdf+xml"),
    ("application/ld+json, application/rdf+xml", RDF, "application/rdf+xml"),
    ("text/csv;q=0.5, text/tab-separated-values", RESULTS, "text/tab-separated-values"),
    ("text/csv;q=0.5, text/tab-separated-values;q=0.4", RESULTS, "text/csv"),
    ("application/*", RDF, "application/n-triples"),
    ("text/*", RESULTS, "text/csv"),
    # the most specific range decides an offer's quality, whatever the order of the ranges
    ("*/*;q=0.1, application/ld+json", RDF, "application/ld+json"),
    ("application/ld+json;q=0.2, application/*;q=0.9", RDF, "application/n-triples"),
    ("text/*;q=0.9, text/csv;q=0", RESULTS, "text/tab-separated-values"),
    ("text/csv;q=0, text/*;q=0.9", RESULTS, "text/tab-separated-values"),
    ("*/*, text/turtle;q=0", RDF, "application/n-triples"),
    ("application/*;q=0.5, */*;q=0.8", RDF, "text/turtle"),
    # equal quality: the more specific match wins over the route's order
    ("application/json, */*;q=1", RESULTS, "application/json"),
    ("*/*;q=0.5, application/ld+json;q=0.5", RDF, "application/ld+json"),
    # case, parameters, whitespace
    ("APPLICATION/RDF+XML", RDF, "application/rdf+xml"),
    ("text/turtle;charset=utf-8;q=0.2, application/rdf+xml;q=0.3", RDF, "application/rdf+xml"),
    (" application/n-triples ; q = 0.7 ,text/turtle;q=0.6", RDF, "application/n-triples"),
    # malformed ranges and q-values are skipped, not fatal
    ("garbage, text/turtle;q=abc, application/n-triples", RDF, "application/n-triples"),
    ("text/turtle;q=2, application/ld+json", RDF, "application/ld+json"),
    ("text/turtle;q=-1, application/ld+json", RDF, "application/ld+json"),
    ("*/turtle, application/ld+json;q=0.5", RDF, "application/ld+json"),
    # nothing acceptable
    ("image/png", RDF, None),
    ("*/*;q=0", RDF, None),
    ("text/turtle;q=0", RDF, None),
    ("garbage", RDF, None),
    ("text/html, application/xhtml+xml", RESULTS, None),
])
def test_negotiate(accept, offers, chosen):
    assert negotiate(accept, offers) == chosen


def test_long_headers_are_negotiated_without_the_cache():
    accept = "text/html;q=0.1, " * (MAX_CACHED_HEADER // 10) + "application/ld+json"
    assert len(accept) > MAX_CACHED_HEADER
    assert negotiate(accept, RDF) == "application/ld+json"


def test_parse_accept_skips_malformed_ranges():
    assert [(r.type, r.subtype, r.q) for r in parse_accept("a, */x, text/csv;q=2, text/tsv ; q=0.5 ,*/*")] == [
        ("text", "tsv", 0.5), ("*", "*", 1.0)]


@pytest.mark.parametrize(("range_", "specificity", "matches", "misses"), [
    ("*/*", 0, "text/turtle", None),
    ("text/*", 1, "text/turtle", "application/ld+json"),
    ("text/turtle", 2, "text/turtle", "text/csv"),
])
def test_media_ranges(range_, specificity, matches, misses):
    [parsed] = parse_accept(range_)
    assert parsed.specificity == specificity and parsed.matches(matches)
    assert misses is None or not parsed.matches(misses)
