"""The data directory as RDF (`semreg.storage.at_rest`), written behind the records on a thread of its own, as a
service of a node with a data directory (a store in memory has none: nobody could read it).

Started once the registry is restored, it drops the graphs of ontologies no longer recorded and compares the RDF on
disk with the records; meanwhile every record written is queued for it. Stopped, it writes what is pending (for a
while: the rest is written at the next start) and ends.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from semreg.storage.at_rest import AtRest
from semreg.storage.store import Store


class RdfWriter:
    name = "rdf writer"
    needs = ("registry", "knowledge")

    def __init__(self, store: Store, monotonic: Callable[[], float], recorded: Callable[[], Iterable[str]]) -> None:
        """`recorded()`: the names of the ontologies recorded (read at the start)."""
        self.at_rest = AtRest(store, monotonic)
        self._recorded = recorded
        store.on_written = self.at_rest.records_written

    async def start(self) -> None:
        self.at_rest.keep_ontologies(self._recorded())
        self.at_rest.start()

    async def stop(self) -> None:
        await asyncio.to_thread(self.at_rest.stop)

    def waiting(self) -> str:
        return ""
