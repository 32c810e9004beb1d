"""The demo's ``rest://`` section: a local bookshop app, a hand-written tool, tools from its OpenAPI spec, auth."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from kavalai import FunctionKernel
from kavalai.adapters.rest import BearerAuth, RestServer
from kavalai.cli._console import DemoConsole
from kavalai.errors import HTTPStatusError

__all__ = ["rest_section"]

_BOOK_ID = {
    "type": "object",
    "properties": {"book_id": {"type": "integer", "description": "The book's id."}},
    "required": ["book_id"],
}
_BOOK = {
    "type": "object",
    "properties": {"id": {"type": "integer"}, "title": {"type": "string"}, "author": {"type": "string"}},
    "required": ["id", "title", "author"],
}


@contextlib.asynccontextmanager
async def rest_section(kernel: FunctionKernel, out: DemoConsole) -> AsyncIterator[list[str]]:
    """Start the demo bookshop, register it as REST server ``bookshop`` and call its tools.

    Yields the ``rest://`` URIs registered; the app keeps answering until the block exits, so later sections
    (an agent, a workflow) can call the same tools.
    """
    from kavalai.demo.rest_app import DEMO_TOKEN, serve_demo_app  # the demo's app: imported when it runs

    out.heading("rest:// tools")
    async with serve_demo_app() as base_url:
        out.line(f"demo bookshop app (aiohttp) listening on {base_url}")
        kernel.register_rest_server(
            RestServer(name="bookshop", url=base_url, timeout=10, auth=BearerAuth(token=DEMO_TOKEN))
        )
        uris = [
            kernel.register_rest_tool(
                "bookshop",
                "book",
                "GET",
                _BOOK_ID,
                _BOOK,
                "Look up one book by id (registered by hand).",
                path="/books/{book_id}",
            )
        ]
        out.show("bookshop.book(book_id='3')", await kernel.call_tool("rest://bookshop.book", {"book_id": "3"}))
        imported = await kernel.register_openapi("bookshop", "/openapi.json", exclude=["getBook"])
        uris += imported
        out.line(f"imported from /openapi.json: {', '.join(imported)}")
        books = await kernel.call_tool("rest://bookshop.listBooks", {"author": "Ursula K. Le Guin"})
        out.show("bookshop.listBooks(author='Ursula K. Le Guin')", [book.title for book in books.result])  # type: ignore[attr-defined]
        created = await kernel.call_tool(
            "rest://bookshop.createBook", {"title": "Parable of the Sower", "author": "Octavia E. Butler", "year": 1993}
        )
        out.show("bookshop.createBook", created)
        out.show("bookshop.getStats (bearer auth)", await kernel.call_tool("rest://bookshop.getStats"))
        try:
            await kernel.call_tool("rest://bookshop.book", {"book_id": 99})
        except HTTPStatusError as exc:
            out.line(f"caught {type(exc).__name__} (status_code={exc.status_code}): {exc}")
        yield uris
