"""The web console: static files from the package (`semreg/ui/`) under `/ui/`, and `/` redirecting there.

Nothing is fetched from elsewhere: the page, its modules and the editor bundle ship in the package, and
the Content-Security-Policy says so (scripts, styles and requests to this origin only). The console talks
to the same API as every client, with the token the person signed in with; the files themselves are open
(`/ui` is an open prefix of the access gate) since they hold no data.
"""
from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from semreg.http.responses import JSONResponse
from semreg.rdf import media
from semreg.sparql import queries

UI_DIR = Path(__file__).resolve().parents[1] / "ui"  # semreg/ui
PREFIX = "/ui"
# CodeMirror sets styles on its elements, hence 'unsafe-inline' for styles (never for scripts).
POLICY = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
          "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
HEADERS = [(b"content-security-policy", POLICY.encode()), (b"x-content-type-options", b"nosniff"),
           (b"referrer-policy", b"no-referrer"), (b"cache-control", b"no-cache")]


class _Headers:
    """The console's security headers on every file it serves."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def to_console(request: Request) -> RedirectResponse:
    return RedirectResponse(PREFIX + "/", status_code=307)


async def example_queries(request: Request) -> JSONResponse:
    """The example queries of `queries/`, for the SPARQL view: `[{"name", "query"}]`."""
    return JSONResponse([{"name": name, "query": text} for name, text in queries.examples().items()],
                        headers={"cache-control": "no-cache"})


async def file_types(request: Request) -> JSONResponse:
    """The media type an ontology file is uploaded as, by suffix: the table the client and the CLI use."""
    return JSONResponse(media.FILE_SUFFIXES, headers={"cache-control": "no-cache"})


def routes() -> list[Route | Mount]:
    """`/` → `/ui/`, the example queries, and the console's files (`index.html` for `/ui/`)."""
    return [Route("/", to_console, methods=["GET", "HEAD"]),
            Route(PREFIX + "/queries.json", example_queries, methods=["GET", "HEAD"]),
            Route(PREFIX + "/file-types.json", file_types, methods=["GET", "HEAD"]),
            Mount(PREFIX, app=_Headers(StaticFiles(directory=UI_DIR, html=True)), name="console")]
