"""The one JSON response type of the API, and the JSON form of every error a client gets."""
from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from semreg.errors import SemregError

JSON_TYPE = "application/json"


class JSONResponse(Response):
    media_type = JSON_TYPE

    def render(self, content: Any) -> bytes:
        return content if isinstance(content, bytes) else orjson.dumps(content)


def error_response(exc: SemregError) -> JSONResponse:
    """The one JSON form of every error a client gets: `{"error": sentence, ...}` with its status."""
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)
