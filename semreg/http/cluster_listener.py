"""The node-to-node listener (`--cluster-listen`): the internal API (`semreg.http.internal`) on an app of its
own, never on the public port. Its requests skip the public middleware (metrics, tokens, rate limits): they
carry the cluster secret instead. The right secret is always admitted; wrong ones are counted and throttled
per client address and per secret shown (`semreg.access.failures`, listener `cluster`: `SECRET_FAILURE_BURST`
at once, then one every `1 / SECRET_FAILURE_RATE_PER_S` seconds; past that 429 with `Retry-After`), and
reported as the public port's failures are.
"""
from __future__ import annotations

import logging

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from semreg.access.failures import FailureThrottle
from semreg.errors import SemregError
from semreg.http.internal import INTERNAL
from semreg.http.responses import JSONResponse, error_response
from semreg.http.state import AppState

log = logging.getLogger("semreg.internal")

SECRET_FAILURE_BURST = 5
SECRET_FAILURE_RATE_PER_S = 1 / 12  # then one more every 12 s (5 a minute)


def secret_failures(shown: int, lines_per_s: float) -> FailureThrottle:
    """The throttle of wrong cluster secrets (`shown` addresses named in the metrics, `lines_per_s` log lines)."""
    return FailureThrottle("cluster", SECRET_FAILURE_RATE_PER_S, SECRET_FAILURE_BURST, shown=shown,
                           lines_per_s=lines_per_s)


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


def cluster_app(state: AppState) -> Starlette:
    """The app the cluster listener serves: the internal routes over the public app's `state` (the shard, the
    cluster, the secret), the failures of wrong secrets counted by `state.secret_failures`."""
    app = Starlette(routes=INTERNAL.routes(), exception_handlers={
        SemregError: _semreg_error, HTTPException: _http_error, Exception: _unexpected})
    app.state.semreg = state
    return app
