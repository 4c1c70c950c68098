"""The SPARQL result cache: answers kept in memory and served again while the replica is unchanged.

An answer is keyed by the query, its protocol dataset, the negotiated `Accept` and the base IRI, and
stored under the replica generation read *before* it was evaluated, so that one computed while a write
landed is never served. Entries over `ENTRY_MAX_BYTES` are not kept; the whole cache is bounded by
`max_bytes`, least recently used first out. The server keeps one for the queries it sends to its
query processes, and each query process one for the connections it serves itself.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

from semreg.sparql.protocol import QueryRequest
from semreg.sparql.runner import Output

MiB = 1024 * 1024
ENTRY_MAX_BYTES = 1 * MiB


def cache_key(operation: QueryRequest, accept: str | None, base_iri: str | None) -> tuple[Any, ...]:
    return (operation.query, operation.default_graphs, operation.named_graphs, accept, base_iri)


class ResultCache:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple, tuple[int, Output]] = OrderedDict()
        self._bytes = 0
        self.hits = 0

    def get(self, key: tuple, generation: int) -> Output | None:
        hit = self._entries.get(key)
        if hit is None or hit[0] != generation:
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return hit[1]

    def put(self, key: tuple, generation: int, output: Output) -> None:
        size = len(output.body)
        if size > ENTRY_MAX_BYTES or size > self.max_bytes:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= len(old[1].body)
        self._entries[key] = (generation, output)
        self._bytes += size
        while self._bytes > self.max_bytes and self._entries:
            _, (_, dropped) = self._entries.popitem(last=False)
            self._bytes -= len(dropped.body)

    @property
    def size_bytes(self) -> int:
        return self._bytes
