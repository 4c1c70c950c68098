"""Conjunctive discovery in the domain: the combination of per-pattern matches, the `provided` rule, a shard's
part, and the merge of parts (any partition of the instances, over the wire or not, answers as one shard)."""
from __future__ import annotations

import random

import orjson
import pyoxigraph as ox
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semreg.clock import FakeClock
from semreg.cluster import wire
from semreg.rdf.terms import ANY, Tag
from semreg.reasoning.matching import BY_SCORE, DEFAULT_MATCH, DEGREES, RANK, SIMILAR, tag_match
from semreg.reasoning.reasoner import build_hierarchy, compute_closure
from semreg.registry import conjunctive, discovery
from semreg.registry.conjunctive import Combined, ConjunctiveQuery, combine, covered
from semreg.registry.instances import Registration
from semreg.registry.registry import Change, Registry
from semreg.registry.selector import parse_selector

EX = "http://ex.org/"
ONTOLOGY = f"""@prefix : <{EX}> . @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
:Livro rdfs:subClassOf :Obra . :Filme rdfs:subClassOf :Obra . :Romance rdfs:subClassOf :Livro .
:temGenero rdfs:subPropertyOf :temAtributo . :Novela rdfs:subClassOf :Romance .
:input rdfs:subPropertyOf :needs . :config rdfs:subPropertyOf :needs ."""
TERMS = [EX + t for t in ("Obra", "Livro", "Filme", "Romance", "Novela")]
PROPS = [EX + "temGenero", EX + "temAtributo", EX + "input", ANY]


def t(s, p=ANY, o=ANY) -> Tag:
    return Tag(*(x if x == ANY else EX + x for x in (s, p, o)))


@pytest.fixture(scope="module")
def hierarchy():
    triples = [ox.Triple(q.subject, q.predicate, q.object) for q in ox.parse(ONTOLOGY.encode(), format=ox.RdfFormat.TURTLE)]
    return build_hierarchy(triples, compute_closure(triples).inferred)


def registry(hierarchy, regs, revisions=None):
    r = Registry(FakeClock())
    r.catalogue.set_hierarchy(hierarchy)
    r.put_many(regs, revisions)
    return r


def reg(iid, *tags, service="svc", environment="default", meta=None):
    return Registration(id=iid, service=service, address="10.0.0.1", port=80, ttl_s=0.0, tags=tuple(tags),
                        environment=environment, meta=meta or {})


def resolve(q, *registries):
    return conjunctive.merge(q, [conjunctive.part(r.catalogue, r.instances, q) for r in registries])


def ranked(result):
    return [(i.id, m.degree, m.distance) for i, m in result.ranked]


# -- the combination, and the provided rule: tables ------------------------------------------------
A, B, C = t("Livro"), t("Filme"), t("Obra")


@pytest.mark.parametrize("matches, expected", [
    ([(A, "exact", 0)], Combined(A, "exact", 0, ((A, "exact", 0),))),
    ([(A, "narrower", 1), (B, "exact", 0)], Combined(A, "narrower", 1, ((A, "narrower", 1), (B, "exact", 0)))),
    ([(A, "narrower", 2), (B, "broader", 1), (C, "narrower", 3)],
     Combined(B, "broader", 6, ((A, "narrower", 2), (B, "broader", 1), (C, "narrower", 3)))),
    # the same degree: the larger distance is the worst, and between equals the first pattern's
    ([(A, "narrower", 1), (B, "narrower", 2)], Combined(B, "narrower", 3, ((A, "narrower", 1), (B, "narrower", 2)))),
    ([(A, "overlap", 1), (B, "overlap", 1)], Combined(A, "overlap", 2, ((A, "overlap", 1), (B, "overlap", 1)))),
])
def test_a_conjunction_is_its_worst_degree_and_its_summed_distance(matches, expected):
    assert combine(matches) == expected


