"""Discovery as a merge of shard parts: one part is today's answer, and instances spread over any number of
shards (with copies on several) answer exactly as one shard holding them all."""
from __future__ import annotations

import random
from dataclasses import replace

import orjson
import pyoxigraph as ox
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semreg.clock import FakeClock
from semreg.cluster import wire
from semreg.rdf.terms import ANY, Tag
from semreg.reasoning.matching import DEFAULT_MATCH, DEGREES
from semreg.reasoning.reasoner import build_hierarchy, compute_closure
from semreg.registry import discovery
from semreg.registry.discovery import DiscoverQuery
from semreg.registry.instances import Registration
from semreg.registry.registry import Registry
from semreg.registry.selector import Selector, parse_selector

EX = "http://ex.org/"
ONTOLOGY = f"""@prefix : <{EX}> . @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
:Livro rdfs:subClassOf :Obra . :Filme rdfs:subClassOf :Obra . :Pintura rdfs:subClassOf :Obra .
:Romance rdfs:subClassOf :Livro . :temGenero rdfs:subPropertyOf :temAtributo ."""
TERMS = [EX + t for t in ("Obra", "Livro", "Filme", "Pintura", "Romance")]
PROPS = [EX + "temGenero", EX + "temAtributo", ANY]


@pytest.fixture(scope="module")
def hierarchy():
    triples = [ox.Triple(q.subject, q.predicate, q.object) for q in ox.parse(ONTOLOGY.encode(), format=ox.RdfFormat.TURTLE)]
    return build_hierarchy(triples, compute_closure(triples).inferred)


def registry(hierarchy, regs, revisions=None):
    r = Registry(FakeClock())
    r.catalogue.set_hierarchy(hierarchy)
    r.put_many(regs, revisions)
    return r


def answer(result: discovery.DiscoverResult):
    listed = orjson.loads(result.matches_json)
    return ([(" ".join(m["tag"][k] for k in "spo"), m["degree"], m["distance"], [i["id"] for i in m["instances"]])
             for m in listed], [i.id for i in result.members])


def resolve(q, *registries):
    return discovery.merge(q, [discovery.part(r.catalogue, r.instances, q) for r in registries])


def reg(iid, *tags, service="svc", ttl=0.0):
    return Registration(id=iid, service=service, address="10.0.0.1", port=80, ttl_s=ttl,
                        tags=tuple(Tag(*t) for t in tags))


CASE = [reg("livros", (EX + "Livro", EX + "temGenero", EX + "Terror")),
        reg("filmes", (EX + "Filme", EX + "temGenero", EX + "Terror")),
        reg("romances", (EX + "Romance", EX + "temGenero", EX + "Terror"), (EX + "Livro", EX + "temGenero", EX + "Terror")),
        reg("obras", (EX + "Obra", EX + "temAtributo", EX + "Terror")),
        reg("pinturas", (EX + "Obra", ANY, EX + "Pintura"))]
QUERY = Tag(EX + "Obra", EX + "temGenero", EX + "Terror")


@pytest.mark.parametrize("match, limit, expected_matches, expected_ranked", [
    (DEFAULT_MATCH, None,
     [(f"{EX}Filme {EX}temGenero {EX}Terror", "narrower", 1, ["filmes"]),
      (f"{EX}Livro {EX}temGenero {EX}Terror", "narrower", 1, ["livros", "romances"]),
      (f"{EX}Romance {EX}temGenero {EX}Terror", "narrower", 2, ["romances"])],
     ["filmes", "livros", "romances"]),
    (DEFAULT_MATCH, 2,
     [(f"{EX}Filme {EX}temGenero {EX}Terror", "narrower", 1, ["filmes"]),
      (f"{EX}Livro {EX}temGenero {EX}Terror", "narrower", 1, ["livros"])],
     ["filmes", "livros"]),
    (frozenset({"broader"}), None,
     [(f"{EX}Obra {EX}temAtributo {EX}Terror", "broader", 1, ["obras"])], ["obras"]),
])
def test_one_shard_gives_the_single_node_answer(hierarchy, match, limit, expected_matches, expected_ranked):
    q = DiscoverQuery(QUERY, match, limit=limit)
    assert answer(resolve(q, registry(hierarchy, CASE))) == (expected_matches, expected_ranked)


