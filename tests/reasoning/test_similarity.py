"""The similarity measure of the `similar` degree, on tiny hierarchies, as tables."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support.hierarchies import EX, hierarchy
from support.owlrl_reference import ontologies

from semreg.bench.dataset import Dataset
from semreg.rdf import parsing
from semreg.rdf.terms import ANY
from semreg.reasoning.reasoner import Reasoner
from semreg.reasoning.signals import SAME, signals
from semreg.reasoning.similarity import TOP_K, SimilarityIndex, index_of, known, name_words, words

ONTOLOGY = """
:Media a owl:Class . :Film rdfs:subClassOf :Media . :ComedyFilm rdfs:subClassOf :Film .
:ActionFilm rdfs:subClassOf :Film . :VideoMedia rdfs:subClassOf :Media .
:Price a owl:Class . :TaxedPrice rdfs:subClassOf :Price . :Camera a owl:Class .
:Cinema a owl:Class ; rdfs:label "picture palace" . :Kino owl:equivalentClass :Cinema .
"""


@pytest.mark.parametrize("name, expected", [
    ("ComedyFilm", ["comedy", "film"]),
    ("Science-Fiction_Book2", ["science", "fiction", "book", "2"]),
    ("HTTPServer", ["http", "server"]),
    ("lecturer-in-academia", ["lecturer", "in", "academia"]),
    ("", []),
])
def test_words_split_names_at_case_separators_and_digits(name, expected):
    assert words(name) == expected


@pytest.fixture(scope="module")
def index() -> SimilarityIndex:
    return SimilarityIndex(hierarchy(ONTOLOGY))


@pytest.mark.parametrize("query, closer, farther", [
    ("ComedyFilm", "ActionFilm", "VideoMedia"),   # siblings sharing a word, above a cousin
    ("ComedyFilm", "VideoMedia", "Price"),        # a cousin under the same root, above an unrelated class
    ("TaxedPrice", "Price", "Camera"),
    ("Price", "TaxedPrice", "Film"),
])
def test_ordering(index, query, closer, farther):
    assert index.similarity(EX + query, EX + closer) > index.similarity(EX + query, EX + farther)


@pytest.mark.parametrize("a, b, value", [
    ("Cinema", "Kino", 1.0),       # equivalent
    ("Film", "Film", 1.0),
    ("Price", "Camera", 0.0),      # no word, no ancestor in common
])
def test_values(index, a, b, value):
    assert index.similarity(EX + a, EX + b) == value


def test_values_lie_in_the_unit_interval_and_are_symmetric(index):
    terms = [EX + t for t in ("Media", "Film", "ComedyFilm", "ActionFilm", "VideoMedia", "Price", "TaxedPrice")]
    for a in terms:
        for b in terms:
            s = index.similarity(a, b)
            assert 0.0 <= s <= 1.0
            assert s == index.similarity(b, a)


def test_the_wildcard_is_close_only_to_itself(index):
    assert index.similarity(ANY, ANY) == 1.0
    assert index.similarity(ANY, EX + "Film") == 0.0


def test_nearest_keeps_the_floor_and_ranks_best_first(index):
    within = [EX + t for t in ("ActionFilm", "VideoMedia", "Price", "ComedyFilm")]
    found = index.nearest(EX + "ComedyFilm", within, 0.2)
    assert [t for t, _ in found] == [EX + "ActionFilm", EX + "VideoMedia"]
    assert all(s >= 0.2 for _, s in found)
    assert index.nearest(EX + "ComedyFilm", within, 1.0) == []


def test_explanation_names_the_shared_words_and_the_common_ancestor(index):
    why = index.explain(EX + "ComedyFilm", EX + "ActionFilm")
    assert why.shared_words[0] == "film"
    assert why.common_ancestor == EX + "Film"
    assert why.similarity == index.similarity(EX + "ComedyFilm", EX + "ActionFilm")


def test_one_index_per_hierarchy():
    h = hierarchy(ONTOLOGY)
    assert index_of(h) is index_of(h)
    assert index_of(hierarchy(ONTOLOGY)) is not index_of(h)


def brute_force(index: SimilarityIndex, term: str, within, floor: float) -> list[tuple[str, float]]:
    scored = [(t, index.similarity(term, t)) for t in within if t not in (term, ANY)]
    return sorted(((t, s) for t, s in scored if s >= floor), key=lambda x: (-x[1], x[0]))[:TOP_K]


@pytest.fixture(scope="module")
def synthetic() -> SimilarityIndex:
    """The benchmark's class DAG, small: names that share the word `c`, ancestors shared by hundreds."""
    return SimilarityIndex(hierarchy(Dataset(classes=400).turtle()))


