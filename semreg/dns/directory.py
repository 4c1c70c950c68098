"""The DNS answers' `Resolver` over a node: a saved query's routable instances through the coordinator (the
discovery `GET /v1/queries/NAME/discover` answers, so any node of a ring answers the same), and one
instance as its owners hold it."""
from __future__ import annotations

from semreg.dns.answers import Found
from semreg.errors import BadRequest, NotFound
from semreg.knowledge.knowledge import Knowledge
from semreg.registry.coordinator import Coordinator
from semreg.registry.questions import Question
from semreg.registry.saved import Questions
from semreg.registry.targets import Target, target_of, targets_of


class Directory:
    def __init__(self, coordinator: Coordinator, knowledge: Knowledge, questions: Questions) -> None:
        self.coordinator = coordinator
        self.knowledge = knowledge
        self.questions = questions

    def question(self, name: str, environment: str | None) -> Question | None:
        """The discovery a saved query asks (in `environment`, when given); None when there is no such query,
        no such environment name, or the query names a prefix no longer known."""
        saved = self.knowledge.queries.by_name.get(name)
        if saved is None:
            return None
        try:
            return self.questions.of(saved, environment)
        except BadRequest:
            return None

    async def query(self, name: str, environment: str | None) -> Found | None:
        q = self.question(name, environment)
        if q is None:
            return None
        topic = await self.coordinator.discover(q)
        # the topic's index moves whenever its answer changes; the question with it (a saved query replaced)
        return Found((q, topic.index), lambda: targets_of(topic.payload))

    async def instance(self, instance_id: str) -> Target | None:
        try:
            return target_of(await self.coordinator.get(instance_id))
        except (NotFound, BadRequest):
            return None
