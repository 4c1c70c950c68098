"""The DNS listener's TCP connections, held by client address, so that no client can shut the others out
(RFC 7766 asks a server to bound its connections and to close the idle ones).

- At most `per_address` from one address: a connection past it is closed at once, and no other is touched.
- At most `most` in all: a newcomer past it takes the place of a connection of the address holding the most,
  the one waiting longest for its next message (one being answered only when that address has none waiting).
  So an address holding many connections loses its own idle ones first, and one holding few is never turned
  away because of the others.
- One deadline at a time: the next message must arrive whole within `read_s` of the connection's opening or
  its last answer (bytes trickling in do not move it: a client sending a byte a second is closed all the
  same), and an answer must be taken by the client within `write_s` (a client that never reads is closed).

A connection is closed by aborting its transport: at once, whatever was left to send dropped. Each refusal,
shedding and timeout is counted; an address is logged the first time one befalls it (again only once it has
held no connection), so that a flood of connections is not a flood of log lines. Time is the injected clock's.
"""
from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from semreg.clock import Cancellable, Clock

log = logging.getLogger("semreg.dns")


@dataclass(frozen=True)
class Limits:
    most: int = 256
    per_address: int = 16
    read_s: float = 10.0
    write_s: float = 10.0


@dataclass(eq=False)
class Connection:
    address: str
    abort: Callable[[], None]
    order: int  # opening order: of two waiting as long, the older is shed
    waiting_since: float  # when it started waiting for its next message
    answering: bool = False
    closed: bool = False
    timer: Cancellable | None = field(default=None, repr=False)


class Connections:
    def __init__(self, clock: Clock, limits: Limits = Limits()) -> None:
        self.clock = clock
        self.limits = limits
        self._by_address: dict[str, list[Connection]] = {}
        self._order = itertools.count()
        self._reported: set[tuple[str, str]] = set()  # (what, address) logged since the address last held none
        self.held = 0
        self.refused = self.shed = self.read_timeouts = self.write_timeouts = 0

    def by_address(self, address: str) -> int:
        return len(self._by_address.get(address, ()))

    def open(self, address: str, abort: Callable[[], None]) -> Connection | None:
        """A new connection from `address` (`abort` closes it at once), waiting for its first message; None when
        its address holds all it may (the caller closes it)."""
        if self.by_address(address) >= self.limits.per_address:
            self.refused += 1
            self._report("refused", address, "a DNS client address holds all the TCP connections it may; its new "
                         "ones are closed", {"per_address": self.limits.per_address})
            return None
        if self.held >= self.limits.most:
            victim = self._victim()
            self.shed += 1
            self._report("shed", victim.address, "the DNS listener holds all the TCP connections it may; this "
                         "address's longest waiting one was closed for a newcomer", {"most": self.limits.most,
                                                                                      "held": self.by_address(victim.address),
                                                                                      "newcomer": address})
            self._end(victim)
        now = self.clock.monotonic()
        conn = Connection(address, abort, next(self._order), now)
        self._by_address.setdefault(address, []).append(conn)
        self.held += 1
        self._deadline(conn, self.limits.read_s, self._read_timeout)
        return conn

    def answering(self, conn: Connection) -> None:
        """A whole message arrived: no deadline while it is answered."""
        conn.answering = True
        self._cancel(conn)

    def writing(self, conn: Connection) -> None:
        """Its answer is being sent: the client has `write_s` to take it."""
        self._deadline(conn, self.limits.write_s, self._write_timeout)

    def waiting(self, conn: Connection) -> None:
        """Its answer was taken: the next message has `read_s` to arrive whole."""
        conn.answering = False
        conn.waiting_since = self.clock.monotonic()
        self._deadline(conn, self.limits.read_s, self._read_timeout)

    def close(self, conn: Connection) -> None:
        """It ended (the client hung up, or it was closed): its place is free."""
        self._cancel(conn)
        if conn.closed:
            return
        conn.closed = True
        held = self._by_address.get(conn.address, [])
        held.remove(conn)
        self.held -= 1
        if not held:
            del self._by_address[conn.address]
            self._reported = {(what, a) for what, a in self._reported if a != conn.address}

    # -- below: deadlines, shedding and reports ---------------------------------------------------------------
    def _victim(self) -> Connection:
        """Of the addresses holding the most, the connection waiting longest (one being answered last)."""
        return max((c for held in self._by_address.values() for c in held),
                   key=lambda c: (self.by_address(c.address), not c.answering, -c.waiting_since, -c.order))

    def _end(self, conn: Connection) -> None:
        self.close(conn)
        conn.abort()

    def _deadline(self, conn: Connection, seconds: float, fire: Callable[[Connection], None]) -> None:
        self._cancel(conn)
        if not conn.closed:
            conn.timer = self.clock.call_at(self.clock.monotonic() + seconds, lambda: fire(conn))

    @staticmethod
    def _cancel(conn: Connection) -> None:
        if conn.timer is not None:
            conn.timer.cancel()
            conn.timer = None

    def _read_timeout(self, conn: Connection) -> None:
        conn.timer = None
        self.read_timeouts += 1
        log.debug("a DNS TCP connection sent no whole message in time; it was closed",
                  extra={"client": conn.address, "timeout_s": self.limits.read_s})
        self._end(conn)

    def _write_timeout(self, conn: Connection) -> None:
        conn.timer = None
        self.write_timeouts += 1
        self._report("unread", conn.address, "a DNS client did not take its answer in time; its connection was "
                     "closed", {"timeout_s": self.limits.write_s})
        self._end(conn)

    def _report(self, what: str, address: str, message: str, extra: dict) -> None:
        if (what, address) not in self._reported:
            self._reported.add((what, address))
            log.warning(message, extra={"client": address, **extra})
