"""Reading a request: bounded bodies, JSON bodies, and typed query parameters (400 naming the parameter)."""
from __future__ import annotations

from typing import Any

from starlette.requests import Request

from semreg.config import parse_duration_s
from semreg.errors import BadRequest, PayloadTooLarge, UnsupportedMediaType
from semreg.http.responses import JSON_TYPE
from semreg.registry.query_params import bool_value, int_value


async def read_body(request: Request, limit_bytes: int, what: str = "the request body") -> bytes:
    """The whole body. 413 as soon as it is known to pass `limit_bytes`: from `Content-Length` before
    reading anything, else while streaming, never buffering more than the limit. A `Content-Length`
    that is not a number (RFC 9110: digits only) is a 400."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not (declared.isascii() and declared.isdigit()):
            raise BadRequest("the Content-Length header is not a number.")
        if int(declared) > limit_bytes:
            raise PayloadTooLarge(f"{what} is {int(declared)} bytes; the limit is {limit_bytes} bytes.",
                                  limit_bytes=limit_bytes)
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit_bytes:
            raise PayloadTooLarge(f"{what} is larger than the limit of {limit_bytes} bytes.", limit_bytes=limit_bytes)
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: Request, limit_bytes: int) -> Any:
    from semreg.http.schemas import parse_json

    content_type = request.headers.get("content-type")
    if content_type:
        media = content_type.split(";", 1)[0].strip().lower()
        if media != JSON_TYPE and not media.endswith("+json"):
            raise UnsupportedMediaType(f"this route takes application/json, not '{media}'.")
    return parse_json(await read_body(request, limit_bytes, "the JSON body"))


def int_param(request: Request, name: str, low: int, high: int) -> int | None:
    return int_value(request.query_params, name, low, high)


def bool_param(request: Request, name: str, default: bool) -> bool:
    return bool_value(request.query_params, name, default)


def watch_params(request: Request, cap_s: float) -> tuple[int | None, float]:
    """`index` and `wait` of a blocking read; wait defaults to the cap and is bounded by it."""
    index = int_param(request, "index", 0, 2**63 - 1)
    raw = request.query_params.get("wait")
    wait = cap_s
    if raw:
        try:
            wait = parse_duration_s(raw)
        except ValueError:
            raise BadRequest(f"wait must be a duration such as 30s, 500ms or 2m, not '{raw[:50]}'.",
                             field="wait") from None
    if raw and index is None:
        raise BadRequest("wait needs index: pass the X-Semreg-Index of your last read.", field="wait")
    return index, min(wait, cap_s)
