"""``kavalai serve``'s listings pass through as their server sent them: tools, resources, templates and prompts keep
their title, annotations, icons and ``_meta``; a rendered prompt keeps its resource link's title and size, a resource
read its contents' ``_meta``. Only the served name (or URI) differs.

The backend is a real stdio MCP server (``tests/servers/mcp_listed.py``); the host is the official SDK's client, in
either era.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from tests.serve.test_relay import ROOT, _backend, _served

from kavalai import FunctionKernel

BACKEND = StdioServerParameters(command=sys.executable, args=["-m", "tests.servers.mcp_listed"], cwd=str(ROOT))


@pytest.fixture(params=["legacy", "auto"])
async def kernel(request: pytest.FixtureRequest) -> AsyncIterator[FunctionKernel]:
    kernel = FunctionKernel()
    kernel.register_mcp_server(_backend("tests.servers.mcp_listed", "listed", protocol=request.param))
    yield kernel
    await kernel.close()


def _wire(item: Any, *served: str) -> dict[str, Any]:
    """An item's wire fields but the served name or URI (and the gateway's own input schema)."""
    fields: dict[str, Any] = item.model_dump(by_alias=True, exclude_none=True)
    for key in (*served, "inputSchema", "resultType"):
        fields.pop(key, None)
    meta = fields.get("_meta") or {}
    meta.pop("io.modelcontextprotocol/serverInfo", None)  # stamped on each response by the SDK in the 2026-07-28 era
    if "_meta" in fields and not meta:
        del fields["_meta"]
    return fields


async def _everything(client: Client) -> dict[str, Any]:
    return {
        "tools": [_wire(t, "name", "description") for t in (await client.list_tools()).tools],
        "resources": [_wire(r, "uri") for r in (await client.list_resources()).resources],
        "templates": [_wire(t, "uriTemplate") for t in (await client.list_resource_templates()).resource_templates],
        "prompts": [_wire(p, "name") for p in (await client.list_prompts()).prompts],
    }


@pytest.mark.parametrize("host_era", ["legacy", "auto"])
async def test_listings_keep_every_field_their_server_sent(kernel: FunctionKernel, host_era: str) -> None:
    async with Client(stdio_client(BACKEND), mode="legacy") as direct:
        expected = await _everything(direct)
        prompt = await direct.get_prompt("brief", {"topic": "tea"})
        read = await direct.read_resource("notes://first")
    async with Client(await _served(kernel), mode=host_era) as client:
        served = await _everything(client)
        tools = (await client.list_tools()).tools
        resources = (await client.list_resources()).resources
        served_prompt = await client.get_prompt("mcp_listed_brief", {"topic": "tea"})
        served_read = await client.read_resource("mcp://listed/notes://first")
    assert expected["tools"][0]["title"] == "Look it up"  # the backend's title, not the URI
    assert expected["resources"][0]["_meta"] == {"example.com/owner": "listing-tests"}
    assert served == expected
    assert [t.name for t in tools] == ["mcp_listed_lookup"]
    assert [str(r.uri) for r in resources] == ["mcp://listed/notes://first"]
    assert _wire(served_prompt) == _wire(prompt)
    [link] = [m.content for m in served_prompt.messages if m.content.type == "resource_link"]
    assert (link.title, link.size) == ("The first note", 5)
    [contents] = served_read.contents
    assert str(contents.uri) == "mcp://listed/notes://first"
    assert _wire(contents, "uri") == _wire(read.contents[0], "uri")
    assert contents.meta == {"example.com/owner": "listing-tests"}


async def test_own_names_list_them_as_their_server_does(kernel: FunctionKernel) -> None:
    async with Client(stdio_client(BACKEND), mode="legacy") as direct:
        tool = (await direct.list_tools()).tools[0]
        template = (await direct.list_resource_templates()).resource_templates[0]
    async with Client(await _served(kernel, names="own"), mode="legacy") as client:
        [served_tool] = (await client.list_tools()).tools
        [served_template] = (await client.list_resource_templates()).resource_templates
    assert _wire(served_tool) == _wire(tool)
    assert served_tool.name == "lookup"
    assert served_template.model_dump(by_alias=True) == template.model_dump(by_alias=True)
