"""``kavalai serve`` answers a long listing in pages (``src/kavalai/serve/_pages.py``): the official SDK's client
follows ``nextCursor`` to the end, and a cursor the gateway did not give is refused."""

from __future__ import annotations

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError

from kavalai import FunctionKernel, pythontool
from kavalai.serve import build_mcp_server
from kavalai.serve._pages import PAGE_SIZE, page


@pythontool
def _echo(text: str) -> str:
    """Echo."""
    return text


def test_pages_cover_every_item_once() -> None:
    items = list(range(7))
    first, cursor = page(items, None, size=3)
    seen = list(first)
    while cursor is not None:
        more, cursor = page(items, types.PaginatedRequestParams(cursor=cursor), size=3)
        seen += more
    assert (first, seen) == ([0, 1, 2], items)
    assert page([], None) == ([], None)


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_a_long_tool_listing_is_paged_and_a_foreign_cursor_refused(era: str) -> None:
    kernel = FunctionKernel()
    for i in range(PAGE_SIZE + 2):
        kernel.register_python_tool(f"echo{i:04d}", _echo)
    async with Client(build_mcp_server(kernel), mode=era) as client:
        first = await client.list_tools()
        assert len(first.tools) == PAGE_SIZE
        assert first.next_cursor is not None
        rest = await client.list_tools(cursor=first.next_cursor)
        assert rest.next_cursor is None
        with pytest.raises(MCPError, match="Unknown cursor: not-ours"):
            await client.list_tools(cursor="not-ours")
    names = [tool.name for tool in (*first.tools, *rest.tools)]
    assert sorted(names) == sorted(f"python_echo{i:04d}" for i in range(PAGE_SIZE + 2))
