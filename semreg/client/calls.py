"""The pieces of a call that do not depend on sync or async I/O: the request description, request
bodies, how an answer becomes a value or an error, and the state of a blocking watch.
"""
from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import httpx

from semreg.client.errors import ApiError, NoInstanceAvailable, NotFound, SemregClientError
from semreg.rdf import media

IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})

Progress = Callable[[int, int], None]  # (bytes sent so far, total bytes)


class FileBody:
    """A file streamed in chunks (never read whole), reporting progress; re-readable for retries."""

    def __init__(self, path: Path, progress: Progress | None = None, chunk_size: int = 64 * 1024) -> None:
        self.path = Path(path)
        self.size = os.path.getsize(self.path)
        self.progress = progress
        self.chunk_size = chunk_size

    def __iter__(self) -> Iterator[bytes]:
        sent = 0
        with open(self.path, "rb") as f:
            while chunk := f.read(self.chunk_size):
                sent += len(chunk)
                yield chunk
                if self.progress is not None:
                    self.progress(sent, self.size)

    async def aiter(self) -> AsyncIterator[bytes]:
        for chunk in self:  # local file reads are short; not worth a thread per chunk
            yield chunk


@dataclass(frozen=True)
class Call:
    """One HTTP request to the registry, relative to whichever base URL the transport picks."""

    method: str
    path: str
    params: Mapping[str, Any] | None = None
    json: Any = None
    content: bytes | FileBody | None = None
    data: Mapping[str, str] | None = None  # a form body
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float | None = None  # None: the client's timeout
    idempotent: bool | None = None  # None: decided by the method
    final_statuses: frozenset[int] = frozenset()  # 5xx answers that are the answer, not a node failure

    @property
    def is_idempotent(self) -> bool:
        return self.method in IDEMPOTENT_METHODS if self.idempotent is None else self.idempotent

    def request_kwargs(self, asynchronous: bool) -> dict[str, Any]:
        kw: dict[str, Any] = {"params": clean(self.params) if self.params else None, "headers": dict(self.headers)}
        if self.json is not None:
            kw["json"] = self.json
        elif self.data is not None:
            kw["data"] = self.data
        elif isinstance(self.content, FileBody):
            kw["content"] = self.content.aiter() if asynchronous else iter(self.content)
            kw["headers"]["Content-Length"] = str(self.content.size)
        elif self.content is not None:
            kw["content"] = self.content
        return kw


def clean(params: Mapping[str, Any]) -> dict[str, str]:
    """Query parameters without the unset ones; lists become comma lists (`match=exact,narrower`)."""
    out = {}
    for k, v in params.items():
        if v is None:
            continue
        if isinstance(v, (list, tuple, set, frozenset)):
            v = ",".join(str(x) for x in v)
        out[k] = str(v)
    return out


def describe_transport_error(exc: httpx.TransportError) -> tuple[str, bool] | None:
    """`(reason, sent)` for a network failure worth another URL, or None for a local mistake.

    `sent` is False only when the connection was never made, so the server cannot have seen the request.
    """
    reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
        return reason, False
    if isinstance(exc, (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)):
        return reason, True
    return None


def local_error(exc: httpx.HTTPError) -> SemregClientError:
    return SemregClientError(f"the request could not be made: {type(exc).__name__}: {exc}")


def checked(response: httpx.Response, call: Call) -> httpx.Response:
    """The response, or the `ApiError` its 4xx/5xx status stands for."""
    if response.status_code >= 400:
        raise error_from(response, call.path)
    return response


