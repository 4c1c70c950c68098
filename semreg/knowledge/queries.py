"""Saved queries: a discovery question kept under a DNS-safe name, so that DNS, Prometheus and a plain URL can
ask it by name (`/v1/queries/NAME/discover`, `_NAME._tcp.semreg.`, `/v1/prometheus/targets?query=NAME`).

Like the ontologies and the prefixes, saved queries are small and on every node: durable in the store's
records (`<urn:semreg:query:NAME> a sr:SavedQuery`), published to the other nodes of a ring by
`semreg.cluster.shared`, and in every backup with their owner. A query is kept as the parameters of its
discovery (`s`, `p`, `o` as full IRIs, or `all` and `provided` as tags of full IRIs; `match`, `environment`,
`meta`, `limit`), already checked by the one
parser of discovery questions (`semreg.registry.query_params`) before it is saved here: this module knows
names, owners and durability, not what a question means.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from semreg.errors import BadRequest, NotFound
from semreg.storage.store import Store

log = logging.getLogger("semreg.knowledge")

NAME_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"  # a DNS label (RFC 1035, lower case)
_NAME = re.compile(NAME_PATTERN)
FIELDS = ("s", "p", "o", "match", "environment", "meta", "limit")
CONJUNCTIVE_FIELDS = ("all", "provided")  # a query of several patterns: these instead of s, p, o

Write = Callable[..., Awaitable[Any]]  # runs a store call on the node's writer thread


def check_name(name: str) -> str:
    """`name` when it is a DNS label (so that `_NAME._tcp.DOMAIN` and `NAME.DOMAIN` are names); else a 400."""
    if not _NAME.match(name):
        raise BadRequest(f"a saved query's name is a DNS label: 1-63 lower-case letters, digits and '-', starting "
                         f"and ending with a letter or digit; '{name[:80]}' is not one.", field="name")
    return name


@dataclass(frozen=True)
class SavedQuery:
    name: str
    query: dict[str, Any]  # the discovery's parameters, FIELDS
    owner: str | None = None  # the token that saved it (tokens in force)

    @property
    def environment(self) -> str:
        return str(self.query.get("environment") or "default")

    def as_json(self) -> dict[str, Any]:
        if self.query.get("all") is not None:
            shown = {k: self.query[k] for k in CONJUNCTIVE_FIELDS if k in self.query}
            shown.update((k, self.query.get(k)) for k in FIELDS if k not in ("s", "p", "o"))
        else:
            shown = {k: self.query.get(k) for k in FIELDS}
        if self.query.get("min_similarity") is not None:  # only a query naming similar has one
            shown["min_similarity"] = self.query["min_similarity"]
        if self.query.get("rank") is not None:  # only a conjunctive query ranked by score has one
            shown["rank"] = self.query["rank"]
        return {"name": self.name, **shown, **({"owner": self.owner} if self.owner is not None else {})}


@dataclass
class SavedQueries:
    """The saved queries of this node, by name, durable in `store` (through the writer thread `write`)."""

    store: Store
    write: Write
    by_name: dict[str, SavedQuery] = field(default_factory=dict)
    version: int = 0  # counts changes: a reader caching what a name answers knows when to look again
    listeners: list[Callable[[str], None]] = field(default_factory=list)  # told the name of each change

    async def restore(self) -> None:
        for name, owner, query in await self.write(self.store.load_queries):
            self.by_name[name] = SavedQuery(name, query, owner)

    def get(self, name: str) -> SavedQuery:
        found = self.by_name.get(name)
        if found is None:
            raise NotFound(f"no query is saved as '{name[:80]}'.", query=name[:80])
        return found

    def all(self) -> list[SavedQuery]:
        return [self.by_name[name] for name in sorted(self.by_name)]

    def __len__(self) -> int:
        return len(self.by_name)

    async def put(self, saved: SavedQuery, by: str | None = None) -> bool:
        """Save (or replace) a query; True when it is new. `by` names who asked (None: from the cluster)."""
        check_name(saved.name)
        created = saved.name not in self.by_name
        if not created and self.by_name[saved.name] == saved:
            return False
        await self.write(self.store.save_query, saved.name, saved.owner, saved.query)
        self.by_name[saved.name] = saved
        self._changed(saved.name)
        log.info("query saved", extra={"query": saved.name, "new": created, "by": by})
        return created

    async def delete(self, name: str, by: str | None = None) -> None:
        self.get(name)
        await self.write(self.store.delete_query, name)
        del self.by_name[name]
        self._changed(name)
        log.info("query deleted", extra={"query": name, "by": by})

    def _changed(self, name: str) -> None:
        self.version += 1
        for listener in self.listeners:
            listener(name)
