"""Who calls the Consul API, and where: `X-Consul-Token` (or `Authorization: Bearer`) is a semreg token, with its
scopes (a read needs `read`, a change `write`) and its bound environments; a Consul namespace (`ns`, or
`X-Consul-Namespace`) is a semreg environment (`default` is both's default); the datacenter (`dc`) is this
ring, named by `--cluster`: another one is refused, never answered with this one's services.

Wrong credentials are counted and throttled with the public port's (`semreg.access.failures`), and the rate
limit is the same per token. Consul answers a missing or unknown token with 403 (its clients read that as
"permission denied"), so this listener does too.
"""
from __future__ import annotations

from starlette.requests import Request

from semreg.access.tokens import OPEN, READ, Principal
from semreg.errors import BadRequest, Forbidden, Unauthorized
from semreg.http.gate import over_rate
from semreg.http.state import app_state
from semreg.registry.selector import ALL, DEFAULT, Selector, environment_problem
from semreg.work.lane import CALLER

TOKEN_HEADER = "x-consul-token"
NAMESPACE_HEADER = "x-consul-namespace"
ADMITTED = "semreg.consul.admitted"  # the caller a read was admitted as


def admit(request: Request, scope: str | None) -> Principal:
    """The caller, once it may make a request needing `scope` (None: open to anyone, as Consul's status is):
    kept on the request for the handlers' checks of ownership and environments. A request naming another
    datacenter is refused once the caller is known. A request is admitted once: a second call answers the
    caller the first found (its rate counted once)."""
    admitted = request.scope.get(ADMITTED)
    if admitted is not None and scope == READ:
        return admitted
    state = app_state(request)
    principal = OPEN
    client = request.client.host if request.client else "unknown"
    if scope is not None:
        token = request.headers.get(TOKEN_HEADER)
        authorization = f"Bearer {token}" if token else request.headers.get("authorization")
        now = state.clock.monotonic()
        try:
            principal = state.auth_failures.authenticate(state.tokens, authorization, client, now, request.scope["path"])
        except Unauthorized as exc:
            raise Forbidden(f"ACL not found: {exc.message}") from None
        principal.require(scope)
        if state.limiter.enabled:
            refusal = over_rate(state.limiter, principal.name if state.tokens.enabled else client, now)
            if refusal is not None:
                raise refusal
    request.state.principal = principal
    if scope == READ:
        request.scope[ADMITTED] = principal
    # who asks, for the log line of request work refused (`semreg.work.lane`), as the public port says it
    CALLER.set(f"{principal.name}@{client}" if principal is not OPEN else client)
    check_datacenter(request, state.settings.cluster)
    return principal


def environment(request: Request) -> str:
    """The environment a request reads or writes: its Consul namespace (`*` reads every one)."""
    name = request.query_params.get("ns") or request.headers.get(NAMESPACE_HEADER) or DEFAULT
    if name != ALL:
        problem = environment_problem(name)
        if problem is not None:
            raise BadRequest(f"ns: {problem}")
    return name


def selector(request: Request, principal: Principal) -> Selector:
    """The read's environment, in one the token may read (403 otherwise)."""
    name = environment(request)
    principal.require_environment(name)
    return Selector(name)


def check_datacenter(request: Request, datacenter: str) -> None:
    """A `dc` naming another datacenter is refused: this node answers for its own ring only."""
    raw = request.scope["query_string"]
    if b"dc" not in raw and b"%" not in raw:  # no `dc` among the parameters: nothing to parse (the hot reads)
        return
    dc = request.query_params.get("dc")
    if dc and dc != datacenter:
        raise BadRequest(f"No path to datacenter: this is the datacenter {datacenter}, not {dc[:64]}.")
