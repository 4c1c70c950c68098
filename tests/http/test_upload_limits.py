"""An ontology upload in any accepted media type is parsed in bounded memory and time, and whatever it holds is a
2xx or a 400 naming what is wrong, never a 500 (docs/how-to/tokens-and-tls.md, Security): a term longer than the RDF parsers read
(16 MiB, which every other part of the node parses again: the SPARQL replica, the data directory, a backup),
an RDF/XML document whose entities expand it many times over, or whose elements nest deeper than the limit."""
from __future__ import annotations

import time

import pytest
from support.inprocess import InProcess

MiB = 1 << 20
BIG = "x" * (17 * MiB)
RDF_XML = ('<?xml version="1.0"?>{doctype}<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
           'xmlns:p="http://a.example/">{body}</rdf:RDF>')
LONG_TERM = {
    "text/turtle": f'<http://a.example/s> <http://a.example/p> "{BIG}" .\n',
    "text/n3": f'<http://a.example/s> <http://a.example/p> "{BIG}" .\n',
    "application/n-triples": f'<http://a.example/s> <http://a.example/p> "{BIG}" .\n',
    "application/ld+json": '{"@id": "http://a.example/s", "http://a.example/p": "' + BIG + '"}',
    "application/rdf+xml": RDF_XML.format(doctype="", body=f'<rdf:Description rdf:about="http://a.example/s"><p:x>{BIG}'
                                          '</p:x></rdf:Description>'),
    # short enough for the Turtle parser, but its quotes escaped (as N-Triples writes them) it is not
    "text/turtle; quotes": '<http://a.example/s> <http://a.example/p> """' + '"a' * (6 * MiB) + 'b""" .\n',
    "application/rdf+xml; an IRI": RDF_XML.format(doctype="", body=f'<rdf:Description rdf:about="http://a.example/{BIG}">'
                                                  '<p:x>y</p:x></rdf:Description>'),
}


def laughs(levels: int) -> str:
    """The billion laughs: each entity ten of the one before; `levels` of them expand a word 10**levels times."""
    entities = '<!ENTITY e0 "lol">' + "".join(f'<!ENTITY e{k} "{f"&e{k - 1};" * 10}">' for k in range(1, levels + 1))
    return RDF_XML.format(doctype=f"<!DOCTYPE rdf:RDF [{entities}]>",
                          body=f'<rdf:Description rdf:about="http://a.example/s"><p:x>&e{levels};</p:x></rdf:Description>')


def nested(depth: int) -> str:
    """A description nested `depth` levels deep (pyoxigraph's RDF/XML parser takes time quadratic in depth)."""
    return RDF_XML.format(doctype="", body='<rdf:Description rdf:about="http://a.example/s">'
                          + "<p:x><rdf:Description>" * depth + "<p:y>z</p:y>" + "</rdf:Description></p:x>" * depth
                          + "</rdf:Description>")


@pytest.fixture(scope="module")
def api():
    server = InProcess()
    server.start()
    try:
        yield server.client()
    finally:
        server.stop()


def refused(api, body: str, media: str) -> dict:
    r = api.put("/v1/ontologies/o", content=body.encode(), headers={"Content-Type": media.split(";")[0]})
    assert r.status_code == 400, (r.status_code, r.text[:300])
    assert api.get("/v1/ontologies").json() == []
    return r.json()


@pytest.mark.parametrize("media", LONG_TERM)
def test_a_term_past_what_the_parsers_read_is_a_400_in_every_media_type(api, media):
    said = refused(api, LONG_TERM[media], media)
    assert "16 MiB" in said["error"] or "longer than" in said["error"], said


def test_an_rdf_xml_billion_laughs_is_refused_before_it_expands(api):
    started = time.perf_counter()
    said = refused(api, laughs(9), "application/rdf+xml")
    assert "entit" in said["error"], said
    assert time.perf_counter() - started < 30  # a bound on a hang, not a speed


def test_rdf_xml_nested_past_the_limit_is_refused_and_within_it_parses(api):
    said = refused(api, nested(100_000), "application/rdf+xml")
    assert "nest" in said["error"] and "--ontology-xml-depth" in said["error"], said
    r = api.put("/v1/ontologies/o", content=nested(40).encode(), headers={"Content-Type": "application/rdf+xml"})
    assert r.status_code == 201, r.text
    assert api.delete("/v1/ontologies/o").status_code == 204


def test_rdf_xml_entities_that_abbreviate_iris_are_read_as_ever(api):
    doc = RDF_XML.format(doctype='<!DOCTYPE rdf:RDF [<!ENTITY a "http://a.example/">]>',
                         body='<rdf:Description rdf:about="&a;s"><p:x rdf:resource="&a;o"/></rdf:Description>')
    r = api.put("/v1/ontologies/o", content=doc.encode(), headers={"Content-Type": "application/rdf+xml"})
    assert r.status_code == 201 and r.json()["triples"] == 1, r.text
    assert api.delete("/v1/ontologies/o").status_code == 204
