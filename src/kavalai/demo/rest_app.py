"""A small bookshop REST API (aiohttp.web) for the demo and the docs; it serves its own ``/openapi.json``.

Run it on a free loopback port for the length of a block::

    async with serve_demo_app() as base_url:    # "http://127.0.0.1:<port>"
        ...

Endpoints: ``GET /books`` (``author``, ``limit``), ``GET /books/{book_id}``, ``POST /books``, and
``GET /stats``, which wants ``Authorization: Bearer <DEMO_TOKEN>``. Each app instance keeps its own books in
memory. Importing this module imports ``aiohttp``; ``import kavalai`` never does.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, Final

from aiohttp import web

__all__ = ["DEMO_TOKEN", "OPENAPI_SPEC", "create_demo_app", "serve_demo_app"]

#: The bearer token ``GET /stats`` accepts (a demo value, not a secret).
DEMO_TOKEN: Final = "demo-token"

_BOOK: Final[dict[str, Any]] = {
    "type": "object",
    "description": "A book in the shop.",
    "properties": {
        "id": {"type": "integer"},
        "title": {"type": "string"},
        "author": {"type": "string"},
        "year": {"type": ["integer", "null"], "description": "Year of first publication."},
    },
    "required": ["id", "title", "author"],
}
_NEW_BOOK: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "minLength": 1},
        "author": {"type": "string", "minLength": 1},
        "year": {"type": ["integer", "null"]},
    },
    "required": ["title", "author"],
}


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


#: The app's OpenAPI 3.1 document, served at ``/openapi.json``.
OPENAPI_SPEC: Final[dict[str, Any]] = {
    "openapi": "3.1.0",
    "info": {"title": "kavalai demo bookshop", "version": "1.0"},
    "components": {
        "schemas": {"Book": _BOOK, "NewBook": _NEW_BOOK},
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    },
    "paths": {
        "/books": {
            "get": {
                "operationId": "listBooks",
                "tags": ["books"],
                "summary": "List the books, optionally by one author.",
                "parameters": [
                    {"name": "author", "in": "query", "schema": {"type": "string"}, "description": "Author name."},
                    {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "default": 10}},
                ],
                "responses": {"200": _json({"type": "array", "items": {"$ref": "#/components/schemas/Book"}})},
            },
            "post": {
                "operationId": "createBook",
                "tags": ["books"],
                "summary": "Add a book to the shop.",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/NewBook"}}},
                },
                "responses": {"201": _json({"$ref": "#/components/schemas/Book"}, "Created")},
            },
        },
        "/books/{book_id}": {
            "get": {
                "operationId": "getBook",
                "tags": ["books"],
                "summary": "Look up one book by id.",
                "parameters": [{"name": "book_id", "in": "path", "required": True, "schema": {"type": "integer"}}],
                "responses": {
                    "200": _json({"$ref": "#/components/schemas/Book"}),
                    "404": {"description": "No such book."},
                },
            }
        },
        "/stats": {
            "get": {
                "operationId": "getStats",
                "tags": ["admin"],
                "summary": "Shop statistics (needs the bearer token).",
                "security": [{"bearer": []}],
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {"books": {"type": "integer"}, "authors": {"type": "integer"}},
                            "required": ["books", "authors"],
                        }
                    )
                },
            }
        },
    },
}


class _Bookshop:
    """The app's handlers and its in-memory books."""

    def __init__(self) -> None:
        self.books: dict[int, dict[str, Any]] = {
            1: {"id": 1, "title": "The Left Hand of Darkness", "author": "Ursula K. Le Guin", "year": 1969},
            2: {"id": 2, "title": "A Wizard of Earthsea", "author": "Ursula K. Le Guin", "year": 1968},
            3: {"id": 3, "title": "Kindred", "author": "Octavia E. Butler", "year": 1979},
        }

    async def list_books(self, request: web.Request) -> web.Response:
        author = request.query.get("author")
        try:
            limit = int(request.query.get("limit", "10"))
        except ValueError:
            return web.json_response({"error": "limit must be an integer"}, status=422)
        found = [book for book in self.books.values() if author is None or book["author"] == author]
        return web.json_response(found[:limit])

    async def get_book(self, request: web.Request) -> web.Response:
        book = self.books.get(int(request.match_info["book_id"]))
        if book is None:
            return web.json_response({"error": f"no book {request.match_info['book_id']}"}, status=404)
        return web.json_response(book)

    async def create_book(self, request: web.Request) -> web.Response:
        try:
            data = await request.json()
        except ValueError:
            return web.json_response({"error": "the body must be JSON"}, status=400)
        if not isinstance(data, dict) or not data.get("title") or not data.get("author"):
            return web.json_response({"error": "title and author are required"}, status=422)
        book_id = max(self.books, default=0) + 1
        book = {"id": book_id, "title": data["title"], "author": data["author"], "year": data.get("year")}
        self.books[book_id] = book
        return web.json_response(book, status=201)

    async def stats(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {DEMO_TOKEN}":
            return web.json_response({"error": "bearer token required"}, status=401)
        authors = {book["author"] for book in self.books.values()}
        return web.json_response({"books": len(self.books), "authors": len(authors)})

    async def openapi(self, request: web.Request) -> web.Response:
        return web.json_response(OPENAPI_SPEC)


def create_demo_app() -> web.Application:
    """A fresh bookshop application (three books to start with)."""
    shop = _Bookshop()
    app = web.Application()
    app.router.add_get("/books", shop.list_books)
    app.router.add_post("/books", shop.create_book)
    app.router.add_get(r"/books/{book_id:\d+}", shop.get_book)
    app.router.add_get("/stats", shop.stats)
    app.router.add_get("/openapi.json", shop.openapi)
    return app


@contextlib.asynccontextmanager
async def serve_demo_app(host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve a fresh bookshop on ``host`` (a free port by default) for the block; yield its base URL."""
    runner = web.AppRunner(create_demo_app(), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound_host, bound_port = runner.addresses[0][:2]
        yield f"http://{bound_host}:{bound_port}"
    finally:
        await runner.cleanup()