@pytest.mark.parametrize("matches, similarities, provided, expected", [
    # a similar match's distance holds its similarity: it adds nothing to the sum; the similarity is the mean
    ([(A, "similar", 300), (B, "narrower", 2)], [0.7, 0.9], None,
     Combined(A, "similar", 2, ((A, "similar", 300), (B, "narrower", 2)), 0.8, None)),
    ([(A, "exact", 0), (B, "similar", 600)], [1.0, 0.4], 0.5,
     Combined(B, "similar", 0, ((A, "exact", 0), (B, "similar", 600)), 0.7, 0.5)),
    ([(A, "narrower", 1)], [0.55], 1.0, Combined(A, "narrower", 1, ((A, "narrower", 1),), 0.55, 1.0)),
])
def test_with_similar_a_conjunction_carries_its_closeness(matches, similarities, provided, expected):
    found = combine(matches, similarities, provided)
    assert found == expected
    assert found.closeness == (expected.similarity if provided is None else round((expected.similarity + provided) / 2, 3))


def test_similar_ranks_after_overlap_and_closeness_before_distance():
    overlap = Combined(A, "overlap", 9, ((A, "overlap", 9),), 0.1, None)
    near = Combined(B, "narrower", 3, ((B, "narrower", 3),), 0.9, None)
    far = Combined(A, "narrower", 1, ((A, "narrower", 1),), 0.5, None)
    similar = Combined(C, "similar", 0, ((C, "similar", 50),), 0.95, None)
    assert sorted([similar, far, overlap, near], key=conjunctive.rank) == [near, far, overlap, similar]
    plain = [Combined(A, "narrower", 2, ((A, "narrower", 2),)), Combined(B, "narrower", 1, ((B, "narrower", 1),))]
    assert sorted(plain, key=conjunctive.rank) == plain[::-1]  # without similar: distance, as the contract ranks


@pytest.mark.parametrize("tags, provided, ok", [
    # what it needs on a provided predicate, equal or broader than one provided: covered
    ([t("Livro", "input")], [t("Livro", "input")], True),
    ([t("Livro", "input")], [t("Romance", "input")], True),  # the caller's Romance is a Livro
    ([t("Romance", "input")], [t("Livro", "input")], False),  # a Livro is not always a Romance
    ([t("Livro", "input"), t("Filme", "input")], [t("Livro", "input")], False),  # each needed tag covered
    ([t("Livro", "input"), t("Filme", "input")], [t("Novela", "input"), t("Filme", "input")], True),
    # a sub-property of a provided tag's predicate is needed too; a super-property is not
    ([t("Livro", "input")], [t("Livro", "needs")], False),  # needed (input ⊑ needs), and input is not broader
    ([t("Livro", "needs")], [t("Livro", "input")], True),  # needs is above input: not what provided stands for
    ([t("Livro", "input", "Obra")], [t("Livro", "input")], False),  # the caller's wildcard is no more specific
    ([t("Livro", "input")], [t("Livro", "input", "Filme")], True),  # the instance's wildcard accepts anything
    # tags on other predicates are not provided's business; no tags at all: nothing needed
    ([t("Livro", "temGenero", "Filme"), t("Obra")], [t("Livro", "input")], True),
    ([], [t("Livro", "input")], True),
])
def test_provided_covers_each_needed_tag_with_one_equal_or_narrower(hierarchy, tags, provided, ok):
    assert covered(tags, provided, hierarchy) is ok


# -- a shard's part and the merge ------------------------------------------------------------------
CASE = [reg("livros", t("Livro", "temGenero", "Obra"), t("Obra", "input", "Livro")),
        reg("filmes", t("Filme", "temGenero", "Obra"), t("Obra", "input", "Filme")),
        reg("romances", t("Romance", "temGenero", "Obra"), t("Romance", "temAtributo", "Obra"),
            t("Obra", "input", "Novela")),
        reg("obras", t("Obra", "temAtributo", "Obra")),
        reg("todos", t("Novela", "temGenero", "Obra"), t("Obra", "input", "Livro"), t("Obra", "input", "Filme"))]
HORROR = t("Obra", "temGenero", "Obra")
NEEDS = t("Obra", "input", "Obra")


