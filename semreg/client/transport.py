"""Which registry URL to try next, when to wait, when to give up: pure logic, no I/O.

Shared by `Client` and `AsyncClient`; each drives a `Plan` with its own HTTP library and sleep
function, so the timing rules are written once and tested with a fake clock.

- URLs are tried in order, starting with the one that last answered (sticky, so a client keeps
  talking to the node that works instead of paying for a dead first URL on every call).
- A round tries each URL at most once; between rounds the plan waits an exponential backoff with
  jitter (`backoff_base_s * 2**(round-1)`, capped, then scaled by a random factor in [0.5, 1)), so
  many clients that lost the same node do not come back in lock step.
- Every URL has a circuit breaker: after `failure_threshold` consecutive failures it opens and the URL
  is skipped for `cooldown_s`; then it is half-open: one request may probe it (each probe re-arms the
  cool-down so concurrent callers do not all probe), success closes it, failure keeps it open.
  When every breaker is open, a call fails at once with `Unreachable` instead of waiting on dead nodes.
- Connection failures (nothing sent) are retried for every method; failures after the request went
  out (read timeouts, dropped connections) and 5xx answers only for idempotent requests.
"""
from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from semreg.client.errors import Unreachable

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half-open"


@dataclass(frozen=True)
class RetryPolicy:
    """How hard one call tries. `rounds`: passes over the URLs; the rest as in the module docstring."""

    rounds: int = 3
    backoff_base_s: float = 0.1
    backoff_cap_s: float = 2.0
    failure_threshold: int = 3
    cooldown_s: float = 5.0

    def __post_init__(self) -> None:
        if self.rounds < 1 or self.failure_threshold < 1:
            raise ValueError("rounds and failure_threshold must be at least 1")
        if self.backoff_base_s < 0 or self.backoff_cap_s < 0 or self.cooldown_s < 0:
            raise ValueError("backoff and cool-down times cannot be negative")


def backoff_s(round_no: int, policy: RetryPolicy, rng: random.Random) -> float:
    """The wait before round `round_no` (1 = the first retry round): exponential, capped, jittered."""
    if round_no <= 0:
        return 0.0
    ceiling = min(policy.backoff_cap_s, policy.backoff_base_s * 2 ** (round_no - 1))
    return ceiling * (0.5 + 0.5 * rng.random())


@dataclass
class CircuitBreaker:
    """Consecutive-failure breaker of one URL; times come from the caller's clock (seconds)."""

    threshold: int
    cooldown_s: float
    failures: int = 0
    opened_at: float | None = None

    def state(self, now: float) -> str:
        if self.opened_at is None:
            return CLOSED
        return OPEN if now < self.opened_at + self.cooldown_s else HALF_OPEN

    def allow(self, now: float) -> bool:
        """May a request go to this URL now? A half-open breaker lets one probe through per cool-down."""
        state = self.state(now)
        if state == HALF_OPEN:
            self.opened_at = now
            return True
        return state == CLOSED

    def record_success(self) -> None:
        self.failures = 0
        self.opened_at = None

    def record_failure(self, now: float) -> None:
        self.failures += 1
        if self.opened_at is not None or self.failures >= self.threshold:
            self.opened_at = now

    def reopens_in_s(self, now: float) -> float:
        return 0.0 if self.opened_at is None else max(0.0, self.opened_at + self.cooldown_s - now)


def parse_urls(url: str | Iterable[str]) -> list[str]:
    """One URL, a comma-separated string, or a list → distinct base URLs without a trailing slash."""
    items = url.split(",") if isinstance(url, str) else list(url)
    urls: list[str] = []
    for item in items:
        u = str(item).strip().rstrip("/")
        if not u:
            continue
        if "://" not in u:
            u = "http://" + u
        if u not in urls:
            urls.append(u)
    if not urls:
        raise ValueError("give at least one registry URL, e.g. http://127.0.0.1:8080")
    return urls


