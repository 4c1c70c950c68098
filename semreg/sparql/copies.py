"""A query process's copy of the visible graphs, as a worker holds it: what it takes from the stream, and
how it catches up before a query.

    MemoryCopy       the in-memory copy forked from the template's, brought up to date by applying the
                     changes the server sends after the fork (`("changes", ...)`, `("ticket", n)`)
    CheckpointCopy   a checkpoint of the replica on disk, opened read-only (`semreg.sparql.checkpoints`):
                     catching up is opening the newer checkpoint the server sends (`("checkpoint", seq,
                     path, ticket)`), and saying so (`("opened", seq)`), so the server may remove the old one

Both say which ticket they hold everything up to (`ticket`: a query waits until it reaches what the page
says was acknowledged), and move `generation` whenever what `store` answers may have changed (the result
cache's key).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyoxigraph as ox

from semreg.sparql import replica

Checkpoint = tuple[int, str, int]  # (seq, path, ticket): every change up to `ticket` is in it


class MemoryCopy:
    """Changes kept unapplied until a query needs them (`catch_up`), or until `backlog` grows too long."""

    def __init__(self, store: ox.Store, ticket: int) -> None:
        self.store = store
        self.ticket = ticket  # the last ticket received: every change at or below it is in `deferred` or applied
        self.generation = 0
        self.deferred: list[Any] = []

    def take(self, message: tuple) -> bool:
        """Whether `message` was the copy's to take."""
        kind = message[0]
        if kind == "changes":
            self.deferred.append(message[1])
        elif kind == "ticket":
            self.ticket = message[1]
        else:
            return False
        return True

    @property
    def backlog(self) -> int:
        return len(self.deferred)

    def catch_up(self) -> None:
        for changes in self.deferred:
            replica.apply(self.store, changes)
            self.generation += 1
        self.deferred.clear()


class CheckpointCopy:
    """A read-only open of the newest checkpoint the server sent; `say` tells the server which one is open."""

    def __init__(self, checkpoint: Checkpoint, say: Callable[[tuple], None]) -> None:
        self.say = say
        self.seq, path, self.ticket = checkpoint
        self.store = ox.Store.read_only(path)
        self.generation = self.seq
        self.next: Checkpoint | None = None
        say(("opened", self.seq))

    def take(self, message: tuple) -> bool:
        if message[0] != "checkpoint":
            return False
        _, seq, path, ticket = message
        if seq > self.seq and (self.next is None or seq > self.next[0]):
            self.next = (seq, path, ticket)
            self.ticket = max(self.ticket, ticket)
        return True

    backlog = 0  # nothing waits to be applied: a newer checkpoint is opened when a query needs it

    def catch_up(self) -> None:
        nxt, self.next = self.next, None
        if nxt is None:
            return
        self.store = ox.Store.read_only(nxt[1])  # the old one closes as its last reference goes
        self.seq, self.generation = nxt[0], nxt[0]
        self.say(("opened", self.seq))
