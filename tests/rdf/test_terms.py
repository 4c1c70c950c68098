"""Terms and prefixes: the conventional prefixes of common vocabularies, known when an upload uses them."""
from __future__ import annotations

import pytest

from semreg.rdf.terms import conventional_prefixes, split_iri

DBO = "http://dbpedia.org/ontology/"


@pytest.mark.parametrize("iris, declared, known", [
    ([DBO + "Person", DBO + "Person/height"], {}, {"dbo": DBO}),
    ([DBO + "Person"], {"d": DBO}, {}),                                 # the file has its own prefix for it
    ([DBO + "Person"], {"dbo": "http://elsewhere/"}, {}),               # and its own meaning for the name
    (["https://schema.org/Person"], {}, {"schema": "https://schema.org/"}),
    (["http://schema.org/Person"], {}, {"schema": "http://schema.org/"}),
    (["http://xmlns.com/foaf/0.1/Person", "http://purl.org/goodrelations/v1#Offering",
      "http://www.w3.org/2004/02/skos/core#Concept"], {"foaf": "http://xmlns.com/foaf/0.1/"},
     {"gr": "http://purl.org/goodrelations/v1#", "skos": "http://www.w3.org/2004/02/skos/core#"}),
    (["http://example.org/obras#Livro"], {}, {}),
])
def test_conventional_prefixes(iris, declared, known):
    assert conventional_prefixes(iris, declared) == known


@pytest.mark.parametrize("iri, parts", [
    ("http://example.org/obras#Livro", ("http://example.org/obras#", "Livro")),
    (DBO + "Person/height", (DBO + "Person/", "height")), ("urn:isbn:123", ("urn:isbn:", "123")),
])
def test_split_iri(iri, parts):
    assert split_iri(iri) == parts
