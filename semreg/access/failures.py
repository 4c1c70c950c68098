"""Failed authentications: counted per client address and per credential, throttled, reported, and never in
the way of a valid credential.

A request's credential is looked up first (`Tokens.authenticate`, or the cluster secret's comparison: both
compare SHA-256 digests with `hmac.compare_digest`). A valid one is admitted whatever its address failed
before: a misconfigured client behind the same NAT, proxy or node-local agent costs the others nothing. A
wrong one is a `Failure`, counted against its address and against its credential's fingerprint (a keyed
hash of what was presented, 12 hex digits, the key drawn when the server starts: the same stale token sent
from a whole fleet is one fingerprint, and neither the token nor any part of it is shown). Each may fail
`burst` times at once, and once more every `1 / rate_per_s` seconds after that; while either has spent its
allowance a wrong credential gets 429 with `Retry-After` instead of 401. A request that presents no
credential guesses nothing and is not counted.

Past its allowance a wrong credential is still told apart from a valid one (429, not 200): the throttle
bounds what a failing client costs and makes it seen; the length of a token (at least 16 characters, drawn
at random) is what makes guessing one hopeless.

Who is failing is reported (`semreg.access.failure_report`): failures by address for the metrics, and log
lines bounded in volume. The query processes hand their failures to the server's throttle (`failed`), so
that one address has one count whichever process served it.

    throttle.authenticate(tokens, authorization, client, now, route) -> Principal   (401, 429 or the caller)
    throttle.failed(Failure(client, fingerprint, reason, route), now) -> the 429 to answer, or None (the 401)
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import OrderedDict
from collections.abc import Callable

from semreg.access.failure_report import LINES_PER_S, SHOWN, Failure, FailureReport
from semreg.access.ratelimit import RateLimiter, retry_after_s
from semreg.access.tokens import Principal, Tokens
from semreg.errors import SemregError, TooManyRequests, Unauthorized

FAILURE_BURST = 10  # failures an address (or a credential) may make at once
FAILURE_RATE_PER_S = 1 / 6  # then one more every 6 s (10 a minute)
MAX_TRACKED = 10_000  # addresses, and credentials, whose failures are kept (the least recent forgotten first)
FINGERPRINT_HEX = 12


def fingerprint(key: bytes, credential: str) -> str:
    """A short keyed hash of a presented credential: the same credential, the same fingerprint, under one key."""
    digest = hmac.new(key, credential.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
    return digest[:FINGERPRINT_HEX]


def checked(tokens: Tokens, authorization: str | None, client: str, route: str, key: bytes,
            failed: Callable[[Failure], SemregError | None]) -> Principal:
    """The caller of `authorization`, its credential looked up first; a wrong one is handed to `failed`, whose
    answer (a 429) is raised instead of the 401 when it gives one."""
    try:
        return tokens.authenticate(authorization)
    except Unauthorized as exc:
        if not authorization:
            raise  # no credential: nothing was guessed
        refusal = failed(Failure(client, fingerprint(key, authorization), exc.message, route))
        if refusal is not None:
            raise refusal from None
        raise


class Allowances:
    """The failures each key (an address, a fingerprint) may still make, as token buckets; and which keys are
    in a throttled spell (from the failure that spent their allowance until it is whole again). At most
    `max_keys` of each, the least recent forgotten first."""

    def __init__(self, rate_per_s: float, burst: float, max_keys: int) -> None:
        self.limiter = RateLimiter(rate_per_s, burst, max_keys)
        self._spells: OrderedDict[str, None] = OrderedDict()

    def wait(self, key: str, now: float) -> float:
        return self.limiter.wait(key, now)

    def spend(self, key: str, now: float) -> float:
        """Take one failure's worth; the wait that follows when that starts a throttled spell, else 0."""
        spells, limiter = self._spells, self.limiter
        if key in spells and limiter.level(key, now) >= limiter.burst:
            del spells[key]  # whole again since its last spell
        limiter.take(key, now)
        wait = limiter.wait(key, now)
        if wait <= 0 or key in spells:
            return 0.0
        spells[key] = None
        if len(spells) > limiter.max_keys:
            spells.popitem(last=False)
        return wait

    def __len__(self) -> int:
        return len(self.limiter) + len(self._spells)


class FailureThrottle:
    """The failures of one listener (`public`, or `cluster` for the cluster secret), as the module's doc says."""

    def __init__(self, listener: str = "public", rate_per_s: float = FAILURE_RATE_PER_S,
                 burst: float = FAILURE_BURST, *, max_keys: int = MAX_TRACKED, shown: int = SHOWN,
                 lines_per_s: float = LINES_PER_S) -> None:
        self.listener = listener
        self.key = secrets.token_bytes(16)  # the fingerprints' (the query processes get it with their gate)
        self.addresses = Allowances(rate_per_s, burst, max_keys)
        self.credentials = Allowances(rate_per_s, burst, max_keys)
        self.report = FailureReport(listener, shown, lines_per_s, max_keys)

    def fingerprint(self, credential: str) -> str:
        return fingerprint(self.key, credential)

    def authenticate(self, tokens: Tokens, authorization: str | None, client: str, now: float,
                     route: str = "") -> Principal:
        """The caller of `authorization`; a wrong credential counts against `client` (its address) and itself."""
        return checked(tokens, authorization, client, route, self.key, lambda failure: self.failed(failure, now))

    def failed(self, failure: Failure, now: float) -> TooManyRequests | None:
        """Count `failure`: the 429 to answer while its address or its credential has no failures left, else
        None (answer the 401)."""
        wait = max(self.addresses.wait(failure.client, now), self.credentials.wait(failure.fingerprint, now))
        if wait > 0:
            self.report.failed(failure, now, 429)
            who = f"from {failure.client}" if self.addresses.wait(failure.client, now) > 0 else "with this credential"
            return TooManyRequests(f"too many failed authentications {who}; retry after the Retry-After header's "
                                   f"seconds.", retry_after_s=retry_after_s(wait))
        self.report.failed(failure, now, 401)
        for kind, allowances, key in (("address", self.addresses, failure.client),
                                      ("credential", self.credentials, failure.fingerprint)):
            spell = allowances.spend(key, now)
            if spell > 0:
                self.report.throttled(kind, failure, now, retry_after_s(spell))
        return None

    def tracked(self) -> int:
        """The keys this throttle keeps (bounded by `max_keys` per kind)."""
        return len(self.addresses) + len(self.credentials)
