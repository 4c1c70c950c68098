"""The indexed expansion agrees with the pure matching functions, and its cache stays exact."""
from __future__ import annotations

import itertools
import random

import pyoxigraph as ox
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semreg.rdf.terms import ANY, RDF_TYPE, Tag
from semreg.reasoning.matching import DEGREES, rank_key, tag_match
from semreg.reasoning.reasoner import build_hierarchy, compute_closure
from semreg.registry.catalogue import Catalogue

EX = "http://example.org/c#"
TTL = f"""@prefix : <{EX}> . @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
:Obra rdfs:subClassOf owl:Thing . :Livro rdfs:subClassOf :Obra . :Filme rdfs:subClassOf :Obra .
:Romance rdfs:subClassOf :Livro . :Book owl:equivalentClass :Livro . :Terror rdfs:subClassOf :Genero .
:Gore rdfs:subClassOf :Terror . :temGeneroPrincipal rdfs:subPropertyOf :temUmGenero . :dracula a :Romance .
"""


@pytest.fixture(scope="module")
def hierarchy():
    ts = [ox.Triple(q.subject, q.predicate, q.object) for q in ox.parse(TTL.encode(), format=ox.RdfFormat.TURTLE)]
    return build_hierarchy(ts, compute_closure(ts).inferred)


TERMS = [EX + x for x in ("Obra", "Livro", "Filme", "Romance", "Book", "dracula", "Genero", "Terror", "Gore")] + [ANY]
PROPS = [EX + "temUmGenero", EX + "temGeneroPrincipal", RDF_TYPE, ANY]


def brute_force(tags, query, match, h):
    out = []
    for tag in tags:
        m = tag_match(tag, query, h)
        if m is not None and m[0] in match:
            out.append((tag, m[0], m[1]))
    return sorted(out, key=lambda x: rank_key(x[1], x[2], x[0]))


def random_tags(rng, n):
    return list({Tag(rng.choice(TERMS[:-1]), rng.choice(PROPS), rng.choice(TERMS)) for _ in range(n)})


def random_catalogue(hierarchy, rng, n):
    """A catalogue of `n` random tags, each carried by an instance of its own (`i0`, `i1`, ...), and the tags."""
    cat = Catalogue()
    cat.set_hierarchy(hierarchy)
    tags = random_tags(rng, n)
    for k, tag in enumerate(tags):
        cat.add(f"i{k}", [tag])
    return cat, tags


@pytest.mark.parametrize("seed", range(5))
def test_expand_agrees_with_pure_matching(hierarchy, seed):
    rng = random.Random(seed)
    cat, tags = random_catalogue(hierarchy, rng, 60)
    matches = [frozenset(c) for r in range(1, 5) for c in itertools.combinations(DEGREES, r)]
    for _ in range(80):
        query = Tag(rng.choice(TERMS), rng.choice(PROPS), rng.choice(TERMS))
        match = rng.choice(matches)
        assert cat.expand(query, match) == brute_force(tags, query, match, hierarchy), (query, match)


def test_cache_follows_tags_coming_and_going(hierarchy):
    cat = Catalogue()
    cat.set_hierarchy(hierarchy)
    query, match = Tag(EX + "Obra", EX + "temUmGenero", EX + "Genero"), frozenset({"exact", "narrower"})
    cat.add("a", [Tag(EX + "Livro", EX + "temUmGenero", EX + "Terror")])
    assert [m[0].s for m in cat.expand(query, match)] == [EX + "Livro"]
    cat.add("b", [Tag(EX + "Filme", EX + "temGeneroPrincipal", EX + "Gore")])
    assert [m[0].s for m in cat.expand(query, match)] == [EX + "Livro", EX + "Filme"]
    cat.add("c", [Tag(EX + "Filme", EX + "temGeneroPrincipal", EX + "Gore")])
    cat.remove("b", [Tag(EX + "Filme", EX + "temGeneroPrincipal", EX + "Gore")])
    assert len(cat.expand(query, match)) == 2  # c still carries it
    cat.remove("c", [Tag(EX + "Filme", EX + "temGeneroPrincipal", EX + "Gore")])
    assert [m[0].s for m in cat.expand(query, match)] == [EX + "Livro"]
    assert {t: set(ids) for t, ids in cat.holders.items()} == {Tag(EX + "Livro", EX + "temUmGenero", EX + "Terror"): {"a"}}


OPS = st.lists(st.tuples(st.booleans(), st.sampled_from("abcd"), st.lists(st.integers(0, 11), max_size=4),
                         st.integers(0, 7)), max_size=40)
POOL = [Tag(EX + s, p, o) for s in ("Livro", "Romance", "Filme") for p, o in (
    (EX + "temUmGenero", EX + "Terror"), (EX + "temGeneroPrincipal", EX + "Gore"),
    (EX + "temUmGenero", ANY), (RDF_TYPE, EX + "Obra"))]
QUESTIONS = [Tag(EX + "Obra", EX + "temUmGenero", EX + "Genero"), Tag(EX + "Romance", ANY, ANY),
             Tag(ANY, EX + "temGeneroPrincipal", ANY), Tag(EX + "Livro", EX + "temUmGenero", EX + "Gore"),
             Tag(ANY, ANY, ANY), Tag(EX + "Book", ANY, EX + "Terror"), Tag(EX + "Filme", RDF_TYPE, EX + "Livro"),
             Tag(ANY, EX + "temUmGenero", EX + "Terror")]