def test_a_tag_split_over_shards_merges_and_a_newer_copy_wins(hierarchy):
    q = DiscoverQuery(QUERY, DEFAULT_MATCH)
    whole = registry(hierarchy, CASE)
    a = registry(hierarchy, CASE[:2])
    b = registry(hierarchy, CASE[2:])
    assert answer(resolve(q, a, b)) == answer(resolve(q, whole))
    # a stale copy of "livros" (revision 1) beside its new one (revision 5, another service)
    stale = registry(hierarchy, [CASE[0]], [1])
    fresh = registry(hierarchy, [reg("livros", (EX + "Livro", EX + "temGenero", EX + "Terror"), service="new")], [5])
    merged = resolve(q, stale, fresh, b)
    [livros] = [i for i, _ in merged.ranked if i.id == "livros"]
    assert livros.revision == 5 and livros.reg.service == "new"


def test_service_and_status_filters_apply_in_each_shard(hierarchy):
    r = registry(hierarchy, CASE)
    r.heartbeat("filmes", status="draining")
    q = DiscoverQuery(QUERY, DEFAULT_MATCH)
    assert answer(resolve(q, r))[1] == ["livros", "romances"]
    assert answer(resolve(DiscoverQuery(QUERY, DEFAULT_MATCH, any_status=True), r))[1] == ["filmes", "livros",
                                                                                           "romances"]
    assert answer(resolve(DiscoverQuery(QUERY, DEFAULT_MATCH, service="nope"), r)) == ([], [])


tags = st.tuples(st.sampled_from(TERMS + [ANY]), st.sampled_from(PROPS), st.sampled_from(TERMS + [EX + "Terror", ANY]))


@settings(max_examples=150, deadline=None)
@given(instances=st.lists(st.lists(tags, min_size=1, max_size=4), min_size=1, max_size=12),
       shards=st.integers(1, 4), copies=st.integers(1, 3), seed=st.integers(0, 2**32),
       query=tags, match=st.sets(st.sampled_from(DEGREES), min_size=1),
       limit=st.one_of(st.none(), st.integers(1, 6)))
def test_any_partition_answers_as_one_shard(hierarchy, instances, shards, copies, seed, query, match, limit):
    regs = [reg(f"i{n}", *t) for n, t in enumerate(instances)]
    rng = random.Random(seed)
    parts: list[list[Registration]] = [[] for _ in range(shards)]
    for r in regs:
        for k in rng.sample(range(shards), min(copies, shards)):
            parts[k].append(r)
    q = DiscoverQuery(Tag(*query), frozenset(match), limit=limit)
    whole = resolve(q, registry(hierarchy, regs))
    split = resolve(q, *(registry(hierarchy, p) for p in parts))
    assert answer(split) == answer(whole)
    assert discovery.signature(split) == discovery.signature(whole)
    assert discovery.body(split) == discovery.body(whole)


def wired(q: DiscoverQuery, r: Registry) -> discovery.Part:
    """A shard's part as another node receives it (`semreg.cluster.wire`)."""
    return wire.part_from_bytes(wire.part_bytes(discovery.part(r.catalogue, r.instances, q), q.tags), q.tags)


def test_a_copy_with_an_older_status_loses_to_the_newer_one_whatever_it_says(hierarchy):
    old = registry(hierarchy, CASE, [3] * len(CASE))
    new = registry(hierarchy, CASE, [3] * len(CASE))
    new.heartbeat("filmes", status="draining", revision=4)  # the owner's copy: drained since
    new.heartbeat("livros", load=3.0)  # renewed with a load: newer state, same revision
    q = DiscoverQuery(QUERY, DEFAULT_MATCH)
    asked = discovery.shard_query(q)
    merged = discovery.merge(q, [wired(asked, old), wired(asked, new)])
    assert [i.id for i in merged.members] == ["livros", "romances"]
    assert [i.load for i in merged.members if i.id == "livros"] == [3.0]
    # asked without any_status, the stale copy would have been the only one to mention "filmes"
    naive = discovery.merge(q, [wired(q, old), wired(q, new)])
    assert "filmes" in [i.id for i in naive.members]


@settings(max_examples=100, deadline=None)
@given(instances=st.lists(st.lists(tags, min_size=1, max_size=4), min_size=1, max_size=12),
       shards=st.integers(2, 4), seed=st.integers(0, 2**32), query=tags,
       match=st.sets(st.sampled_from(DEGREES), min_size=1), with_tags=st.booleans(),
       meta=st.text(max_size=20))
