"""The one error hierarchy of semreg, mapped to HTTP statuses once, in `semreg.http.app` (`semreg.http.responses`).

    SemregError                 base; `status` is the HTTP status it maps to
    ├── BadRequest              400: the client sent something malformed or invalid
    │   └── InvalidTerm         400: a term that is not an IRI or a known CURIE
    ├── Unauthorized            401: no valid token
    ├── Forbidden               403: a valid token without the scope or ownership
    ├── NotFound                404: no such instance, ontology or concept
    ├── NotAcceptable           406: no representation matches `Accept`
    ├── Conflict                409: the change would undo what another part declares
    ├── PayloadTooLarge         413: a body past its limit
    ├── UnsupportedMediaType    415: a body in a media type the route does not take
    ├── TooManyRequests         429: a token past its rate limit
    ├── NotServed               501: a capability this node was started without (`--no-sparql`)
    └── Unavailable             503: nothing eligible, or a time limit passed

The domain raises these with one sentence a person can act on; handlers never build error bodies.

`StopAsked` stands apart: no client sees it. A long step of the start-up (reading a million records, putting
them back) raises it when the server was asked to stop meanwhile, so the stop is not held up to its end.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any


class SemregError(Exception):
    """Base of every error semreg reports to a client."""

    status = 500

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra
        self.headers: dict[str, str] = {}

    def body(self) -> dict[str, Any]:
        return {"error": self.message, **self.extra}

    def __reduce__(self) -> tuple[Callable[..., SemregError], tuple[Any, ...]]:
        # Errors cross from the query processes to the server pickled; keep the extras and headers.
        return (_rebuild, (type(self), self.message, self.extra, self.headers))


def _rebuild(cls: type[SemregError], message: str, extra: dict[str, Any], headers: dict[str, str]) -> SemregError:
    error = cls.__new__(cls)
    SemregError.__init__(error, message, **extra)
    error.headers = dict(headers)
    return error


class BadRequest(SemregError):
    """The request is malformed or a field is invalid."""

    status = 400


class InvalidTerm(BadRequest):
    """A term is neither an absolute IRI nor a CURIE with a known prefix."""


class Unauthorized(SemregError):
    """No token, or a token that is not known."""

    status = 401


class Forbidden(SemregError):
    """A known token without the scope, or not the owner of the instance."""

    status = 403


class NotFound(SemregError):
    """No such resource."""

    status = 404


class NotAcceptable(SemregError):
    """None of the representations the route has matches the `Accept` header."""

    status = 406


class Conflict(SemregError):
    """The change contradicts a declaration the caller did not make (a prefix an ontology declares)."""

    status = 409


class PayloadTooLarge(SemregError):
    """The body is larger than the route's limit."""

    status = 413


class UnsupportedMediaType(SemregError):
    """The body's media type is not one the route accepts."""

    status = 415


class TooManyRequests(SemregError):
    """The caller is past its request rate."""

    status = 429

    def __init__(self, message: str, retry_after_s: int, **extra: Any) -> None:
        super().__init__(message, **extra)
        self.headers["Retry-After"] = str(max(1, retry_after_s))


class NotServed(SemregError):
    """This node was started without what the request needs (`/sparql` with `--no-sparql`, alone)."""

    status = 501


class Unavailable(SemregError):
    """Nothing can serve the request now; `Retry-After` says when to try again."""

    status = 503

    def __init__(self, message: str, retry_after_s: int = 1, **extra: Any) -> None:
        super().__init__(message, **extra)
        self.headers["Retry-After"] = str(max(1, retry_after_s))


class StopAsked(Exception):
    """The server was asked to stop while a long step of its start-up ran: the step gave up."""
