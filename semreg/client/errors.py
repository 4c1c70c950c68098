"""What the client raises. One small tree, so callers can catch as broadly as they like:

    SemregClientError           base: anything the client could not do
    ├── ApiError                the registry answered 4xx/5xx; `status`, `message` (its `error` sentence), `body`
    │   ├── NotFound            404: no such instance, ontology, concept or prefix
    │   └── NoInstanceAvailable 503 from `/v1/route`: nothing eligible now; `retry_after` seconds
    └── Unreachable             every registry URL failed (connection errors, timeouts, open circuits)

and one warning (Python's `warnings`), for what the registry accepted but doubts:

    UnknownTermWarning          a tag or query names a term no uploaded ontology knows (a misspelling?)
"""
from __future__ import annotations

from typing import Any


class SemregClientError(Exception):
    """Base of every error the semreg client raises."""


class ApiError(SemregClientError):
    """The registry answered with a 4xx or 5xx status; `message` is its own sentence."""

    def __init__(self, status: int, message: str, body: Any = None, url: str | None = None) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.body = body
        self.url = url


class NotFound(ApiError):
    """404: the instance, ontology, concept or prefix does not exist."""


class NoInstanceAvailable(ApiError):
    """503 from routing: no instance is eligible now; try again after `retry_after` seconds."""

    def __init__(self, status: int, message: str, body: Any = None, url: str | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(status, message, body, url)
        self.retry_after = retry_after


class Unreachable(SemregClientError):
    """No registry URL answered; `errors` lists `(url, reason)` for each failed attempt."""

    def __init__(self, message: str, errors: list[tuple[str, str]] | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.errors = list(errors or [])
        self.retry_after = retry_after


class UnknownTermWarning(UserWarning):
    """A registration or query names a term no uploaded ontology knows, so it matches only itself: the
    registry's sentence, with the known terms close to it ("did you mean ex:Livro?")."""


def warn_unknown_terms(body: Any) -> None:
    """One `UnknownTermWarning` per warning in an answer of the registry."""
    import warnings

    for warning in (body.get("warnings") or []) if isinstance(body, dict) else []:
        if isinstance(warning, dict) and isinstance(warning.get("message"), str):
            warnings.warn(warning["message"], UnknownTermWarning, stacklevel=2)
