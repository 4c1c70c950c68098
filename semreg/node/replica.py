"""The SPARQL replica as a service (a node started with `--sparql`): its feed (`semreg.sparql.feed`), a thread
keeping what `/sparql` answers from current behind the writes, and what it shows of the registry.

A node alone shows the instances of its own shard; a ring member shows the newest copy of every
member's instances (`semreg.cluster.replica_copies`, through `publish` and `hide`). Each instance published was
just made (registered, replaced, a status changed, a copy from another member), with objects that live on: the
collector is told (`semreg.node.memory`).
"""
from __future__ import annotations

import asyncio
from typing import Any

from semreg.cluster.cluster import Cluster
from semreg.cluster.replica_copies import ReplicaCopies
from semreg.node.memory import Memory
from semreg.registry.local_shard import LocalShard
from semreg.registry.registry import Change
from semreg.sparql.feed import ReplicaFeed
from semreg.storage.store import Store


class Replica:
    name = "replica"
    needs = ("store",)

    def __init__(self, store: Store, memory: Memory) -> None:
        self.feed = ReplicaFeed(foreign=store.foreign_quads)
        self._memory = memory

    async def start(self) -> None:
        self.feed.start()

    async def stop(self) -> None:
        await asyncio.to_thread(self.feed.stop)

    def waiting(self) -> str:
        return ""

    def publish(self, view: dict[str, Any]) -> None:
        """An instance into the replica."""
        self._memory.note(len(view.get("tags", ())) + 1)
        self.feed.put_instance(view)

    def hide(self, instance_id: str) -> None:
        self.feed.remove_instance(instance_id)

    def show(self, shard: LocalShard, cluster: Cluster | None) -> None:
        """Show what `shard` holds as it changes (a node alone), or the newest copy of every member's instances (a
        ring member: the copies come with this shard's changes and the other members' change logs)."""
        if cluster is not None:
            cluster.copies = ReplicaCopies(self.publish, self.hide)
            shard.subscribe(cluster.local_copies)
            return

        def changed(changes: list[Change]) -> None:
            for c in changes:
                if c.reason == "moved":
                    continue  # a copy handed to its new owners: the instance itself stays
                if c.removed:
                    self.hide(c.id)
                elif c.membership and (inst := shard.held(c.id)) is not None:
                    # not held any more: removed by a later change of the same batch (expired, then deleted)
                    self.publish(inst.view())

        shard.subscribe(changed)
