"""The node-to-node listener (`--cluster-listen`): the internal API (`semreg.http.internal`) on an app of its
own, never on the public port. Its requests skip the public middleware (metrics, tokens, rate limits): they
carry the cluster secret instead. Wrong secrets are throttled per client address (`SecretFailures`: 429 with
`Retry-After` once an address has failed `FAILURES_ALLOWED` times within `WINDOW_S`) and each one is logged.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

from starlette.applications import Starlette
from starlette.datastructures import State
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from semreg.errors import SemregError, TooManyRequests
from semreg.http.internal import INTERNAL
from semreg.http.responses import JSONResponse, error_response

log = logging.getLogger("semreg.internal")

FAILURES_ALLOWED = 5
WINDOW_S = 60.0
MAX_ADDRESSES = 10_000


class SecretFailures:
    """Wrong cluster secrets by client address: past `allowed` within `window_s`, refused until the oldest
    of them is `window_s` old. Time is `now` (the node's monotonic clock)."""

    def __init__(self, now: Callable[[], float], allowed: int = FAILURES_ALLOWED, window_s: float = WINDOW_S) -> None:
        self.now = now
        self.allowed = allowed
        self.window_s = window_s
        self._failures: dict[str, list[float]] = {}

    def _recent(self, address: str) -> list[float]:
        since = self.now() - self.window_s
        times = [t for t in self._failures.get(address, ()) if t > since]
        if times:
            self._failures[address] = times
        else:
            self._failures.pop(address, None)
        return times

    def check(self, address: str) -> None:
        """TooManyRequests if `address` failed too often lately."""
        times = self._recent(address)
        if len(times) >= self.allowed:
            wait_s = int(times[0] + self.window_s - self.now()) + 1
            raise TooManyRequests("too many node-to-node requests with a wrong cluster secret from this "
                                  "address; wait.", wait_s)

    def failed(self, address: str, path: str) -> None:
        if address not in self._failures and len(self._failures) >= MAX_ADDRESSES:
            for old in list(self._failures):  # forget the addresses whose failures are all old
                self._recent(old)
        self._failures.setdefault(address, []).append(self.now())
        log.warning("a node-to-node request without the cluster secret",
                    extra={"client": address, "path": path, "failures": len(self._failures[address])})


async def _semreg_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SemregError)
    return error_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return JSONResponse({"error": "no such node-to-node route."} if exc.status_code == 404 else
                        {"error": str(exc.detail)}, status_code=exc.status_code)


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.error("unexpected error", exc_info=exc, extra={"path": request.url.path, "method": request.method})
    return JSONResponse({"error": "the node failed to handle this request; its log says why."}, status_code=500)


def cluster_app(state: State, now: Callable[[], float]) -> Starlette:
    """The app the cluster listener serves: the internal routes over the public app's `state` (the node, its
    cluster, the secret), with the failures of wrong secrets counted in `state.secret_failures`."""
    app = Starlette(routes=INTERNAL.routes(), exception_handlers={
        SemregError: _semreg_error, HTTPException: _http_error, Exception: _unexpected})
    state.secret_failures = SecretFailures(now)
    app.state = state
    return app
