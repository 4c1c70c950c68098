"""The one RDF media-type table, as the server, the client and the CLI read it."""
from __future__ import annotations

from pathlib import Path

import httpx
import pyoxigraph as ox
import pytest
from support.paths import DATA

from semreg.client.calls import rdf_content_type
from semreg.client.errors import SemregClientError
from semreg.rdf import media, parsing


@pytest.mark.parametrize(("path", "media_type"), [
    ("obras.ttl", "text/turtle"),
    ("foaf-0.99.n3", "text/n3"),
    ("dbpedia.OWL", "application/rdf+xml"),
    ("x.rdf", "application/rdf+xml"),
    ("x.xml", "application/rdf+xml"),
    ("x.jsonld", "application/ld+json"),
    ("x.json", "application/ld+json"),
    ("dir.d/x.nt", "application/n-triples"),
    ("notes.txt", None),
    ("no-suffix", None),
])
def test_file_suffixes(path, media_type):
    assert media.of_file(path) == media.of_file(Path(path)) == media_type
    if media_type is not None:
        assert rdf_content_type(Path(path), None) == media_type  # what the client (and so the CLI) sends


@pytest.mark.parametrize(("media_type", "fmt"), [
    ("text/turtle", ox.RdfFormat.TURTLE),
    ("application/x-turtle", ox.RdfFormat.TURTLE),
    ("text/n3", ox.RdfFormat.TURTLE),
    ("application/rdf+xml", ox.RdfFormat.RDF_XML),
    ("application/xml", ox.RdfFormat.RDF_XML),
    ("application/ld+json", ox.RdfFormat.JSON_LD),
    ("application/n-triples", ox.RdfFormat.N_TRIPLES),
    ("text/plain", ox.RdfFormat.N_TRIPLES),
])
def test_what_the_server_parses_each_media_type_as(media_type, fmt):
    assert parsing.PARSE_FORMATS[media_type] == fmt
    assert parsing.media_type_of(media_type.upper() + "; charset=utf-8") == media_type


def test_every_file_suffix_is_a_media_type_the_server_reads():
    assert set(media.FILE_SUFFIXES.values()) <= set(parsing.PARSE_FORMATS)


def test_serve_preloads_an_n3_file_as_text_n3(start_server):
    server = start_server("--ontology", str(DATA / "ontologies" / "foaf-0.99.n3"), data_dir=None)
    [foaf] = httpx.get(server.url + "/v1/ontologies").json()
    assert (foaf["name"], foaf["media_type"], foaf["triples"]) == ("foaf-0.99", "text/n3", 631)


@pytest.mark.parametrize("name", ["foaf-0.99.n3", "goodrelations-2011-10-01.n3", "sosa-2017-04-17.n3"])
def test_the_shared_n3_vocabularies_parse_as_text_n3(name):
    parsed = parsing.parse((DATA / "ontologies" / name).read_bytes(), media.of_file(name))
    assert parsed.media_type == "text/n3" and len(parsed.triples) > 300


def test_client_content_types():
    assert rdf_content_type(Path("x.n3"), "text/turtle") == "text/turtle"  # as given wins
    assert rdf_content_type(b"<a> <b> <c> .", None) == "text/turtle"
    with pytest.raises(SemregClientError, match="cannot tell the RDF format of 'notes.txt'"):
        rdf_content_type(Path("notes.txt"), None)


def test_an_ontology_asked_for_as_text_n3_comes_as_turtle(app_server):
    c = app_server.client()
    foaf = (DATA / "ontologies" / "foaf-0.99.n3").read_bytes()
    assert c.put("/v1/ontologies/foaf-n3", content=foaf, headers={"Content-Type": "text/n3"}).status_code in (200, 201)
    r = c.get("/v1/ontologies/foaf-n3", headers={"Accept": "text/n3"})
    assert r.status_code == 200 and r.headers["content-type"] == "text/n3; charset=utf-8"
    assert len(list(ox.parse(r.content, format=ox.RdfFormat.TURTLE))) == 631  # the syntax is Turtle's (N3's subset)
    turtle = c.get("/v1/ontologies/foaf-n3", headers={"Accept": "text/n3;q=0.5, text/turtle"})
    assert turtle.headers["content-type"] == "text/turtle; charset=utf-8"
    assert c.get("/v1/ontologies/foaf-n3", headers={"Accept": "*/*"}).headers["content-type"].startswith("text/turtle")
    assert c.delete("/v1/ontologies/foaf-n3").status_code == 204
