"""Ontology documents: which representation a GET answers with, by Accept."""
from __future__ import annotations

import pyoxigraph as ox
import pytest

from semreg.errors import NotAcceptable
from semreg.rdf.parsing import choose_representation


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