def test_every_pattern_must_match_and_the_worst_ranks(hierarchy):
    r = registry(hierarchy, CASE)
    q = ConjunctiveQuery((HORROR, NEEDS), DEFAULT_MATCH)
    # todos: Novela is 3 steps below Obra, and of its two input tags the first by text (Filme) is 1 step
    assert ranked(resolve(q, r)) == [("filmes", "narrower", 2), ("livros", "narrower", 2),
                                     ("todos", "narrower", 4), ("romances", "narrower", 5)]
    [m] = [m for i, m in resolve(q, r).ranked if i.id == "romances"]
    # its temAtributo tag overlaps the first pattern, which the default match leaves out
    assert m.patterns == ((t("Romance", "temGenero", "Obra"), "narrower", 2), (t("Obra", "input", "Novela"), "narrower", 3))
    assert m.tag == t("Obra", "input", "Novela")  # the worst-matched pattern's tag
    broader = ConjunctiveQuery((t("Livro", "temGenero", "Obra"), NEEDS), frozenset(DEGREES))
    # obras' only tag is broader than the first pattern but says nothing of input: not every pattern matches
    assert sorted(i.id for i in resolve(broader, r).members) == ["livros", "romances", "todos"]


def test_one_pattern_answers_as_get_discover_does(hierarchy):
    r = registry(hierarchy, CASE)
    for match in (DEFAULT_MATCH, frozenset(DEGREES)):
        one = resolve(ConjunctiveQuery((HORROR,), match), r)
        single = discovery.merge(discovery.DiscoverQuery(HORROR, match),
                                 [discovery.part(r.catalogue, r.instances, discovery.DiscoverQuery(HORROR, match))])
        assert [(i.id, m[:3]) for i, m in one.ranked] == [(i.id, m) for i, m in single.ranked]


def test_provided_leaves_out_what_the_caller_cannot_supply(hierarchy):
    r = registry(hierarchy, CASE)
    q = ConjunctiveQuery((HORROR,), DEFAULT_MATCH, provided=(t("Obra", "input", "Livro"),))
    # filmes needs a Filme, romances a Novela, todos a Filme too: only livros' needs are covered
    assert [i.id for i in resolve(q, r).members] == ["livros"]
    q = ConjunctiveQuery((HORROR,), DEFAULT_MATCH, provided=(t("Obra", "input", "Novela"), t("Obra", "input", "Filme")))
    assert [i.id for i in resolve(q, r).members] == ["filmes", "livros", "romances", "todos"]


def test_filters_and_limit_apply_to_the_conjunction(hierarchy):
    regs = [reg("a", HORROR, NEEDS, environment="staging", meta={"zone": "eu"}),
            reg("b", HORROR, NEEDS, meta={"zone": "eu"}), reg("c", HORROR, NEEDS, meta={"zone": "us"}, service="x")]
    r = registry(hierarchy, regs)
    q = ConjunctiveQuery((HORROR, NEEDS), DEFAULT_MATCH)
    assert [i.id for i in resolve(q, r).members] == ["b", "c"]
    assert [i.id for i in resolve(ConjunctiveQuery((HORROR, NEEDS), DEFAULT_MATCH, limit=1), r).members] == ["b"]
    assert [i.id for i in resolve(ConjunctiveQuery((HORROR, NEEDS), DEFAULT_MATCH, service="x"), r).members] == ["c"]
    eu = ConjunctiveQuery((HORROR, NEEDS), DEFAULT_MATCH, selector=parse_selector("*", [("zone", "eu")]))
    assert [i.id for i in resolve(eu, r).members] == ["a", "b"]
    r.heartbeat("b", status="draining")
    assert [i.id for i in resolve(q, r).members] == ["c"]
    assert [i.id for i in resolve(ConjunctiveQuery((HORROR, NEEDS), DEFAULT_MATCH, any_status=True), r).members] == \
        ["b", "c"]


def test_a_change_is_relevant_when_it_touches_a_pattern(hierarchy):
    q = ConjunctiveQuery((HORROR, NEEDS), DEFAULT_MATCH)

    def change(*tags, environment="default"):
        return Change("x", "registered", 1, "up", True, frozenset(tags), frozenset({"svc"}), frozenset({environment}))

    assert conjunctive.relevant(hierarchy, q, frozenset(), [change(t("Livro", "input", "Livro"))])
    assert conjunctive.relevant(hierarchy, q, frozenset(), iter([change(t("Obra", "other")),
                                                                 change(t("Filme", "temGenero", "Obra"))]))
    assert not conjunctive.relevant(hierarchy, q, frozenset(), [change(t("Obra", "temAtributo", "Obra"))])
    assert not conjunctive.relevant(hierarchy, q, frozenset(), [change(HORROR, environment="prod")])


