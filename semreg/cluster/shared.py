"""What every node holds whole: the ontologies, the client prefixes and the saved queries, the same on every
node of the ring.

An ontology, prefix or saved query change through any node is stored there, then published in etcd
(`/semreg/{cluster}/ontologies/{name}`, `/semreg/{cluster}/prefixes/{prefix}`, `/semreg/{cluster}/queries/{name}`:
a saved query is small, so its record travels in etcd itself); every node applies it
(fetching the document from a node that has it) and says so in etcd (`/semreg/{cluster}/applied/{node}/{name}`,
on its membership lease), and the upload answers once every live member has (laggards named). A node
starting catches up before it says it is ready. A change made while etcd could not be reached is
published when it answers again.
"""
from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Callable
from typing import Any

import orjson

from semreg.clock import Clock, sleep
from semreg.cluster.kv import DELETE, KV, KVUnavailable
from semreg.cluster.membership import Membership
from semreg.cluster.placement import RingPlacement
from semreg.errors import SemregError
from semreg.knowledge.queries import SavedQuery
from semreg.registry.shard import ShardUnavailable

log = logging.getLogger("semreg.cluster")

APPLY_WAIT_S = 30.0


class SharedKnowledge:
    """This node's ontologies and prefixes, kept as etcd lists them for the cluster `name`."""

    def __init__(self, *, kv: KV, name: str, node_id: str, knowledge: Any, clock: Clock, placement: RingPlacement,
                 membership: Membership, stopping: Callable[[], bool]) -> None:
        self.kv = kv
        self.name = name
        self.node_id = node_id
        self.knowledge = knowledge
        self.clock = clock
        self.placement = placement
        self.membership = membership
        self._stopping = stopping
        self.caught_up = False
        self._unpublished: dict[tuple[str, str], bytes] = {}

    def _key(self, kind: str, name: str = "") -> str:
        return f"/semreg/{self.name}/{kind}/{name}"

    # -- applying what etcd lists --------------------------------------------------------------------------
    async def catch_up(self) -> None:
        """Apply the ontologies and prefixes etcd lists (fetching documents from the nodes that have them)."""
        await self._republish()
        _, prefixes = await self.kv.get_prefix(self._key("prefixes"))
        for key, value in prefixes:
            await self._apply_prefix(key.rsplit("/", 1)[1], value.decode())
        _, queries = await self.kv.get_prefix(self._key("queries"))
        for key, value in queries:
            await self._apply_query(key.rsplit("/", 1)[1], value)
        _, ontologies = await self.kv.get_prefix(self._key("ontologies"))
        listed = set()
        for key, value in ontologies:
            name = key.rsplit("/", 1)[1]
            listed.add(name)
            await self._apply_ontology(name, orjson.loads(value))
        for name in list(self.knowledge.ontologies.metas):
            if name not in listed:  # removed while this node was away, or never published
                meta = self.knowledge.ontologies.metas[name]
                await self.publish_ontology(name, meta.sha256, meta.media_type, wait=False)
        self.caught_up = True

    async def run(self) -> None:
        """Apply every change etcd lists from now on (catching up again after etcd was away)."""
        revision = 0
        while not self._stopping():
            try:
                revision, _ = await self.kv.get_prefix(self._key(""))
                async for event in self.kv.watch_prefix(f"/semreg/{self.name}/", revision + 1):
                    kind, _, name = event.key[len(f"/semreg/{self.name}/"):].partition("/")
                    if kind == "ontologies" and event.kind != DELETE:
                        await self._apply_ontology(name, orjson.loads(event.value))
                    elif kind == "prefixes" and event.kind != DELETE:
                        await self._apply_prefix(name, event.value.decode())
                    elif kind == "queries" and event.kind != DELETE:
                        await self._apply_query(name, event.value)
            except KVUnavailable:
                await sleep(self.clock, 1.0)
                with contextlib.suppress(KVUnavailable):
                    await self.catch_up()  # what changed while etcd was away
            except Exception:
                log.exception("applying a cluster-wide change failed")
                await sleep(self.clock, 1.0)

    async def _apply_ontology(self, name: str, published: dict[str, Any]) -> None:
        """An ontology as etcd lists it: a document's sha256, or `deleted` (a removal is kept as a marker,
        so that a node away meanwhile does not bring it back)."""
        ontologies = self.knowledge.ontologies
        meta = ontologies.metas.get(name)
        sha = published.get("sha256")
        if published.get("deleted"):
            if meta is not None:
                await ontologies.delete(name)
            sha = "deleted"
        elif meta is None or meta.sha256 != sha:
            body = await self._fetch(name, str(sha), published)
            if body is None:
                log.error("no member could send an ontology", extra={"ontology": name})
                return
            await ontologies.put(name, body, published.get("media_type", "text/turtle"))
        with contextlib.suppress(KVUnavailable):
            await self.kv.put(self._key("applied", f"{self.node_id}/{name}"), str(sha).encode(),
                              lease=self.membership.lease)

    async def _fetch(self, name: str, sha: str, published: dict[str, Any]) -> bytes | None:
        first = published.get("node")
        order = [first] + [m for m in self.placement.ring.members if m != first]
        for member in order:
            peer = self.placement.peers.get(member) if member else None
            if peer is None:
                continue
            try:
                body, _ = await peer.ontology(name)
            except (ShardUnavailable, SemregError):
                continue
            if hashlib.sha256(body).hexdigest() == sha:
                return body
        return None

    async def _apply_prefix(self, prefix: str, iri: str | None) -> None:
        """A client prefix as etcd lists it (an empty value: removed)."""
        current = self.knowledge.prefixes.explicit.get(prefix)
        if not iri:
            if current is not None:
                await self.knowledge.delete_prefix(prefix)
        elif current != iri:
            await self.knowledge.put_prefix(prefix, iri)

    async def _apply_query(self, name: str, value: bytes) -> None:
        """A saved query as etcd lists it (an empty value: removed)."""
        queries = self.knowledge.queries
        if not value:
            if name in queries.by_name:
                await queries.delete(name)
            return
        try:
            record = orjson.loads(value)
            saved = SavedQuery(name, dict(record["query"]), record.get("owner"))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            log.error("a saved query in etcd cannot be read", extra={"query": name})
            return
        await queries.put(saved)

    # -- publishing this node's changes ------------------------------------------------------------------
    async def publish_ontology(self, name: str, sha: str | None, media_type: str = "", wait: bool = True
                               ) -> dict[str, list[str]]:
        """Tell every node (through etcd) of an upload (`sha`) or a removal (None); with `wait`, until every
        live member applied it or `APPLY_WAIT_S` passed. Returns the members that did and did not. If etcd
        went away meanwhile, the change is published when it answers again (before anything is applied
        from it, so that it is not undone by the older listing)."""
        published = {"deleted": True} if sha is None else {"sha256": sha, "media_type": media_type}
        try:
            await self.kv.put(self._key("ontologies", name), orjson.dumps({**published, "node": self.node_id}))
        except KVUnavailable:
            self._unpublished[("ontologies", name)] = orjson.dumps({**published, "node": self.node_id})
            return {"applied": [self.node_id], "laggards": sorted(m for m in self.placement.ring.members
                                                                  if m != self.node_id)}
        if not wait:
            return {"applied": [], "laggards": []}
        expected = sha or "deleted"
        deadline = self.clock.monotonic() + APPLY_WAIT_S
        while True:
            try:
                _, acks = await self.kv.get_prefix(self._key("applied"))
            except KVUnavailable:
                acks = []
            have = {key.rsplit("/", 2)[1] for key, value in acks
                    if key.endswith("/" + name) and value.decode() == expected}
            done = [m for m in self.placement.ring.members if m in have]
            laggards = [m for m in self.placement.ring.members if m not in have]
            if not laggards or self.clock.monotonic() > deadline:
                if laggards:
                    log.warning("members had not applied an ontology change when it answered",
                                extra={"ontology": name, "laggards": laggards})
                return {"applied": sorted(done), "laggards": sorted(laggards)}
            await sleep(self.clock, 0.05)

    async def publish_prefix(self, prefix: str, iri: str | None) -> None:
        """A client prefix set (or removed: None, kept as an empty value) through this node, for every node."""
        try:
            await self.kv.put(self._key("prefixes", prefix), (iri or "").encode())
        except KVUnavailable:
            self._unpublished[("prefixes", prefix)] = (iri or "").encode()

    async def publish_query(self, name: str, saved: SavedQuery | None) -> None:
        """A saved query set (or removed: None, kept as an empty value) through this node, for every node."""
        value = orjson.dumps({"query": saved.query, "owner": saved.owner}) if saved is not None else b""
        try:
            await self.kv.put(self._key("queries", name), value)
        except KVUnavailable:
            self._unpublished[("queries", name)] = value

    async def _republish(self) -> None:
        """Publish what changed here while etcd could not be reached."""
        for (kind, name), value in list(self._unpublished.items()):
            await self.kv.put(self._key(kind, name), value)
            del self._unpublished[(kind, name)]
