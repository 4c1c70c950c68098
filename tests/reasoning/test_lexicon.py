"""Terms no uploaded ontology knows: warned about, with the known terms close to them, or refused."""
from __future__ import annotations

import pytest
from support.paths import ONTOLOGIES

from semreg.reasoning.lexicon import MAX_WARNINGS, Lexicon, TermWarning

EX = "http://example.org/obras#"
SCHEMA = "https://schema.org/"
LEXICON = Lexicon({"obras": frozenset({EX + "Obra", EX + "Livro", EX + "Filme", EX + "temUmGenero", EX + "Terror"}),
                   "schema": frozenset({SCHEMA + "Person", SCHEMA + "Book"})})


@pytest.mark.parametrize("iri, known", [
    (EX + "Livro", True), ("http://www.w3.org/2002/07/owl#Thing", True), ("https://w3id.org/semreg#Any", True),
    ("http://www.w3.org/2000/01/rdf-schema#label", True), (EX + "Livr", False), ("https://w3id.org/semreg#Else", False),
])
def test_what_is_known(iri, known):
    assert LEXICON.knows(iri) is known


@pytest.mark.parametrize("iri, suggestions", [
    (EX + "Livr", [EX + "Livro"]),                      # a letter short
    (EX + "Obar", [EX + "Obra"]),                       # two swapped
    (EX + "livro", [EX + "Livro"]),                     # the case
    (EX + "temUmGenro", [EX + "temUmGenero"]),
    (EX + "Person", [SCHEMA + "Person"]),               # nothing close here; the same name elsewhere
    ("http://schema.org/Book", [SCHEMA + "Book"]),      # the http namespace of an https vocabulary
    (EX + "Quadro", []),                                # nothing close anywhere
])
def test_suggestions(iri, suggestions):
    assert list(LEXICON.suggest(iri)) == suggestions


def test_one_warning_per_unknown_term_at_its_first_field():
    found = LEXICON.check([("tags[0]", EX + "Livr"), ("tags[0]", EX + "Terror"), ("tags[3]", EX + "Livr"),
                           ("tags[4]", EX + "Quadro")])
    assert found == [TermWarning("tags[0]", EX + "Livr", (EX + "Livro",)), TermWarning("tags[4]", EX + "Quadro")]
    many = LEXICON.check((f"tags[{n}]", f"{EX}X{n}") for n in range(1000))
    assert len(many) == MAX_WARNINGS and many[-1].field == f"tags[{MAX_WARNINGS - 1}]"


def test_messages_name_the_term_as_written_and_as_an_iri():
    def compact(iri: str) -> str:
        return iri.replace(EX, "ex:")

    warning = TermWarning("s", EX + "Obar", (EX + "Obra",))
    assert warning.message(compact) == (f"s: ex:Obar ({EX}Obar) is not a term of any uploaded ontology, so it matches "
                                        f"only itself; did you mean ex:Obra?")
    assert TermWarning("p", "http://x/y", ("http://x/z", "http://x/w")).message(compact).endswith(
        "; did you mean http://x/z or http://x/w?")
    assert TermWarning("o", "http://x/y").message(compact).endswith("matches only itself.")


# -- over HTTP -----------------------------------------------------------------------------------------
def upload_obras(c):
    r = c.put("/v1/ontologies/obras", content=(ONTOLOGIES / "obras.ttl").read_bytes(),
              headers={"Content-Type": "text/turtle"})
    assert r.status_code in (200, 201), r.text


BODY = {"service": "livros", "address": "127.0.0.1", "port": 9001, "ttl": 0}
QUERY = {"s": "ex:Obar", "p": "ex:temUmGenero", "o": "ex:Terror"}


