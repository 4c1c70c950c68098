"""What every node holds whole (`semreg.knowledge.knowledge`: ontologies, prefixes, the hierarchy, saved queries)
as a service: started, it restores them from the records and preloads the `--ontology` files (an unchanged one is
not reasoned again), then settles the heap while it is still small. Its graphs and the closure are published to
the SPARQL replica, the data directory's RDF, both or neither (`published_to`).
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from semreg import heap
from semreg.config import Settings
from semreg.knowledge.knowledge import Knowledge
from semreg.knowledge.ontologies import Published, PublishedTo, Unpublished
from semreg.node.writer import StoreWriter

log = logging.getLogger("semreg.node")


class KnowledgeService:
    name = "knowledge"

    def __init__(self, settings: Settings, writer: StoreWriter, sinks: list[Published], *, needs: tuple[str, ...],
                 since: Callable[[], int]) -> None:
        """`since()`: the milliseconds since the node's start-up began."""
        self.knowledge = Knowledge(writer.store, writer.write, published_to(sinks), strict_terms=settings.strict_terms,
                                   xml_depth=settings.ontology_xml_depth)
        self.needs = needs
        self._files = settings.ontologies
        self._since = since

    async def start(self) -> None:
        knowledge = self.knowledge
        await knowledge.open(self._files)
        log.info("ontologies restored", extra={"ontologies": len(knowledge.ontologies),
                                               "concepts": knowledge.hierarchy.size, "ms": self._since()})
        heap.settle()  # what the ontologies' restore left, collected while the heap is still small

    async def stop(self) -> None:
        return None

    def waiting(self) -> str:
        return ""


def published_to(sinks: list[Published]) -> Published:
    """Where the ontologies' graphs and the closure go: the SPARQL replica, the data directory's RDF, both or
    neither."""
    if not sinks:
        return Unpublished()
    return sinks[0] if len(sinks) == 1 else PublishedTo(*sinks)