@given(OPS)
@settings(max_examples=200, deadline=None)
def test_holders_and_answers_are_exact_through_any_adds_and_removes(hierarchy, ops):
    """A tag's holders, a 1-tuple or a set by count, are always exactly the instances that carry it; the
    terms index holds exactly the tags someone carries; every answer, asked between the changes (so that
    components and answers are kept across them), is the pure matching functions' over the tags carried."""
    cat, model = Catalogue(), {}
    cat.set_hierarchy(hierarchy)
    degrees = frozenset(DEGREES)
    for adding, iid, picks, asked in ops:
        chosen = [POOL[k] for k in picks]
        (cat.add if adding else cat.remove)(iid, chosen)
        for tag in chosen:
            (model.setdefault(tag, set()).add if adding else model.get(tag, set()).discard)(iid)
        carried = [t for t, ids in model.items() if ids]
        question = QUESTIONS[asked]
        assert cat.expand(question, degrees) == brute_force(carried, question, degrees, hierarchy)
    model = {t: ids for t, ids in model.items() if ids}
    assert {t: set(ids) for t, ids in cat.holders.items()} == model
    assert all(len(ids) == len(set(ids)) for ids in cat.holders.values())
    assert {t: cat.holder_ids(t) for t in model} == {t: tuple(sorted(ids)) for t, ids in model.items()}
    assert set().union(*cat.by_position[2].values()) == set(model)
    by_pair: dict = {}
    for tag in model:
        by_pair.setdefault((tag.s, tag.o), set()).add(tag)
    assert cat.pairs.entries() == {k: frozenset(v) for k, v in by_pair.items()}
    carried_terms = {term for tag in model for term in tag}
    for term in TERMS + PROPS:
        fresh = "".join(list(term))  # an equal string, another object
        kept = cat.shared((Tag(fresh, fresh, fresh),))[0]
        assert kept == (term, term, term)
        assert (kept.s is not fresh) == (term in carried_terms), term  # kept while a tag carries it, let go after


def test_individual_and_equivalent_terms(hierarchy):
    cat = Catalogue()
    cat.set_hierarchy(hierarchy)
    cat.add("d", [Tag(EX + "dracula")])
    cat.add("b", [Tag(EX + "Book")])
    got = {m[0].s: (m[1], m[2]) for m in cat.expand(Tag(EX + "Livro"), frozenset({"exact", "narrower"}))}
    assert got == {EX + "Book": ("exact", 0), EX + "dracula": ("narrower", 2)}


def copy(text: str) -> str:
    return "".join(list(text))


def test_registrations_share_the_strings_of_their_terms(hierarchy):
    """Equal tags of two instances, parsed separately, end up made of one set of string objects; a term's
    string is kept while some tag carries it at any position, and a tag made of it is equal to the one given."""
    cat = Catalogue()
    cat.set_hierarchy(hierarchy)
    first = Tag(copy(EX + "Livro"), copy(EX + "temUmGenero"), copy(EX + "Terror"))
    cat.add("a", cat.shared((first,)))
    assert cat.shared((first,))[0] is first  # a tag already made of the kept strings is itself
    held = (first, first)
    assert cat.shared(held) is held  # and tags all made of them are the very tuple given
    second = cat.shared((Tag(copy(EX + "Terror"), copy(EX + "temUmGenero"), copy(EX + "Livro")),))[0]
    assert second == Tag(EX + "Terror", EX + "temUmGenero", EX + "Livro")
    assert second.s is first.o and second.p is first.p and second.o is first.s
    cat.add("b", [second])
    cat.remove("a", [first])  # Livro and Terror still carried by b, at other positions
    third = cat.shared((Tag(copy(EX + "Livro"), copy(EX + "temUmGenero"), copy(EX + "Terror")),))[0]
    assert third.s is first.s and third.o is first.o
    cat.remove("b", [second])
    fourth = Tag(copy(EX + "Livro"), ANY, ANY)
    assert cat.shared((fourth,))[0].s is fourth.s  # nothing carries Livro any more: its string was let go


@pytest.mark.parametrize("seed", range(5))
def test_both_ways_of_finding_a_questions_tags_agree(hierarchy, seed):
    """By (subject, object) pairs or by walking the tags under the narrowest component: the same tags, for
    every question naming a subject and an object, whichever the catalogue would choose."""
    rng = random.Random(seed)
    cat, tags = random_catalogue(hierarchy, rng, 80)
    for n in range(0, len(tags), 3):  # some go again, so that the index has emptied entries behind it
        cat.remove(f"i{n}", [tags[n]])
    for _ in range(60):
        query = Tag(rng.choice(TERMS[:-1]), rng.choice(PROPS), rng.choice(TERMS[:-1]))
        narrower, broader = rng.choice([(True, False), (False, True), (True, True)])
        components = [None if q == ANY else cat._component(pos, q, narrower, broader) for pos, q in enumerate(query)]
        present = [(pos, c) for pos, c in enumerate(components) if c is not None]
        for pos, component in present:
            by_terms = set(cat._walked_terms(present, pos, component))
            assert set(cat._walked_pairs(*components)) == by_terms, (query, pos)
            assert by_terms == {t for t in cat.holders
                                if all(t[p] in c for p, c in present)}, (query, pos)
