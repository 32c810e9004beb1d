"""The shipped demo bookshop (aiohttp.web) and the demo's rest:// section."""

from __future__ import annotations

import io

import aiohttp
import pytest

from kavalai import FunctionKernel, HTTPStatusError, RestServer, ServerConnectionError
from kavalai.cli._console import DemoConsole
from kavalai.cli._demo_rest import rest_section
from kavalai.demo.rest_app import OPENAPI_SPEC, serve_demo_app


async def test_the_demo_app_serves_its_spec_and_checks_its_token() -> None:
    async with serve_demo_app() as url, aiohttp.ClientSession() as client:
        async with client.get(f"{url}/openapi.json") as response:
            assert await response.json() == OPENAPI_SPEC
        async with client.get(f"{url}/stats") as response:
            assert response.status == 401


async def test_imported_demo_tools_validate_and_fail_like_any_rest_tool(kernel: FunctionKernel) -> None:
    async with serve_demo_app() as url:
        kernel.register_rest_server(RestServer(name="books", url=url))
        uris = await kernel.register_openapi("books", "/openapi.json")
        assert uris == [
            "rest://books.listBooks",
            "rest://books.createBook",
            "rest://books.getBook",
            "rest://books.getStats",
        ]
        book = await kernel.call_tool("rest://books.getBook", {"book_id": 2})
        assert book.title == "A Wizard of Earthsea"  # type: ignore[attr-defined]
        with pytest.raises(HTTPStatusError) as info:
            await kernel.call_tool("rest://books.getStats")  # no auth configured on this server
        assert info.value.status_code == 401


async def test_rest_section_prints_results_and_keeps_the_app_running(kernel: FunctionKernel) -> None:
    buffer = io.StringIO()
    async with rest_section(kernel, DemoConsole(buffer)) as uris:
        assert "rest://bookshop.listBooks" in uris
        later = await kernel.call_tool("rest://bookshop.listBooks", {"limit": 1})
        assert len(later.result) == 1  # type: ignore[attr-defined]
    text = buffer.getvalue()
    assert "== rest:// tools ==" in text
    assert 'bookshop.book(book_id=\'3\'): BookshopBookOutput({"id":3,"title":"Kindred"' in text
    assert "imported from /openapi.json: rest://bookshop.listBooks, rest://bookshop.createBook" in text
    assert 'bookshop.getStats (bearer auth): BookshopGetStatsOutput({"books":4,"authors":2})' in text
    assert "caught HTTPStatusError (status_code=404): rest://bookshop.book: GET /books/99 answered 404" in text
    with pytest.raises(ServerConnectionError):  # the app stopped with the block
        await kernel.call_tool("rest://bookshop.listBooks")
