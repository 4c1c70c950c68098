"""Revision slots: every live member of a ring holds one of `SLOTS`, and no two hold the same.

A revision ends in its maker's slot (`semreg.registry.revisions`), so two members never hand out the same
revision, whatever their clocks say. A member claims its slot when it joins, before it takes a write: the
key `/semreg/{cluster}/slots/{slot}` is created only if it does not exist (one etcd transaction), on the
member's lease, so the slot is free again when the member leaves or its lease lapses, and a member that
joins again claims one afresh. It asks first for the slot its id hashes to (what a node alone uses), then
for a free one at random, so that two members joining at once seldom race for the same one, and a race
costs one more round.
"""
from __future__ import annotations

import logging
import random

from semreg.cluster.kv import KV
from semreg.registry.revisions import SLOTS, hashed_slot

log = logging.getLogger("semreg.membership")


class SlotsExhausted(RuntimeError):
    """Every slot is held: the ring has as many live members as revisions can tell apart."""


def prefix_of(cluster: str) -> str:
    return f"/semreg/{cluster}/slots/"


async def claim(kv: KV, cluster: str, node_id: str, lease: int) -> int:
    """A slot held by no live member, now held by `node_id` on `lease`."""
    prefix = prefix_of(cluster)
    candidate, taken = hashed_slot(node_id), None
    pick = random.Random(f"{node_id}/{lease}")
    while True:
        if await kv.create(f"{prefix}{candidate:04d}", node_id.encode(), lease):
            log.info("claimed a revision slot", extra={"node": node_id, "slot": candidate})
            return candidate
        if taken is None:
            _, held = await kv.get_prefix(prefix)
            taken = {int(key[len(prefix):]) for key, _ in held if key[len(prefix):].isdigit()}
        taken.add(candidate)
        free = [slot for slot in range(SLOTS) if slot not in taken]
        if not free:
            raise SlotsExhausted(f"all {SLOTS} revision slots are held: a ring has at most {SLOTS} live members")
        candidate = pick.choice(free)
