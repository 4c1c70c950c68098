"""Routing by redirect: choose an instance for a discovery query and count the route against it."""
from __future__ import annotations

import logging

from semreg import balancer, discovery
from semreg.errors import Unavailable
from semreg.instances import Instance
from semreg.node import Node

log = logging.getLogger("semreg.routing")


class Router:
    """Hands out routes over a node's discovery results (balancing by redirect, not by proxying)."""

    MAX_COUNTERS = 10_000

    def __init__(self, node: Node) -> None:
        self.node = node
        self._counters: dict[tuple, int] = {}
        self.routes_by_policy: dict[str, int] = {}

    def route(self, q: discovery.DiscoverQuery, policy: str, limit: bool, caller: str | None = None) -> Instance:
        topic = self.node.discover_topic(q)
        instances = [i for i in topic.payload.ranked if i.status == "up"]
        cands = [balancer.Candidate(i.id, i.reg.weight, i.load, i.routes_since_report, i.reg.capacity,
                                    balancer.priority_of(i.reg.meta)) for i in instances]
        counter = self._counters.get(q.key, 0)
        chosen = balancer.choose(policy, cands, limit=limit, counter=counter)
        if self.node.settings.verbose_routing:
            log.info("route decision", extra={
                "caller": caller, "query": q.tag.text, "policy": policy, "limit": limit,
                "candidates": [{"id": c.id, "effective_load": c.effective_load, "weight": c.weight,
                                "capacity": c.capacity} for c in cands],
                "chosen": chosen.id if chosen else None})
        if chosen is None:
            why = "every eligible instance is at its capacity" if cands else "no instance is up for this pattern"
            raise Unavailable(f"no instance can take this route: {why}.", retry_after_s=1)
        if len(self._counters) >= self.MAX_COUNTERS and q.key not in self._counters:
            self._counters.clear()
        self._counters[q.key] = counter + 1
        inst = self.node.registry.instances[chosen.id]
        inst.routes_since_report += 1
        self.routes_by_policy[policy] = self.routes_by_policy.get(policy, 0) + 1
        return inst