@settings(max_examples=80, deadline=None)
@given(data=st.data(), floor=st.sampled_from([0.0, 0.05, 0.2, 0.3, 0.35, 0.5, 0.8, 1.0]))
def test_nearest_finds_what_scoring_every_term_finds(synthetic, index, data, floor):
    # the candidates come from postings (words, ancestors): never one term fewer than a full scan
    for ix in (synthetic, index):
        terms = sorted(ix.vectors())
        term = data.draw(st.sampled_from(terms + [EX + "Unnamed"]))
        within = data.draw(st.sets(st.sampled_from(terms + [ANY, EX + "NoOntologyFilm"]), max_size=len(terms) + 2))
        assert ix.nearest(term, within, floor, version=object()) == brute_force(ix, term, within, floor)


def outsider_index(ix: SimilarityIndex, within) -> dict[str, set[str]]:
    """What a catalogue keeps: the words of the names of `within`'s terms no ontology names."""
    words: dict[str, set[str]] = {}
    for t in within:
        if t != ANY and not known(ix.hierarchy, t):
            for w in name_words(t):
                words.setdefault(w, set()).add(t)
    return words


OUTSIDERS = [EX + name for name in ("NoOntologyFilm", "Widget7Service", "ComedyWidget", "FilmPrice2", "Zq")]


@settings(max_examples=80, deadline=None)
@given(data=st.data(), floor=st.sampled_from([0.0, 0.001, 0.011, 0.05, 0.2, 0.3, 0.5, 1.0]))
def test_nearest_with_the_word_index_finds_what_scoring_every_term_finds(synthetic, index, data, floor):
    # the terms no ontology names come from their names' words, not from a scan of every registered term
    for ix in (synthetic, index):
        terms = sorted(ix.vectors())
        term = data.draw(st.sampled_from(terms + OUTSIDERS))
        within = data.draw(st.sets(st.sampled_from(terms + [ANY, *OUTSIDERS]), max_size=len(terms) + 6))
        found = ix.nearest(term, within, floor, version=object(), outsiders=outsider_index(ix, within))
        assert found == brute_force(ix, term, within, floor)


def test_terms_no_ontology_names_are_not_scored_one_by_one(index):
    """The freeze of a question naming terms no ontology knows, at a floor just above 0: 1,600 registered terms
    that share no weighted word with it were each scored, for every pattern; now none is looked at."""
    within = {EX + f"Widget{i}Service" for i in range(800)} | {EX + f"Genre{i}Style" for i in range(800)}
    spent: list[int] = []
    found = index.nearest(EX + "Ask3Widget", within, 0.011, version=object(), outsiders=outsider_index(index, within),
                          spend=spent.append)
    assert found == brute_force(index, EX + "Ask3Widget", within, 0.011) == []
    assert sum(spent) == 0
    # a term sharing a weighted word with them ("film" is the ontology's word) finds exactly those
    within |= {EX + f"Film{i}Widget" for i in range(50)}
    spent.clear()
    found = index.nearest(EX + "ComedyFilm", within, 0.011, version=object(), outsiders=outsider_index(index, within),
                          spend=spent.append)
    assert {t for t, _ in found} >= {EX + f"Film{i}Widget" for i in range(50)}
    assert found == brute_force(index, EX + "ComedyFilm", within, 0.011)
    assert sum(spent) < 400  # the postings of its words and the 50 scored, not the 1,650


def test_the_work_is_reported_and_can_be_stopped(index):
    within = {EX + f"Film{i}Widget" for i in range(600)}

    class Stop(Exception):
        pass

    def spend(n: int) -> None:
        raise Stop
    with pytest.raises(Stop):
        index.nearest(EX + "ComedyFilm", within, 0.011, version=object(), outsiders=outsider_index(index, within),
                      spend=spend)


# -- the matchmaker's signals ------------------------------------------------------------------------------
@pytest.mark.parametrize("queried, registered, given_up, assumed", [
    ("Film", "ComedyFilm", 0.0, 1 / 3),     # below the query: nothing given up, its own name assumed
    ("ComedyFilm", "Film", 1 / 3, 0.0),     # above it: the query's own name given up, nothing assumed
    ("ComedyFilm", "ActionFilm", 1 / 3, 1 / 3),  # siblings: each lacks the other's name
    ("VideoMedia", "ComedyFilm", 1 / 2, 2 / 3),  # cousins: only Media in common
    ("Price", "Camera", 1.0, 1.0),          # nothing in common
    ("Cinema", "Kino", 0.0, 0.0),           # equivalent
])
def test_approximated_subsumption_is_what_either_definition_lacks(index, queried, registered, given_up, assumed):
    found = signals(index, EX + queried, EX + registered)
    assert (found.given_up, found.assumed) == pytest.approx((given_up, assumed))


