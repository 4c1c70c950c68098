"""A member's key in etcd (`semreg.cluster.membership`): what each member declares of itself, as JSON."""
from __future__ import annotations

from typing import TypedDict

import orjson


class Declared(TypedDict, total=False):
    """The key's value. Read as another member wrote it (perhaps a member of another version), so any field
    may be missing."""

    id: str
    address: str
    state: str  # "left" once it left
    sparql: bool  # whether it serves `/sparql` (`semreg.cluster.sparql_forward`)


def encoded(node_id: str, address: str, state: str, sparql: bool) -> bytes:
    declared: Declared = {"id": node_id, "address": address, "state": state, "sparql": sparql}
    return orjson.dumps(declared)
