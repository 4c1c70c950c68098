"""Indexes that move only with the changes their reader may see.

A watchable read answers with an index (`X-Semreg-Index`) that its reader sends back to wait for the next
change. One index for the whole node would move with every environment's writes, and a token bound to
`staging` would count prod's writes by it. So an index is kept per scope, the environments a read covers:

- every environment (`None`): moves with each change, whatever it touched;
- some environments (a read of one, or a token bound to several): the changes that touched one of them,
  plus the changes of everything (a new closure, members that came or went, changes maybe missed), which a
  server holding only those environments counts too;
- no environment (`frozenset()`: the ontologies): the changes of everything.

Each starts from `start` (the clock's wall time in microseconds: never 0, and after a restart beyond any
index given before it) and only grows. A count is kept per environment changed, at most `most` of them: past
that the least recently changed is forgotten, and every environment forgotten or never seen counts as much as
the most any forgotten one had (`floor`), so that no index goes back. The floor moves a reader's index
without a change of its own only once more than `most` environments have changed.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from semreg.registry.selector import ALL

MOST_ENVIRONMENTS = 100_000

Scope = frozenset[str] | None  # the environments a read covers (None: every one)


def scope_of(environment: str) -> Scope:
    """The scope of a read of one environment (`*`: every one)."""
    return None if environment == ALL else frozenset((environment,))


class Indexes:
    def __init__(self, start: int, most: int = MOST_ENVIRONMENTS) -> None:
        self.start = start
        self.every = start  # every environment's
        self.everything = 0  # changes of everything
        self.floor = 0
        self.forgotten = 0  # environments forgotten so far
        self.most = max(1, most)
        self._counts: OrderedDict[str, int] = OrderedDict()  # the most recently changed last

    def of(self, scope: Scope) -> int:
        """The index of a read of `scope`."""
        if scope is None:
            return self.every
        counts, floor = self._counts, self.floor
        return self.start + self.everything + sum(counts.get(e, floor) for e in scope)

    def changed(self, environments: Iterable[str]) -> None:
        """One change, which touched `environments` (each counted once)."""
        self.every += 1
        counts = self._counts
        for environment in set(environments):
            counts[environment] = counts.get(environment, self.floor) + 1
            counts.move_to_end(environment)
        while len(counts) > self.most:
            _, n = counts.popitem(last=False)
            self.floor = max(self.floor, n)
            self.forgotten += 1

    def changed_everything(self) -> None:
        """A change of everything: every scope's index moves."""
        self.every += 1
        self.everything += 1

    def moved(self, scope: Scope, since: int) -> int:
        """The index of `scope` for a result that changed since it was answered at `since`: past `since` even
        when no change of the scope was counted (a partial answer made whole: its reader must see it move)."""
        index = self.of(scope)
        if index > since:
            return index
        if scope is None:
            self.every += 1
        elif scope:
            self.changed(scope)
        else:
            self.changed_everything()
        return self.of(scope)
