"""The access gate in front of every route: who is calling (tokens), may they (scopes), and how
often (rate limit); a wrong credential is counted and throttled by `access.failures`, a valid one is
admitted whatever others failed. Ownership of instances is checked by the handlers, which know the
instance."""
from __future__ import annotations

import time
from collections.abc import Callable

from semreg.access.failures import FailureThrottle
from semreg.access.ratelimit import RateLimiter, retry_after_s
from semreg.access.tokens import Principal, Tokens
from semreg.errors import SemregError, TooManyRequests
from semreg.http.endpoints import ScopeTable
from semreg.http.responses import JSONResponse
from semreg.work.lane import CALLER


class AccessMiddleware:
    def __init__(self, app, tokens: Tokens, limiter: RateLimiter, scopes: ScopeTable,
                 clock: Callable[[], float] = time.monotonic, failures: FailureThrottle | None = None) -> None:
        self.app = app
        self.failures = failures or FailureThrottle()
        self.tokens = tokens
        self.scopes = scopes
        self.limiter = limiter
        self.clock = clock

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            principal = admit(self.tokens, self.scopes, self.limiter, self.failures, scope["method"], scope["path"],
                              _header(scope, b"authorization"), _client(scope), self.clock())
        except SemregError as exc:
            response = JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)
            if exc.status == 401:
                response.headers["WWW-Authenticate"] = 'Bearer realm="semreg"'
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})["principal"] = principal
        # who asks, for the log line of request work refused (`semreg.work.lane`): the token's name, the address
        CALLER.set(f"{principal.name}@{_client(scope)}" if principal is not None and principal.name else _client(scope))
        await self.app(scope, receive, send)


def admit(tokens: Tokens, scopes: ScopeTable, limiter: RateLimiter, failures: FailureThrottle, method: str, path: str,
          authorization: str | None, client: str, now: float) -> Principal | None:
    """The caller of a request for `method path`, once it may make it: its token known (a wrong one counted
    against `client` and itself), its scope, an unbound token where the route reads every environment, its rate.
    Raises the 401, 403 or 429 otherwise; None for a route open to anyone."""
    needed = scopes.required(method, path)
    if needed is None:
        return None
    principal = failures.authenticate(tokens, authorization, client, now, path)
    principal.require(needed)
    if principal.bound and scopes.every_environment(method, path):
        principal.require_every_environment(path)
    if limiter.enabled:
        refusal = over_rate(limiter, principal.name if tokens.enabled else client, now)
        if refusal is not None:
            raise refusal
    return principal


def over_rate(limiter: RateLimiter, key: str, now: float) -> TooManyRequests | None:
    """The 429 for a caller past its rate (it takes one request's worth when it is not)."""
    wait = limiter.take(key, now)
    if wait <= 0:
        return None
    return TooManyRequests(f"'{key}' is past its rate of {limiter.rate:g} requests a second; retry after the "
                           f"Retry-After header's seconds.", retry_after_s=retry_after_s(wait))


def _header(scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


def _client(scope) -> str:
    client = scope.get("client")
    return client[0] if client else "unknown"
