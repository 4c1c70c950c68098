"""The DNS answers' `Resolver` over a node: a saved query's routable instances through the coordinator (the
discovery `GET /v1/queries/NAME/discover` answers, so any node of a ring answers the same), and one
instance as its owners hold it."""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from semreg.errors import BadRequest, NotFound
from semreg.knowledge.knowledge import Knowledge
from semreg.registry.coordinator import Coordinator
from semreg.registry.discovery import DiscoverQuery
from semreg.registry.saved import discovery_of
from semreg.registry.selector import Selector, environment_problem
from semreg.registry.targets import Target, target_of, targets_of


class Directory:
    def __init__(self, coordinator: Coordinator, knowledge: Knowledge) -> None:
        self.coordinator = coordinator
        self.knowledge = knowledge
        self._questions: dict[tuple[str, str | None], tuple[int, int, DiscoverQuery]] = {}

    def question(self, name: str, environment: str | None) -> DiscoverQuery | None:
        """The discovery a saved query asks (in `environment`, when given), parsed once per change of the saved
        queries or the prefixes; None when there is no such query or environment."""
        queries = self.knowledge.queries
        saved = queries.by_name.get(name)
        if saved is None or (environment is not None and environment_problem(environment)):
            return None
        key = (name, environment)
        versions = (queries.version, self.knowledge.prefixes.version)
        cached = self._questions.get(key)
        if cached is not None and cached[:2] == versions:
            return cached[2]
        try:
            q = discovery_of(saved, self.knowledge.prefixes)
        except BadRequest:
            return None  # saved under prefixes of another time: it asks nothing now
        if environment is not None:
            q = dataclasses.replace(q, selector=Selector(environment, q.selector.meta))
        if len(self._questions) > 10_000:
            self._questions.clear()
        self._questions[key] = (*versions, q)
        return q

    async def query(self, name: str, environment: str | None) -> Sequence[Target] | None:
        q = self.question(name, environment)
        if q is None:
            return None
        topic = await self.coordinator.discover(q)
        return targets_of(topic.payload)

    async def instance(self, instance_id: str) -> Target | None:
        try:
            return target_of(await self.coordinator.get(instance_id))
        except (NotFound, BadRequest):
            return None