@dataclass(frozen=True)
class Attempt:
    url: str
    round_no: int
    delay_s: float  # wait this long before sending


class Transport:
    """The URL list with one breaker each, and which URL answered last. Thread-safe."""

    def __init__(self, urls: Sequence[str], policy: RetryPolicy = RetryPolicy(),
                 clock: Callable[[], float] = time.monotonic, rng: random.Random | None = None) -> None:
        self.urls = list(urls)
        self.policy = policy
        self.clock = clock
        self.rng = rng or random.Random()
        self.breakers = {u: CircuitBreaker(policy.failure_threshold, policy.cooldown_s) for u in self.urls}
        self.preferred = self.urls[0]
        self.lock = threading.Lock()

    def order(self) -> list[str]:
        i = self.urls.index(self.preferred)
        return self.urls[i:] + self.urls[:i]

    def plan(self, idempotent: bool) -> Plan:
        return Plan(self, idempotent)

    def state(self, url: str) -> str:
        return self.breakers[url].state(self.clock())


@dataclass
class Plan:
    """The attempts of one call. Drive it: `next()` → send → `failed(...)` or `answered(...)`."""

    transport: Transport
    idempotent: bool
    round_no: int = 0
    tried: set[str] = field(default_factory=set)
    errors: list[tuple[str, str]] = field(default_factory=list)
    last_response: Any = None  # the last 5xx answer, raised as the server's error if nothing better comes
    stop: bool = False

    def next(self) -> Attempt | None:
        """The next URL to try (with the wait before it), or None when the call has run out of tries."""
        t = self.transport
        if self.stop:
            return None
        with t.lock:
            now = t.clock()
            while self.round_no < t.policy.rounds:
                for url in t.order():
                    if url not in self.tried and t.breakers[url].allow(now):
                        self.tried.add(url)
                        first_of_round = len(self.tried) == 1
                        delay = backoff_s(self.round_no, t.policy, t.rng) if first_of_round else 0.0
                        return Attempt(url, self.round_no, delay)
                if not self.tried and self.round_no == 0:
                    return None  # every breaker is open: fail fast
                self.round_no += 1
                self.tried = set()
                if all(t.breakers[u].state(now) == OPEN for u in t.urls):
                    return None
        return None

    def failed(self, attempt: Attempt, reason: str, sent: bool) -> None:
        """The request to `attempt.url` failed without an answer; `sent`: it may have reached the server."""
        t = self.transport
        with t.lock:
            t.breakers[attempt.url].record_failure(t.clock())
        self.errors.append((attempt.url, reason))
        if sent and not self.idempotent:
            self.stop = True  # the server may have acted on it: retrying could do it twice

    def answered(self, attempt: Attempt, status: int, response: Any, final_statuses: Iterable[int] = ()) -> bool:
        """An HTTP answer came back; True if it is the call's answer, False to try again elsewhere."""
        t = self.transport
        server_failed = status >= 500 and status not in final_statuses
        with t.lock:
            if server_failed:
                t.breakers[attempt.url].record_failure(t.clock())
            else:
                t.breakers[attempt.url].record_success()
                t.preferred = attempt.url
        if not server_failed:
            return True
        self.errors.append((attempt.url, f"HTTP {status}"))
        self.last_response = response
        return not self.idempotent

    def unreachable(self) -> Unreachable:
        t = self.transport
        if not self.errors:
            now = t.clock()
            wait = min(b.reopens_in_s(now) for b in t.breakers.values())
            return Unreachable(f"every registry URL is failing ({', '.join(t.urls)}); their circuits are open, "
                               f"the next try is allowed in {wait:.1f} s.", retry_after=wait)
        last = "; ".join(f"{u}: {r}" for u, r in self.errors[-len(t.urls):])
        return Unreachable(f"no registry answered after {len(self.errors)} attempt(s): {last}.", self.errors)