def test_parts_over_the_wire_answer_as_local_ones(hierarchy, instances, shards, seed, query, match, with_tags, meta):
    regs = [Registration(id=f"i{n}", service="svc", address="10.0.0.1", port=80, meta={"note": meta},
                         tags=tuple(Tag(*x) for x in t)) for n, t in enumerate(instances)]
    rng = random.Random(seed)
    parts: list[list[Registration]] = [[] for _ in range(shards)]
    for r in regs:
        parts[rng.randrange(shards)].append(r)
    q = DiscoverQuery(Tag(*query), frozenset(match), tags=with_tags)
    local = discovery.merge(q, [discovery.part(x.catalogue, x.instances, q)
                                for x in (registry(hierarchy, p) for p in parts)])
    remote = discovery.merge(q, [wired(q, registry(hierarchy, p)) for p in parts])
    assert discovery.body(remote) == discovery.body(local)
    assert discovery.signature(remote) == discovery.signature(local)
    assert remote.matched_tags == local.matched_tags


ENVS = ["default", "staging", "prod"]


def asked_of_many(q: DiscoverQuery, *registries: Registry) -> discovery.DiscoverResult:
    """What a coordinator of several shards answers: each asked `shard_query(q)` over the wire, merged."""
    asked = discovery.shard_query(q)
    return discovery.merge(q, [wired(asked, r) for r in registries], widened=True)


@settings(max_examples=150, deadline=None)
@given(instances=st.lists(st.tuples(st.lists(tags, min_size=1, max_size=3), st.sampled_from(ENVS),
                                    st.sampled_from(["eu", "us"])), min_size=1, max_size=12),
       shards=st.integers(1, 4), copies=st.integers(1, 3), seed=st.integers(0, 2**32), query=tags,
       environment=st.sampled_from([*ENVS, "*"]), zone=st.sampled_from([None, "eu", "us"]),
       limit=st.one_of(st.none(), st.integers(1, 6)), drained=st.sets(st.integers(0, 11)))
def test_a_selector_over_any_partition_answers_as_one_shard(hierarchy, instances, shards, copies, seed, query,
                                                            environment, zone, limit, drained):
    regs = [Registration(id=f"i{n}", service="svc", address="10.0.0.1", port=80, environment=env, meta={"zone": z},
                         tags=tuple(Tag(*x) for x in t)) for n, (t, env, z) in enumerate(instances)]
    rng = random.Random(seed)
    parts: list[list[Registration]] = [[] for _ in range(shards)]
    for r in regs:
        for k in rng.sample(range(shards), min(copies, shards)):
            parts[k].append(r)
    selector = parse_selector(environment, [("zone", zone)] if zone else [])
    q = DiscoverQuery(Tag(*query), DEFAULT_MATCH | {"broader"}, limit=limit, selector=selector)
    whole = registry(hierarchy, regs)
    split = [registry(hierarchy, p) for p in parts]
    for n in drained & set(range(len(regs))):  # drained on every copy alike
        for r in [whole, *split]:
            if f"i{n}" in r.instances:
                r.heartbeat(f"i{n}", status="draining")
    one = resolve(q, whole)
    assert all(selector.admits(i.reg) and i.status == "up" for i in one.members)
    many = asked_of_many(q, *split)
    assert answer(many) == answer(one)
    assert discovery.body(many) == discovery.body(one)


def test_a_stale_copy_of_an_instance_that_moved_environment_never_answers_for_the_old_one(hierarchy):
    tag = (EX + "Livro", EX + "temGenero", EX + "Terror")
    before = Registration(id="livros", service="svc", address="10.0.0.1", port=80, environment="staging",
                          tags=(Tag(*tag),))
    stale = registry(hierarchy, [before], [4])  # an owner that missed the move
    moved = registry(hierarchy, [replace(before, environment="prod")], [5])
    q = DiscoverQuery(QUERY, DEFAULT_MATCH, selector=Selector("staging"))
    assert answer(asked_of_many(q, stale, moved))[1] == []
    assert answer(asked_of_many(replace(q, selector=Selector("prod")), stale, moved))[1] == ["livros"]
    # asked without the instances the selector left out, the stale copy would have been the only one
    assert answer(discovery.merge(q, [wired(q, stale), wired(q, moved)]))[1] == ["livros"]
    # and back: the newer copy in staging answers, the older one in prod does not hide it
    back = registry(hierarchy, [before], [6])
    assert answer(asked_of_many(q, moved, back))[1] == ["livros"]


def test_one_part_of_a_widened_question_is_filtered_too(hierarchy):
    """A ring whose other members did not answer: the one part there answers what several are asked."""
    r = registry(hierarchy, CASE + [Registration(id="elsewhere", service="svc", address="h", port=1,
                                                 environment="prod", tags=CASE[0].tags)])
    r.heartbeat("filmes", status="draining")
    q = DiscoverQuery(QUERY, DEFAULT_MATCH)
    assert answer(asked_of_many(q, r)) == answer(resolve(q, r))
    assert answer(asked_of_many(q, r))[1] == ["livros", "romances"]
