"""Status changes, from the owner that made them to the other owners of the instance.

A status change on an owner (an expiry, a check, an admin status) is sent to the other owners with its
state version; copies keep the newest. An admin status is written down, so the other owners take the
record itself (a client's was brought to enough owners before it was acknowledged,
`semreg.registry.writes.spread_status`: sent again here, it changes nothing where it is held); an instance
deleted on the lease's owner (critical past deregister_after) goes from the other owners too. What this node
changed in one turn of the loop goes out in one batch to each owner.
"""
from __future__ import annotations

import asyncio

from semreg.cluster.placement import RingPlacement
from semreg.errors import SemregError
from semreg.registry.registry import DELETED, STATUS, Change
from semreg.registry.shard import OwnShard, ShardUnavailable, State

STATUS_REASONS = frozenset({"status", "check", "expired"})


class Statuses:
    """This node's status changes and removals, on their way to the other owners."""

    def __init__(self, *, placement: RingPlacement, local: OwnShard) -> None:
        """`local`: this node's shard, whose changes these are."""
        self.placement = placement
        self.node_id = placement.node_id
        self.replicas = placement.replicas
        self.local = local
        self._states: dict[str, list[State]] = {}
        self._states_task: asyncio.Task[None] | None = None
        self._records: dict[str, list[str]] = {}  # member → ids whose record (or tombstone) it should take

    def tasks(self) -> list[asyncio.Task[None]]:
        return [self._states_task] if self._states_task else []

    def local_changes(self, changes: list[Change]) -> None:
        """The local shard's changes (it calls this): those the other owners must take, sent soon."""
        for c in changes:
            if c.reason == DELETED and self.placement.is_primary(c.id):
                # critical past deregister_after on the lease's owner: the other copies go too
                for member in self.placement.ring.owners(c.id, self.replicas):
                    if member != self.node_id:
                        self._records.setdefault(member, []).append(c.id)
                continue
            if c.reason not in STATUS_REASONS or c.removed:
                continue
            state = self.local.state(c.id)
            if state is None:
                continue
            for member in self.placement.ring.owners(c.id, self.replicas):
                if member != self.node_id:
                    if c.reason == STATUS:  # an admin status is written down: the record itself is newer
                        self._records.setdefault(member, []).append(c.id)
                    self._states.setdefault(member, []).append(state)
        if (self._states or self._records) and (self._states_task is None or self._states_task.done()):
            self._states_task = asyncio.get_running_loop().create_task(self._send_states())

    async def _send_states(self) -> None:
        """Round by round until nothing is left: the records and states queued when a round starts go out
        together, records first, so a member never gets a state before the record it was made at (it would
        drop it, as of another revision); what changes while a round is on its way goes in the next."""
        await asyncio.sleep(0)  # gather what this turn of the loop changed (and let tombstones be written)
        while self._records or self._states:
            records, self._records = self._records, {}
            batches, self._states = self._states, {}
            for member, ids in records.items():
                peer = self.placement.peers.get(member)
                exported = await self.local.export(dict.fromkeys(ids))
                if peer is None or not exported:
                    continue
                try:
                    await peer.restore_records(exported)
                except (ShardUnavailable, SemregError):
                    self.placement.failed(member)  # anti-entropy carries tombstones: the next pass will
            for member, states in batches.items():
                peer = self.placement.peers.get(member)
                if peer is None:
                    continue
                try:
                    await peer.apply_states(states)
                except (ShardUnavailable, SemregError):
                    self.placement.failed(member)  # anti-entropy does not carry statuses: the next change will
