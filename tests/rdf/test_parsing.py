"""Ontology documents: which representation a GET answers with, by Accept; and whatever bytes an upload holds,
in any media type it may be sent as, a parse or a 400."""
from __future__ import annotations

import pyoxigraph as ox
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semreg.errors import BadRequest, NotAcceptable
from semreg.rdf.parsing import choose_representation, parse


@pytest.mark.parametrize(("accept", "media", "fmt"), [
    (None, "text/turtle", ox.RdfFormat.TURTLE),
    ("", "text/turtle", ox.RdfFormat.TURTLE),
    ("*/*", "text/turtle", ox.RdfFormat.TURTLE),
    ("application/n-triples", "application/n-triples", ox.RdfFormat.N_TRIPLES),
    ("application/*", "application/n-triples", ox.RdfFormat.N_TRIPLES),
    ("application/rdf+xml;q=0.9, text/turtle;q=0.1", "application/rdf+xml", ox.RdfFormat.RDF_XML),
    ("*/*, text/turtle;q=0", "application/n-triples", ox.RdfFormat.N_TRIPLES),
    ("application/*;q=0.9, application/ld+json;q=1", "application/ld+json", ox.RdfFormat.JSON_LD),
    ("application/ld+json;q=0.2, application/*;q=0.9", "application/n-triples", ox.RdfFormat.N_TRIPLES),
    ("text/html, */*;q=0.1", "text/turtle", ox.RdfFormat.TURTLE),
])
def test_representation_by_accept(accept, media, fmt):
    assert choose_representation(accept) == (media, fmt)


@pytest.mark.parametrize("accept", ["image/png", "text/turtle;q=0", "*/*;q=0", "application/json",
                                    "text/n3;q=0, text/turtle;q=0"])
def test_nothing_acceptable_is_a_406_naming_the_offers(accept):
    with pytest.raises(NotAcceptable) as caught:
        choose_representation(accept)
    assert caught.value.message == (f"none of '{accept}' is offered; ask for one of text/turtle, application/n-triples, "
                                    f"application/rdf+xml, application/ld+json, text/n3.")


def test_text_n3_is_answered_with_turtle_under_its_name():
    assert choose_representation("text/n3") == ("text/n3", ox.RdfFormat.TURTLE)


# -- any bytes: a Parsed or a 400 -----------------------------------------------------------------------
SEEDS = {
    "text/turtle": b'@prefix ex: <http://e.example/> .\nex:a ex:b "c"@en ; ex:d [ ex:e ( 1 2.0 true ) ] .\n',
    "application/rdf+xml": b'<?xml version="1.0"?><!DOCTYPE rdf:RDF [<!ENTITY e "http://e.example/">]><rdf:RDF '
                           b'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ex="http://e.example/">'
                           b'<rdf:Description rdf:about="&e;a"><ex:b>c</ex:b></rdf:Description></rdf:RDF>',
    "application/ld+json": b'{"@context": {"ex": "http://e.example/"}, "@id": "ex:a", "ex:b": [{"@value": "c"}, '
                           b'{"@id": "ex:d"}]}',
    "application/n-triples": b'<http://e.example/a> <http://e.example/b> "c" .\n',
}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(SEEDS)), st.data())
def test_any_bytes_in_any_media_type_parse_or_are_a_400(media, data):
    body = bytearray(SEEDS[media])
    for _ in range(data.draw(st.integers(1, 6))):
        at = data.draw(st.integers(0, len(body)))
        how = data.draw(st.sampled_from(["set", "insert", "delete", "repeat"]))
        piece = data.draw(st.sampled_from([b"<", b">", b'"', b"\\", b"{", b"}", b"[", b"(", b"&", b";", b"\n",
                                           b"\x00", b"\xff", b"\xc3", b"<!ENTITY x \"&e;&e;\">", b"]]>", b"@"]))
        if how == "set" and body:
            body[min(at, len(body) - 1)] = data.draw(st.integers(0, 255))
        elif how == "insert":
            body[at:at] = piece
        elif how == "delete":
            del body[at:at + data.draw(st.integers(1, 8))]
        else:
            body[at:at] = bytes(body[at:at + 40]) * data.draw(st.integers(2, 50))
    try:
        parsed = parse(bytes(body), media)
    except BadRequest as exc:
        assert exc.message.strip(), exc
    else:
        assert parsed.triples and parsed.media_type == media