def error_from(response: httpx.Response, path: str = "") -> ApiError:
    """The `ApiError` for a 4xx/5xx answer, carrying the server's one-sentence `error`."""
    body: Any
    try:
        body = response.json()
    except ValueError:
        body = response.text
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        message = body["error"]
    else:
        message = (body.strip()[:300] if isinstance(body, str) else "") or response.reason_phrase or "error"
    try:
        url: str | None = str(response.request.url)
    except RuntimeError:  # a response built by hand, in tests
        url = None
    status = response.status_code
    if status == 404:
        return NotFound(status, message, body, url)
    if status == 503 and (path == "/v1/route" or (path.startswith("/v1/queries/") and path.endswith("/route"))):
        return NoInstanceAvailable(status, message, body, url, retry_after=retry_after_s(response))
    return ApiError(status, message, body, url)


def retry_after_s(response: httpx.Response) -> float | None:
    raw = response.headers.get("retry-after")
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


def json_or_none(response: httpx.Response) -> Any:
    return response.json() if response.content else None


class RouteURL(str):
    """The URL `route` chose: a `str`, plus the instance id and whether it came from the stale cache."""

    instance_id: str | None
    stale: bool

    def __new__(cls, url: str, instance_id: str | None = None, stale: bool = False) -> Self:
        self = super().__new__(cls, url)
        self.instance_id = instance_id
        self.stale = stale
        return self


class WatchState:
    """Where a blocking watch stands: the last index seen, and which read to make next.

    The first read does not block. Then `?index=N&wait=` blocks until the result changes; a new index
    means a new result to yield, the same index a wait that ended without a change, and an index that
    went backwards (a registry that lost its state, or another node) a fresh read at once.
    """

    def __init__(self, wait_s: float) -> None:
        self.wait_s = wait_s
        self.index: int | None = None
        self.latest: Any = None  # the last body read, changed or not (its loads and leases may be newer)

    def params(self) -> dict[str, str]:
        if self.index is None:
            return {}
        return {"index": str(self.index), "wait": f"{self.wait_s:g}s"}

    def timeout_s(self, base_s: float) -> float:
        return base_s + (self.wait_s if self.index is not None else 0.0)

    def update(self, response: httpx.Response) -> Any | None:
        """The result to yield after this answer, or None when nothing changed."""
        raw = response.headers.get("x-semreg-index")
        try:
            index = int(raw) if raw is not None else None
        except ValueError:
            index = None
        if index is None or index <= 0:
            raise SemregClientError(f"the registry sent no usable X-Semreg-Index header ({raw!r}); it cannot "
                                    f"be watched.")
        self.latest = response.json()
        if self.index is None:
            self.index = index
            return self.latest
        if index < self.index:
            self.index = None
            return None
        if index == self.index:
            return None
        self.index = index
        return self.latest


def instance_body(service: str, address: str, port: int, tags: Any = None, ttl: float = 30, weight: int = 1,
                  capacity: int | None = None, meta: Mapping[str, Any] | None = None,
                  check: Mapping[str, Any] | None = None, scheme: str = "http",
                  deregister_after: float | None = None, environment: str | None = None) -> dict[str, Any]:
    """The JSON of a registration, with only the fields that were given (the server fills defaults)."""
    body: dict[str, Any] = {"service": service, "address": address, "port": port, "scheme": scheme,
                            "tags": list(tags or []), "ttl": ttl, "weight": weight}
    if capacity is not None:
        body["capacity"] = capacity
    if meta:
        body["meta"] = {str(k): v if isinstance(v, (bool, int, float)) else str(v) for k, v in meta.items()}
    if check:
        body["check"] = dict(check)
    if deregister_after is not None:
        body["deregister_after"] = deregister_after
    if environment is not None:
        body["environment"] = environment
    return body


def rdf_content_type(data: Any, content_type: str | None) -> str:
    """The media type of an ontology upload: as given, else guessed from a path's suffix, else Turtle."""
    if content_type:
        return content_type
    if isinstance(data, Path):
        guessed = media.of_file(data)
        if guessed is None:
            raise SemregClientError(f"cannot tell the RDF format of '{data.name}' from its suffix; pass "
                                    f"content_type (one of {', '.join(sorted(set(media.FILE_SUFFIXES.values())))}).")
        return guessed
    return media.TURTLE
