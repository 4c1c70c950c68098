"""Routing by redirect: choose an instance for a discovery query and count the route against it."""
from __future__ import annotations

import logging
from collections.abc import Hashable

from semreg.errors import Unavailable
from semreg.registry import balancer, questions
from semreg.registry.coordinator import Coordinator
from semreg.registry.instances import Instance

log = logging.getLogger("semreg.routing")


class Router:
    """Hands out routes over the coordinator's discovery results (balancing by redirect, not by proxying)."""

    MAX_COUNTERS = 10_000

    def __init__(self, coordinator: Coordinator, verbose: bool = False) -> None:
        self.coordinator = coordinator
        self.verbose = verbose
        self._counters: dict[Hashable, int] = {}  # by question (its key)
        self.routes_by_policy: dict[str, int] = {}

    async def candidates(self, q: questions.Question) -> tuple[list[Instance], list[balancer.Candidate]]:
        """The `up` instances a route for `q` chooses among, ranked, with what the balancer reads of each."""
        topic = await self.coordinator.discover(q)
        instances = [i for i, _ in topic.payload.ranked if i.status == "up"]
        return instances, [balancer.Candidate(i.id, i.reg.weight, i.load, i.routes_since_report, i.reg.capacity,
                                              balancer.priority_of(i.reg.meta)) for i in instances]

    async def preview(self, q: questions.Question, policy: str, limit: bool) -> tuple[Instance | None, list[
            balancer.Candidate]]:
        """The instance a route would go to now, and the candidates, without handing the route out."""
        instances, cands = await self.candidates(q)
        chosen = balancer.choose(policy, cands, limit=limit, counter=self._counters.get(q.key, 0))
        return next((i for i in instances if chosen is not None and i.id == chosen.id), None), cands

    async def route(self, q: questions.Question, policy: str, limit: bool, caller: str | None = None) -> Instance:
        instances, cands = await self.candidates(q)
        counter = self._counters.get(q.key, 0)
        chosen = balancer.choose(policy, cands, limit=limit, counter=counter)
        if self.verbose:
            log.info("route decision", extra={
                "caller": caller, "query": q.text, "policy": policy, "limit": limit,
                "candidates": [{"id": c.id, "effective_load": c.effective_load, "weight": c.weight,
                                "capacity": c.capacity} for c in cands],
                "chosen": chosen.id if chosen else None})
        if chosen is None:
            why = "every eligible instance is at its capacity" if cands else "no instance is up for this pattern"
            raise Unavailable(f"no instance can take this route: {why}.", retry_after_s=1)
        if len(self._counters) >= self.MAX_COUNTERS and q.key not in self._counters:
            self._counters.clear()
        self._counters[q.key] = counter + 1
        inst = next(i for i in instances if i.id == chosen.id)
        await self.coordinator.record_route(inst)
        self.routes_by_policy[policy] = self.routes_by_policy.get(policy, 0) + 1
        return inst
