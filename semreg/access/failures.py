"""Failed authentications, throttled per client address, so that guessing tokens costs time.

Each address may fail `burst` times at once, and once more every `1 / rate_per_s` seconds after that.
While its allowance is spent, every request from it that presents a token gets 429 with `Retry-After`
*before* the token is looked at, so a right guess past the limit cannot be told from a wrong one. A
request that presents no token guesses nothing and is not counted. Each failure is logged (a warning
with the client's address and why, never the token), and so is an address running out of allowance.

    throttle.authenticate(tokens, authorization, client, now) -> Principal   (401, 429 or the caller)
"""
from __future__ import annotations

import logging

from semreg.access.ratelimit import RateLimiter, retry_after_s
from semreg.access.tokens import Principal, Tokens
from semreg.errors import TooManyRequests, Unauthorized

log = logging.getLogger("semreg.auth")

FAILURE_BURST = 10  # failures an address may make at once
FAILURE_RATE_PER_S = 1 / 6  # then one more every 6 s (10 a minute)


class FailureThrottle:
    def __init__(self, rate_per_s: float = FAILURE_RATE_PER_S, burst: float = FAILURE_BURST) -> None:
        self.limiter = RateLimiter(rate_per_s, burst)

    def authenticate(self, tokens: Tokens, authorization: str | None, client: str, now: float) -> Principal:
        """The caller of `authorization`, counting a failure against `client` (its address)."""
        if not tokens.enabled or not authorization:
            return tokens.authenticate(authorization)
        self.check(client, now)
        try:
            return tokens.authenticate(authorization)
        except Unauthorized as exc:
            self.failed(client, now, str(exc))
            raise

    def check(self, client: str, now: float) -> None:
        """429 while `client` has no failures left."""
        wait = self.limiter.wait(client, now)
        if wait > 0:
            raise TooManyRequests(f"too many failed authentications from {client}; retry after the Retry-After "
                                  f"header's seconds.", retry_after_s=retry_after_s(wait))

    def failed(self, client: str, now: float, reason: str) -> None:
        self.limiter.take(client, now)
        spent = self.limiter.wait(client, now) > 0
        log.warning("authentication failed", extra={"client": client, "reason": reason, "throttled": spent})
