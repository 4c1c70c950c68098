"""The distinct tags of a ring's instances, counted again only when some member's tags moved.

The overview's distinct tags in a ring are the size of the union of the members' tag hashes
(`semreg.registry.environment_counts.Tally`): 8 bytes a distinct tag a member holds, ~8 MB a member at a
million instances of random tags, sent and united for every summary. Yet a summary is mostly asked again
because a status or a count moved, not the tags: each member names its set of distinct tags with a state
(`Tally.tags_state`: which process, and its `tags_version`), and a coordinator that holds a member's hashes
for that state says so when it asks (`known`); the member then sends none (`Tally.tags` None), and the union
is counted again only when the states it was counted from changed.

Kept per environments asked, for the last `KEPT` of them: each member's hashes (as received, packed) and the
count with the states it was made from.
"""
from __future__ import annotations

import asyncio
from collections.abc import Mapping

from semreg.registry.environment_counts import Tally, unpacked

KEPT = 8  # environments asked whose members' hashes are kept
UNITED_AT_ONCE = 20_000  # hashes united on the event loop; more, in a worker thread

Environments = frozenset[str] | None


class TagUnion:
    def __init__(self) -> None:
        self._hashes: dict[Environments, dict[str, tuple[str, bytes]]] = {}  # member → (state, hashes)
        self._counted: dict[Environments, tuple[frozenset[tuple[str, str]], int]] = {}

    def known(self, environments: Environments, member: str) -> str | None:
        """The state of `member`'s tags held here for `environments`, if any."""
        held = self._hashes.get(environments, {}).get(member)
        return None if held is None else held[0]

    def missing(self, environments: Environments, tallies: Mapping[str, Tally]) -> list[str]:
        """The members that sent no hashes for a state this no longer holds (forgotten meanwhile, by a
        summary of other environments): they are asked again, without `known`."""
        held = self._hashes.get(environments, {})
        return [m for m, t in tallies.items() if t.tags is None and held.get(m, ("", b""))[0] != t.tags_state]

    async def count(self, environments: Environments, tallies: Mapping[str, Tally]) -> int:
        """How many distinct tags the members' tallies hold between them (each one sent its hashes, or none for
        the state held here: see `missing`)."""
        held = self._hashes.pop(environments, {})
        self._hashes[environments] = held  # the newest asked last: the first ones are forgotten first
        while len(self._hashes) > KEPT:
            forgotten = next(iter(self._hashes))
            del self._hashes[forgotten]
            self._counted.pop(forgotten, None)
        for member in list(held):
            if member not in tallies:
                del held[member]  # it did not answer, or left: counted without it
        for member, tally in tallies.items():
            if tally.tags is not None:
                held[member] = (tally.tags_state, tally.tags)
        states = frozenset((m, state) for m, (state, _) in held.items())
        counted = self._counted.get(environments)
        if counted is not None and counted[0] == states and all(state for _, state in states):
            return counted[1]
        parts = [hashes for _, hashes in held.values()]
        size = sum(map(len, parts)) // 8
        n = distinct(parts) if size <= UNITED_AT_ONCE else await asyncio.to_thread(distinct, parts)
        if environments in self._hashes:  # not forgotten while the union was made
            self._counted[environments] = (states, n)
        return n


def distinct(parts: list[bytes]) -> int:
    """How many distinct hashes the packed parts hold between them."""
    if len(parts) == 1:
        return len(parts[0]) // 8  # a member's hashes are distinct already
    united: set[int] = set()
    for part in parts:
        united.update(unpacked(part))
    return len(united)