def test_signals_are_the_parts_of_the_similarity(index):
    a, b = EX + "ComedyFilm", EX + "ActionFilm"
    found = signals(index, a, b)
    assert found.text == pytest.approx(index.text(a, b))
    assert found.structure == pytest.approx(index.structure(a, b)[0])
    assert signals(index, ANY, a) == signals(index, a, a) == SAME
    why = index.explain(a, b)  # and the explanation says them
    assert (why.given_up, why.assumed) == (round(found.given_up, 3), round(found.assumed, 3))
    assert {"given_up", "assumed"} <= set(why.as_json())


# -- the index after an ontology change: exactly a rebuild ------------------------------------------------
NAMES = ["Film", "ComedyFilm", "ActionFilm", "Media", "VideoMedia", "Price", "EuroPrice", "Camera", "Kino", "Cinema"]
PREFIX = f"@prefix : <{EX}> . @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> . " \
         "@prefix owl: <http://www.w3.org/2002/07/owl#> .\n"
name = st.sampled_from(NAMES)
statement = st.one_of(
    st.tuples(name, name).map(lambda t: f":{t[0]} rdfs:subClassOf :{t[1]} ."),
    st.tuples(name, name).map(lambda t: f":{t[0]} owl:equivalentClass :{t[1]} ."),
    st.tuples(name, st.sampled_from(["picture palace", "moving picture", "cost"])).map(
        lambda t: f':{t[0]} rdfs:label "{t[1]}" .'),
    name.map(lambda n: f":{n} a owl:Class ."),
)
graphs = st.lists(statement, min_size=1, max_size=8).map(lambda lines: PREFIX + "\n".join(lines))
steps = st.lists(st.tuples(st.sampled_from("ab"), st.one_of(st.none(), graphs, ontologies(terms=(5, 12))),
                           st.booleans()), min_size=1, max_size=6)


def same_index(a: SimilarityIndex, b: SimilarityIndex) -> None:
    def postings(p):
        return {k: sorted(v) for k, v in p.items()}

    assert a.vectors() == b.vectors()
    assert a._idf == b._idf
    a.prepare(), b.prepare()
    assert postings(a._words) == postings(b._words) and postings(a._below) == postings(b._below)
    assert a._depths == b._depths and a._heaviest == b._heaviest
    for t in a.vectors():
        assert a._up(t) == b._up(t)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(steps)
@example([("a", PREFIX + ":VideoMedia owl:equivalentClass :Media .", True)])  # Film's ancestor class gains a member
def test_the_index_after_a_change_is_the_rebuilt_one(changes):
    """Built from the index before a change (`similarity.follow`), the index is exactly a fresh one: vectors,
    IDF, postings, ancestor sets; also when the indexes between were never built (`asked` false)."""
    reasoner = Reasoner(reindex_share=float("inf"))
    reasoner.put("base", parsing.parse((PREFIX + ":Film rdfs:subClassOf :Media .").encode(), "text/turtle").triples)
    index_of(reasoner.hierarchy).prepare()
    for graph, text, asked in changes:
        if text is None:
            reasoner.delete(graph)
        else:
            reasoner.put(graph, parsing.parse(text.encode(), "text/turtle").triples)
        if asked:
            same_index(index_of(reasoner.hierarchy), SimilarityIndex(reasoner.hierarchy))
    same_index(index_of(reasoner.hierarchy), SimilarityIndex(reasoner.hierarchy))


def test_an_upload_starts_the_new_index_from_the_built_one():
    reasoner = Reasoner()
    reasoner.put("a", parsing.parse((PREFIX + ":ComedyFilm rdfs:subClassOf :Film .").encode(), "text/turtle").triples)
    before = index_of(reasoner.hierarchy)
    before.prepare()
    reasoner.put("b", parsing.parse((PREFIX + ":Camera a owl:Class .").encode(), "text/turtle").triples)
    after = index_of(reasoner.hierarchy)
    assert after is not before and after._basis is before
    after.prepare()
    assert after._basis is None  # the earlier index is let go once built
    assert after._docs[EX + "ComedyFilm"] is before._docs[EX + "ComedyFilm"]  # the document the change missed
    same_index(after, SimilarityIndex(reasoner.hierarchy))