tags = st.tuples(st.sampled_from(TERMS + [ANY]), st.sampled_from(PROPS), st.sampled_from(TERMS + [ANY]))
patterns = st.lists(tags, min_size=1, max_size=3)


def wired(q, r: Registry) -> discovery.Part:
    return wire.part_from_bytes(wire.part_bytes(conjunctive.part(r.catalogue, r.instances, q), q.tags), q.tags)


@settings(max_examples=120, deadline=None)
@given(instances=st.lists(st.lists(tags, min_size=1, max_size=5), min_size=1, max_size=10),
       shards=st.integers(1, 4), copies=st.integers(1, 3), seed=st.integers(0, 2**32), asked=patterns,
       provided=st.one_of(st.none(), st.lists(st.tuples(st.sampled_from(TERMS), st.sampled_from(PROPS[:3]),
                                                        st.sampled_from(TERMS + [ANY])), min_size=1, max_size=2)),
       match=st.sets(st.sampled_from([*DEGREES, SIMILAR]), min_size=1), limit=st.one_of(st.none(), st.integers(1, 5)),
       over_the_wire=st.booleans(), by_score=st.booleans())
def test_any_partition_answers_as_one_shard(hierarchy, instances, shards, copies, seed, asked, provided, match, limit,
                                            over_the_wire, by_score):
    regs = [reg(f"i{n}", *(Tag(*x) for x in ts)) for n, ts in enumerate(instances)]
    rng = random.Random(seed)
    spread: list[list[Registration]] = [[] for _ in range(shards)]
    for r in regs:
        for k in rng.sample(range(shards), min(copies, shards)):
            spread[k].append(r)
    if by_score and SIMILAR in match:  # rank=score: the matchmaker's score, which travels with each match
        match = {*match, BY_SCORE}
    q = ConjunctiveQuery(tuple(Tag(*x) for x in asked), frozenset(match),
                         None if provided is None else tuple(Tag(*x) for x in provided), limit=limit)
    whole = resolve(q, registry(hierarchy, regs))
    asked_q = conjunctive.shard_query(q)
    parts = [(wired if over_the_wire else (lambda q_, r: conjunctive.part(r.catalogue, r.instances, q_)))(
        asked_q, registry(hierarchy, p)) for p in spread]
    split = conjunctive.merge(q, parts, widened=True)
    assert conjunctive.body(split) == conjunctive.body(whole)
    assert discovery.signature(split) == discovery.signature(whole)
    # and what it is: every pattern matched at the instance's best tag for it, combined
    for inst, m in whole.ranked:
        for pattern, (tag, degree, distance) in zip(q.patterns, m.patterns):
            if degree == SIMILAR:  # no tag of the instance matches the pattern logically in a degree asked
                assert not any((g := tag_match(x, pattern, hierarchy)) is not None and g[0] in match
                               for x in inst.reg.tags)
                continue
            graded = sorted((RANK[g[0]], g[1], x) for x in inst.reg.tags
                            if (g := tag_match(x, pattern, hierarchy)) is not None and g[0] in match)
            assert graded[0] == (RANK[degree], distance, tag)
        if SIMILAR not in match:
            assert m == combine(m.patterns)


def test_the_body_keeps_the_get_keys_and_adds_the_patterns(hierarchy):
    r = registry(hierarchy, CASE)
    novela = t("Obra", "input", "Novela")
    q = ConjunctiveQuery((HORROR, NEEDS), DEFAULT_MATCH, provided=(novela,))
    body = orjson.loads(conjunctive.body(resolve(q, r)))
    assert body["query"] == {"all": [HORROR.as_json(), NEEDS.as_json()], "provided": [novela.as_json()]}
    first = body["instances"][0]["match"]
    assert set(first) == {"tag", "degree", "distance", "patterns"} and len(first["patterns"]) == 2
    assert body["matches"][0]["instances"] == [{"id": body["instances"][0]["id"]}]
