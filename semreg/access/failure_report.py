"""Who is failing to authenticate, for an operator: failures by client address for the metrics, with a bounded
number of addresses, and log lines, with a bounded volume.

- **Counts** (`semreg_auth_failures_total{listener, address}`). The `shown` addresses that failed most
  recently are counted by name; when one more address fails, the one whose last failure is the oldest is
  folded into `address="other"` (its count moves there, so the sum over addresses stays the number of
  failures). `refused` counts the failures answered 429 (`semreg_auth_throttled_total{listener}`).
- **Log lines** (logger `semreg.auth`, warnings). `authentication failed` with the listener, the client's
  address, the route, the reason, the credential's fingerprint and the status answered (401 or 429); at most
  one a second per address and `lines_per_s` in all: the failures not logged are counted in the `folded`
  field of their address's next line. `authentication failures throttled` when an address or a credential
  starts being throttled (`kind`), with the seconds until it may fail again, under the same budget in all
  (the lines it leaves out are counted in the next one's `folded`).
"""
from __future__ import annotations

import logging
from collections import OrderedDict
from typing import NamedTuple

from semreg.access.ratelimit import RateLimiter

log = logging.getLogger("semreg.auth")

SHOWN = 20  # addresses named in the metrics
LINES_PER_S = 10.0  # log lines a second about failures, in all
ADDRESS_LINE_EVERY_S = 1.0  # at most one line an address this often
OTHER = "other"
_ALL = ""


class Failure(NamedTuple):
    """One failed authentication: who (`client`, an address), with what (`fingerprint`), why, where."""

    client: str
    fingerprint: str
    reason: str
    route: str


class FailureReport:
    def __init__(self, listener: str, shown: int = SHOWN, lines_per_s: float = LINES_PER_S,
                 max_addresses: int = 10_000) -> None:
        self.listener = listener
        self.shown = max(0, shown)
        self.max_addresses = max(1, max_addresses)
        self.total = 0
        self.refused = 0
        self.other = 0
        self._counts: OrderedDict[str, int] = OrderedDict()  # the most recent last
        self._lines = RateLimiter(lines_per_s, max(1.0, lines_per_s), 1)
        self._logged: OrderedDict[str, tuple[float, int]] = OrderedDict()  # address → (last line at, folded since)
        self._spells_folded = 0

    # -- counts --------------------------------------------------------------------------------------------
    def failed(self, failure: Failure, now: float, status: int) -> None:
        self.total += 1
        if status == 429:
            self.refused += 1
        self._count(failure.client)
        self._line(failure, now, status)

    def _count(self, address: str) -> None:
        counts = self._counts
        counts[address] = counts.get(address, 0) + 1
        counts.move_to_end(address)
        while len(counts) > self.shown:
            _, n = counts.popitem(last=False)
            self.other += n

    def by_address(self) -> list[tuple[str, int]]:
        """(address, failures) for the metrics: the `shown` most recent by name, then `other` when it has any."""
        out = list(self._counts.items())
        return out + [(OTHER, self.other)] if self.other else out

    # -- log lines -----------------------------------------------------------------------------------------
    def _line(self, failure: Failure, now: float, status: int) -> None:
        logged = self._logged
        at, folded = logged.pop(failure.client, (float("-inf"), 0))
        if now - at < ADDRESS_LINE_EVERY_S or self._lines.take(_ALL, now) > 0:
            logged[failure.client] = (at, folded + 1)
        else:
            log.warning("authentication failed", extra={
                "listener": self.listener, "client": failure.client, "route": failure.route,
                "reason": failure.reason, "fingerprint": failure.fingerprint, "status": status, "folded": folded})
            logged[failure.client] = (now, 0)
        if len(logged) > self.max_addresses:
            logged.popitem(last=False)

    def throttled(self, kind: str, failure: Failure, now: float, retry_after_s: int) -> None:
        """An address or a credential (`kind`) starts being throttled by `failure`."""
        if self._lines.take(_ALL, now) > 0:
            self._spells_folded += 1
            return
        log.warning("authentication failures throttled", extra={
            "listener": self.listener, "kind": kind, "client": failure.client, "fingerprint": failure.fingerprint,
            "route": failure.route, "retry_after_s": retry_after_s, "folded": self._spells_folded})
        self._spells_folded = 0

    def tracked(self) -> int:
        """The addresses this report keeps (bounded by `shown` and `max_addresses`)."""
        return len(self._counts) + len(self._logged)