def test_a_misspelt_term_registers_and_discovers_with_a_warning(in_process):
    c = in_process().client()
    upload_obras(c)
    r = c.put("/v1/instances/livros", json={**BODY, "tags": ["ex:Obra a ex:Livro", "ex:Livr ex:temUmGenero ex:Terror"]})
    assert r.status_code == 201
    [warning] = r.json()["warnings"]
    assert warning == {"field": "tags[1]", "term": EX + "Livr", "suggestions": [EX + "Livro"], "message": (
        f"tags[1]: ex:Livr ({EX}Livr) is not a term of any uploaded ontology, so it matches only itself; did you "
        f"mean ex:Livro?")}
    assert "warnings" not in c.get("/v1/instances/livros").json(), "a warning is about a request, not the instance"

    for _ in range(2):  # the second time by the short path's known queries
        found = c.get("/v1/discover", params=QUERY)
        assert found.status_code == 200 and found.json()["instances"] == []
        assert [(w["field"], w["term"], w["suggestions"]) for w in found.json()["warnings"]] == [
            ("s", EX + "Obar", [EX + "Obra"])]
    blocking = c.get("/v1/discover", params={**QUERY, "index": "1", "wait": "1s"})
    assert blocking.json()["warnings"] == found.json()["warnings"]
    routed = c.get("/v1/route", params=QUERY)
    assert routed.status_code == 503 and routed.json()["warnings"] == found.json()["warnings"]
    assert c.get("/v1/expand", params=QUERY).json()["warnings"] == found.json()["warnings"]
    peers = c.post("/v1/discover/tags", json={"tags": ["ex:Livr ex:temUmGenero ex:Terror"]}).json()
    assert [w["field"] for w in peers["warnings"]] == ["tags[0]"]

    good = c.get("/v1/discover", params={"s": "ex:Obra", "p": "ex:temUmGenero", "o": "ex:Terror"}).json()
    assert "warnings" not in good


def test_batch_warnings_name_the_instance(in_process):
    c = in_process().client()
    upload_obras(c)
    r = c.post("/v1/instances/batch", json={"instances": [{**BODY, "id": "a", "tags": ["ex:Livro"]},
                                                          {**BODY, "id": "b", "tags": ["ex:Livro", "ex:Filmes"]}]})
    assert r.status_code == 200 and r.json()["registered"] == 2
    assert [(w["field"], w["suggestions"]) for w in r.json()["warnings"]] == [("instances[1].tags[1]", [EX + "Filme"])]


def test_an_upload_that_defines_the_term_ends_the_warning(in_process):
    c = in_process().client()
    upload_obras(c)
    assert c.get("/v1/discover", params={"s": "ex:Quadro"}).json()["warnings"][0]["suggestions"] == []
    more = b"@prefix ex: <http://example.org/obras#> . ex:Quadro <http://www.w3.org/2000/01/rdf-schema#subClassOf> ex:Obra ."
    assert c.put("/v1/ontologies/quadros", content=more, headers={"Content-Type": "text/turtle"}).status_code == 201
    assert "warnings" not in c.get("/v1/discover", params={"s": "ex:Quadro"}).json()
    assert c.delete("/v1/ontologies/quadros").status_code == 204
    assert c.get("/v1/discover", params={"s": "ex:Quadro"}).json()["warnings"][0]["term"] == EX + "Quadro"


def test_strict_terms_refuse_them(in_process):
    c = in_process(strict_terms=True).client()
    upload_obras(c)
    r = c.put("/v1/instances/livros", json={**BODY, "tags": ["ex:Livr ex:temUmGenero ex:Terror"]})
    assert r.status_code == 400
    assert r.json()["error"].startswith("tags[0]: ex:Livr (") and r.json()["error"].endswith(
        "did you mean ex:Livro? This registry refuses such terms (--strict-terms).")
    assert (r.json()["field"], r.json()["term"], r.json()["suggestions"]) == ("tags[0]", EX + "Livr", [EX + "Livro"])
    assert c.get("/v1/instances/livros").status_code == 404
    for path in ("/v1/discover", "/v1/discover", "/v1/route", "/v1/expand"):
        r = c.get(path, params=QUERY)
        assert r.status_code == 400 and r.json()["term"] == EX + "Obar", path
    assert c.put("/v1/instances/livros", json={**BODY, "tags": ["ex:Livro ex:temUmGenero ex:Terror"]}).status_code == 201
    assert [i["id"] for i in c.get("/v1/discover", params={**QUERY, "s": "ex:Obra"}).json()["instances"]] == ["livros"]
