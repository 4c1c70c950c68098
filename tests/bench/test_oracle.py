"""The benchmark's oracle (what a question must find, from the data set and the contract's definitions) is
held to one node's matching: the catalogue over the same instances and the reasoner's hierarchy of the same
ontology."""
from __future__ import annotations

import random

import pyoxigraph as ox
import pytest

from semreg.bench.dataset import Dataset, class_iri, property_iri
from semreg.bench.oracle import Oracle
from semreg.rdf.terms import Tag
from semreg.reasoning.matching import DEGREES
from semreg.reasoning.reasoner import build_hierarchy, compute_closure
from semreg.registry.catalogue import Catalogue


@pytest.fixture(scope="module")
def data():
    return Dataset(classes=400, instances=3000)


@pytest.fixture(scope="module")
def catalogue(data):
    triples = list(ox.parse(data.turtle().encode(), format=ox.RdfFormat.TURTLE))
    cat = Catalogue()
    cat.set_hierarchy(build_hierarchy(triples, compute_closure(triples).inferred))
    for view in data.instances_iter():
        cat.add(view["id"], [Tag(t["s"], t["p"], t["o"]) for t in view["tags"]])
    return cat


def test_tag_indexes_are_the_instances_tags(data):
    for index in (0, 1, 2999):
        tags = data.instance(index)["tags"]
        assert [(class_iri(s), property_iri(p), class_iri(o)) for s, p, o in data.tag_indexes(index)] == [
            (t["s"], t["p"], t["o"]) for t in tags]


@pytest.mark.parametrize("seed", range(3))
def test_the_oracle_finds_what_one_node_finds(data, catalogue, seed):
    """Random questions at every level of the class DAG (roots reach hundreds of instances, leaves a few),
    and every other one a registered tag with its classes taken one level up or down."""
    oracle, rng = Oracle(data), random.Random(seed)
    found = 0
    for k in range(150):
        if k % 2:
            s, p, o = rng.choice(data.tag_indexes(rng.randrange(data.instances)))
            s, o = (rng.choice((s, *data.parents[s], *data.children[s])) for s in (s, o))
        else:
            s, p, o = rng.randrange(data.classes), rng.randrange(data.properties), rng.randrange(data.classes)
        q = (class_iri(s), property_iri(p), class_iri(o))
        one_node = {i for m in catalogue.expand(Tag(*q), frozenset(DEGREES)) for i in catalogue.holders[m[0]]}
        assert oracle.ids(*q) == one_node, q
        found += len(one_node)
    assert found > 100  # the questions found something to compare


def test_the_discovery_question_finds_its_answer(data):
    """(target, p00, *) in the data set's own terms: the oracle takes three terms, so ask with every object
    class at once through the root classes' answers."""
    oracle = Oracle(data)
    roots = [class_iri(i) for i in data.levels[0]]
    found = set().union(*(oracle.ids(class_iri(data.target_class), property_iri(0), root) for root in roots))
    assert data.expected_answer_ids() <= found


def test_terms_outside_the_data_set_are_refused(data):
    with pytest.raises(ValueError):
        Oracle(Dataset(instances=1)).ids("http://example.org/x", property_iri(0), class_iri(0))
