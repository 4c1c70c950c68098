"""A query the server sends a query process: what the pool sends (`semreg.sparql.pool`) and a worker
evaluates (`semreg.sparql.connections.evaluate`).

It travels pickled, so its class lives in this small module that both sides import: a worker reads it
without importing the server's side of the pool.
"""
from __future__ import annotations

from typing import NamedTuple


class Job(NamedTuple):
    """One query as a worker evaluates it (graph IRIs as strings; prefixes only when they changed)."""

    query: str
    default_graphs: tuple[str, ...]
    named_graphs: tuple[str, ...]
    accept: str | None
    base_iri: str | None
    prefixes: dict[str, str] | None
    time_left_s: float
    time_limit_s: float
    result_limit: int | None
