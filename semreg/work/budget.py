"""What one piece of request work may cost: named budgets, checked up front where the cost can be known before
the work starts and counted as it runs where it cannot (Virtuoso refuses a query whose estimated cost passes a
limit before running it; Oxigraph stops one past its timeout). Pure: no clock, no loop.

    Limits      the node's budgets, one number each (`semreg serve --max-...`, see `BUDGETS`)
    Budget      one piece of work's account: `expect(name, n)` refuses work estimated past a budget before it
                starts; `charge(name, n)` counts it as it runs and refuses at the first unit past the budget
    OverBudget  400: the question is too broad for this node; the body names the budget, its limit and flag

A budget is not a rate: it bounds what a single request may make the node do, whatever the data holds, so
that its cost is known before it runs. How long it may take, and where it runs, is the lane's
(`semreg.work.lane`).
"""
from __future__ import annotations

from dataclasses import dataclass, fields

from semreg.errors import BadRequest


@dataclass(frozen=True)
class Kind:
    """One budget: its name in answers and metrics, the flag that sets it, what it counts."""

    name: str
    flag: str
    counts: str


SCORED = "scored"
EXPANDED = "expanded"
WALKED = "walked"
INSTANCES = "instances"

BUDGETS = {b.name: b for b in (
    Kind(SCORED, "--max-scored", "terms scored for closeness in meaning (the `similar` degree), over every "
            "pattern of one question"),
    Kind(EXPANDED, "--max-expanded", "registered terms the question's components reach through the class and "
            "property hierarchies, over every pattern"),
    Kind(WALKED, "--max-walked", "registered tags looked at to find the ones that match, over every pattern"),
    Kind(INSTANCES, "--max-matched", "instances gathered from the matching tags, over every pattern, before "
            "`limit` cuts the answer"),
)}


@dataclass(frozen=True)
class Limits:
    """The node's budgets for one piece of request work (one question, one saved query's check, one expansion).

    The defaults are an order of magnitude above what the heaviest questions of the OWLS-TC 3 benchmark and a
    million-instance registry's broadest ordinary question cost (docs/operations/limits.md), so they refuse only questions
    that would hold the node for seconds."""

    scored: int = 200_000
    expanded: int = 2_000_000
    walked: int = 4_000_000
    instances: int = 4_000_000

    def of(self, name: str) -> int:
        return int(getattr(self, name))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


class OverBudget(BadRequest):
    """The work a request asks for is past one of the node's budgets (400: ask a narrower question)."""

    def __init__(self, name: str, limit: int, spent: int, what: str = "this request") -> None:
        budget = BUDGETS[name]
        super().__init__(f"{what} is too broad for this node: it would take more than {limit:,} {budget.counts} "
                         f"(the {name} budget, {budget.flag}); ask a narrower question.",
                         budget=name, limit=limit, spent=spent)
        self.budget = name


class Budget:
    """One piece of work's account against `limits`. Not shared between threads."""

    __slots__ = ("limits", "spent", "what")

    def __init__(self, limits: Limits, what: str = "this request") -> None:
        self.limits = limits
        self.spent: dict[str, int] = {}
        self.what = what

    def expect(self, name: str, n: int) -> None:
        """Refuse now if `n` more units would pass the budget (nothing is counted)."""
        limit = self.limits.of(name)
        if self.spent.get(name, 0) + n > limit:
            raise OverBudget(name, limit, self.spent.get(name, 0) + n, self.what)

    def charge(self, name: str, n: int = 1) -> None:
        """Count `n` units of work done; past the budget, refuse (the work stops at its caller)."""
        spent = self.spent.get(name, 0) + n
        self.spent[name] = spent
        limit = self.limits.of(name)
        if spent > limit:
            raise OverBudget(name, limit, spent, self.what)
