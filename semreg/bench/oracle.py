"""What a question must find in the synthetic data set, worked out from the contract's definitions alone.

With `match=all` a tag matches a question when at each position its term is the queried one, below it or
above it (API.md: exact, narrower, broader, overlap); in the data set the terms relate only through the class
DAG and the property tree (`Dataset.parents`, `Dataset.property_parent`), with no equivalences and no
wildcards. So the instances a question must find follow from the data set without a reasoner or a registry:
a benchmark checks a server's answers against them as any client could.
"""
from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from semreg.bench.dataset import NS, Dataset

CLASS, PROPERTY = NS + "C", NS + "p"


class Oracle:
    """The instances of `data` that each question of three terms matches with `match=all`."""

    def __init__(self, data: Dataset) -> None:
        self.data = data
        self._by_subject: dict[int, list[tuple[int, int, int]]] = {}  # subject class → (property, object, instance)
        for index in range(data.instances):
            for s, p, o in data.tag_indexes(index):
                self._by_subject.setdefault(s, []).append((p, o, index))

    def ids(self, s: str, p: str, o: str) -> set[str]:
        """The ids of the instances with a tag related to (s, p, o) at every position."""
        subjects = self._classes(_index(s, CLASS))
        properties, objects = self._properties(_index(p, PROPERTY)), self._classes(_index(o, CLASS))
        found = {index for subject in subjects for prop, obj, index in self._by_subject.get(subject, ())
                 if prop in properties and obj in objects}
        return {self.data.instance_id(index) for index in found}

    def _classes(self, index: int) -> frozenset[int]:
        return _related_classes(self.data, index)

    def _properties(self, index: int) -> frozenset[int]:
        data = self.data
        above = set(_chain(index, data.property_parent))
        below = {k for k in range(data.properties) if index in _chain(k, data.property_parent)}
        return frozenset(above | below | {index})


@cache
def _related_classes(data: Dataset, index: int) -> frozenset[int]:
    """The class, the classes below it and the classes above it."""
    return frozenset(data.ancestors(index) | data.descendants(index) | {index})


def _chain(index: int, parent_of) -> Iterable[int]:
    """The ancestors of `index` along `parent_of`, nearest first."""
    parent = parent_of(index)
    while parent is not None:
        yield parent
        parent = parent_of(parent)


def _index(iri: str, prefix: str) -> int:
    if not iri.startswith(prefix):
        raise ValueError(f"{iri} is not a term of the benchmark's data set")
    return int(iri[len(prefix):])
