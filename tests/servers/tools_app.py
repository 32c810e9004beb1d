"""A real Starlette application for the bundled ``http`` and ``web`` tool tests.

Serve it with ``tests.servers.uvicorn_server.serve(create_app())``. Routes:

- ``/json``: a JSON body and an ``X-Tools-Test`` header.
- ``/echo`` (any method): what the request carried, as JSON (method, query, headers, body).
- ``/text``: a plain-text body in ISO-8859-1.
- ``/status/{code}``: that status with a short text body.
- ``/redirect?to=URL&status=302``: a redirect to ``to``.
- ``/chain/{n}``: redirects ``n`` times, then answers ``{"done": true}``.
- ``/stream?size=N``: ``N`` bytes streamed without a ``Content-Length``.
- ``/sized?size=N``: ``N`` bytes with a ``Content-Length``.
- ``/page.html``: an HTML article with navigation, scripts and styles around it.
- ``/binary``: ``application/octet-stream`` bytes.
- ``/gzip?size=N``: ``N`` zero bytes, gzip-compressed on the wire (``Content-Encoding: gzip``).
- ``/slow``: starts a body, then stalls until the client goes away (Starlette cancels the stream on disconnect).

``app.state.hits`` lists the path of every request received, so a test can show a refused request never arrived.
"""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

__all__ = ["PAGE_HTML", "create_app"]

PAGE_HTML = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>  Guarded   Fetching  </title>
  <style>body { color: red; }</style>
  <script>window.secret = "SCRIPT-NOISE";</script>
</head>
<body>
  <nav><a href="/home">NAV-NOISE Home</a> <a href="/about">About</a></nav>
  <main>
    <h1>Fetching pages safely</h1>
    <p>The guard checks <strong>every</strong> address, see <a href="/docs/guard">the guard docs</a>.</p>
    <h2>Steps</h2>
    <ul><li>resolve the host</li><li>check the address</li></ul>
    <script>console.log("SCRIPT-NOISE-2")</script>
    <form action="/search"><input name="q" value="FORM-NOISE"><button>Go</button></form>
    <p><a href="javascript:alert(1)">no script links</a></p>
  </main>
  <footer>FOOTER-NOISE</footer>
</body>
</html>
"""


async def json_route(request: Request) -> Response:
    return JSONResponse({"hello": "world", "items": [1, 2, 3]}, headers={"X-Tools-Test": "yes"})


async def echo(request: Request) -> Response:
    body = await request.body()
    return JSONResponse(
        {
            "method": request.method,
            "path": request.url.path,
            "query": [[key, value] for key, value in request.query_params.multi_items()],
            "headers": dict(request.headers.items()),
            "body": body.decode("utf-8", errors="replace"),
        }
    )


async def text(request: Request) -> Response:
    return Response("caf\u00e9 au lait".encode("latin-1"), media_type="text/plain; charset=iso-8859-1")


async def status(request: Request) -> Response:
    code = int(request.path_params["code"])
    return PlainTextResponse(f"status {code}", status_code=code)


async def redirect(request: Request) -> Response:
    code = int(request.query_params.get("status", "302"))
    return RedirectResponse(request.query_params["to"], status_code=code)


async def chain(request: Request) -> Response:
    remaining = int(request.path_params["n"])
    if remaining <= 0:
        return JSONResponse({"done": True})
    return RedirectResponse(f"/chain/{remaining - 1}", status_code=302)


async def stream(request: Request) -> Response:
    size = int(request.query_params["size"])

    async def chunks() -> AsyncIterator[bytes]:
        sent = 0
        while sent < size:
            part = min(16 * 1024, size - sent)
            sent += part
            yield b"x" * part

    return StreamingResponse(chunks(), media_type="text/plain")


async def sized(request: Request) -> Response:
    return PlainTextResponse("y" * int(request.query_params["size"]))


async def gzipped(request: Request) -> Response:
    body = gzip.compress(b"0" * int(request.query_params["size"]), compresslevel=9)
    return Response(body, media_type="text/plain", headers={"Content-Encoding": "gzip"})


async def page(request: Request) -> Response:
    return Response(PAGE_HTML, media_type="text/html; charset=utf-8")


async def binary(request: Request) -> Response:
    return Response(bytes(range(256)), media_type="application/octet-stream")


class _Recorder:
    """Records each HTTP request's path in ``app.state.hits`` before the app sees it."""

    def __init__(self, app: Starlette) -> None:
        self.app = app
        self.state = app.state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.state.hits.append(scope["path"])
        await self.app(scope, receive, send)


async def slow(request: Request) -> Response:
    async def stall() -> AsyncIterator[bytes]:
        yield b"partial"
        await asyncio.Event().wait()

    return StreamingResponse(stall(), media_type="text/plain")


def create_app() -> _Recorder:
    """The application (wrapped to record hits); each call builds a fresh one."""
    app = Starlette(
        routes=[
            Route("/json", json_route),
            Route("/echo", echo, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
            Route("/text", text),
            Route("/status/{code:int}", status),
            Route("/redirect", redirect, methods=["GET", "POST"]),
            Route("/chain/{n:int}", chain),
            Route("/stream", stream),
            Route("/sized", sized),
            Route("/page.html", page),
            Route("/binary", binary),
            Route("/gzip", gzipped),
            Route("/slow", slow),
        ]
    )
    app.state.hits = []
    return _Recorder(app)
