"""The synthetic ontology and instances of the discovery benchmark.

Classes form a DAG of four levels (a few roots, fan-out 6 then 10, the rest spread as leaves; every
20th class below level 1 gets a second parent elsewhere); properties form a two-level
subPropertyOf tree under `p00`. Each instance has `tags_per_instance` tags `class prop class`.
The discovery query is `(target, p00, *)` with `target` a level-1 class: exactly `answer_size`
instances have their first tag's subject in `target`'s subtree and no other tag anywhere in it, so
reasoning (subclasses and subproperties, default match `exact,narrower`) must find exactly them.
Everything is a pure function of the sizes and the seed.
"""
from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property

NS = "http://bench.semreg.example/onto#"
PREFIX = "bench"
RDFS_SUBCLASSOF = "http://www.w3.org/2000/01/rdf-schema#subClassOf"
ROOTS = 5
FAN_OUT = (6, 10)  # children per class at levels 0 and 1; the remaining classes are leaves of level 2


def class_iri(index: int) -> str:
    return f"{NS}C{index:05d}"


def property_iri(index: int) -> str:
    return f"{NS}p{index:02d}"


@dataclass(frozen=True)
class Dataset:
    classes: int = 3000
    properties: int = 20
    instances: int = 10_000
    tags_per_instance: int = 3
    answer_size: int = 230
    seed: int = 7

    def __post_init__(self) -> None:
        if self.classes < ROOTS + ROOTS * FAN_OUT[0] + 1:
            raise ValueError(f"need at least {ROOTS + ROOTS * FAN_OUT[0] + 1} classes, got {self.classes}")
        if self.properties < 1 or self.tags_per_instance < 1 or self.instances < 1:
            raise ValueError("properties, tags per instance and instances must be at least 1")
        if not 1 <= self.answer_size <= self.instances:
            raise ValueError(f"the answer size must be between 1 and the number of instances ({self.instances})")

    # -- the class DAG ------------------------------------------------------------------------------
    @cached_property
    def levels(self) -> list[range]:
        sizes = [ROOTS, ROOTS * FAN_OUT[0], ROOTS * FAN_OUT[0] * FAN_OUT[1]]
        bounds, start = [], 0
        for size in sizes:
            end = min(start + size, self.classes)
            bounds.append(range(start, end))
            start = end
        if start < self.classes:
            bounds.append(range(start, self.classes))
        return [level for level in bounds if len(level)]

    @cached_property
    def parents(self) -> dict[int, tuple[int, ...]]:
        """Class index → its asserted parents (roots have none)."""
        parents: dict[int, tuple[int, ...]] = {i: () for i in self.levels[0]}
        for depth in range(1, len(self.levels)):
            above, level = self.levels[depth - 1], self.levels[depth]
            for n, index in enumerate(level):
                first = above[n % len(above)]
                if depth >= 2 and n % 20 == 19:
                    second = above[(n * 7 + 3) % len(above)]
                    parents[index] = (first, second) if second != first else (first,)
                else:
                    parents[index] = (first,)
        return parents

    @cached_property
    def children(self) -> dict[int, list[int]]:
        children: dict[int, list[int]] = {i: [] for i in range(self.classes)}
        for child, parents in self.parents.items():
            for parent in parents:
                children[parent].append(child)
        return children

    def descendants(self, index: int) -> set[int]:
        """Every class below `index` (not itself), through asserted subClassOf steps."""
        return _reach(index, self.children)

    def ancestors(self, index: int) -> set[int]:
        """Every class above `index` (not itself), through asserted subClassOf steps."""
        return _reach(index, self.parents)

    @cached_property
    def target_class(self) -> int:
        """The level-1 class the discovery query asks for."""
        return self.levels[1][0]

    @cached_property
    def sparql_class(self) -> int:
        """A class with a handful of descendants (closest to 10), for the one-pattern SPARQL query."""
        return min(range(self.classes), key=lambda i: (abs(len(self.descendants(i)) - 10), i))

    # -- properties -----------------------------------------------------------------------------------
    def property_parent(self, index: int) -> int | None:
        if index == 0:
            return None
        return 0 if index <= 4 else 1 + (index - 5) % min(4, self.properties - 1)

    # -- Turtle -----------------------------------------------------------------------------------------
    def turtle(self) -> str:
        lines = [f"@prefix {PREFIX}: <{NS}> .",
                 "@prefix owl: <http://www.w3.org/2002/07/owl#> .",
                 "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .",
                 "",
                 f"<{NS[:-1]}> a owl:Ontology ; rdfs:label \"semreg bench ontology ({self.classes} classes)\" .",
                 ""]
        for index in range(self.classes):
            parents = " , ".join(f"{PREFIX}:C{p:05d}" for p in self.parents[index])
            sub = f" ;\n    rdfs:subClassOf {parents}" if parents else ""
            lines.append(f"{PREFIX}:C{index:05d} a owl:Class ; rdfs:label \"class {index}\"{sub} .")
        for index in range(self.properties):
            parent = self.property_parent(index)
            sub = f" ;\n    rdfs:subPropertyOf {PREFIX}:p{parent:02d}" if parent is not None else ""
            lines.append(f"{PREFIX}:p{index:02d} a owl:ObjectProperty ; rdfs:label \"property {index}\"{sub} .")
        return "\n".join(lines) + "\n"

    # -- instances ------------------------------------------------------------------------------------
    @cached_property
    def _subject_pools(self) -> tuple[list[int], list[int]]:
        inside = sorted(self.descendants(self.target_class) | {self.target_class})
        outside = [i for i in range(self.classes) if i not in set(inside)]
        return inside, outside

    @cached_property
    def answer_indexes(self) -> frozenset[int]:
        """The instances the discovery query must return."""
        return frozenset(random.Random(self.seed).sample(range(self.instances), self.answer_size))

    def instance_id(self, index: int) -> str:
        return f"bench-{index:06d}"

    def instance(self, index: int) -> dict:
        """The registration of instance `index`: ttl 0 so it never expires during a run."""
        tags = [{"s": class_iri(s), "p": property_iri(p), "o": class_iri(o)} for s, p, o in self.tag_indexes(index)]
        return {"id": self.instance_id(index), "service": f"bench-svc-{index % 50:02d}",
                "address": f"10.{index // 65536 % 256}.{index // 256 % 256}.{index % 256}",
                "port": 8000 + index % 1000, "tags": tags, "weight": 1 + index % 10, "ttl": 0,
                "meta": {"bench": "discovery"}}

    def tag_indexes(self, index: int) -> list[tuple[int, int, int]]:
        """The tags of instance `index` as (subject class, property, object class) indexes."""
        rng = random.Random(self.seed * 1_000_003 + index)
        inside, outside = self._subject_pools
        tags = []
        for t in range(self.tags_per_instance):
            pool = inside if t == 0 and index in self.answer_indexes else outside
            tags.append((rng.choice(pool), rng.randrange(self.properties), rng.randrange(self.classes)))
        return tags

    def instances_iter(self) -> Iterator[dict]:
        return (self.instance(i) for i in range(self.instances))

    def batches(self, size: int) -> Iterator[list[dict]]:
        for start in range(0, self.instances, size):
            yield [self.instance(i) for i in range(start, min(start + size, self.instances))]

    def expected_answer_ids(self) -> set[str]:
        return {self.instance_id(i) for i in self.answer_indexes}

    def discovery_query(self) -> dict[str, str]:
        """`GET /v1/discover` parameters: the target class with the root property, object omitted."""
        return {"s": class_iri(self.target_class), "p": property_iri(0)}

    def outside_classes(self) -> list[str]:
        """Classes outside the target's subtree: tags made of these never join the discovery answer."""
        return [class_iri(i) for i in self._subject_pools[1]]

    def sparql_query(self) -> str:
        """One triple pattern; its rows are the subclasses of `sparql_class` (asserted and inferred)."""
        return f"SELECT ?s WHERE {{ ?s <{RDFS_SUBCLASSOF}> <{class_iri(self.sparql_class)}> }}"


def _reach(index: int, step: Mapping[int, Iterable[int]]) -> set[int]:
    """Every node `step` leads to from `index`, in any number of steps (not `index` itself unless a cycle)."""
    seen: set[int] = set()
    stack = list(step[index])
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(step[node])
    return seen
