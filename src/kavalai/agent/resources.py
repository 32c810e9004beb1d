"""MCP resources for agents: with ``Agent(resources=["server", ...])`` the model gets a ``read_resource`` tool.

Its description lists what each named server offers (resources, up to 50 per server, and resource templates), so
the model can read the documents a server exposes without a tool per document. Reads go through
``kernel.read_resource``; text comes back as text, binary content as base64, both under the agent's output budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from kavalai import FunctionKernel

__all__ = ["READ_RESOURCE", "read_resource_result", "resource_reader_spec"]

#: The name the model calls to read a resource (handled by the agent, not the kernel).
READ_RESOURCE: Final = "read_resource"
_LISTED: Final = 50


async def resource_reader_spec(kernel: FunctionKernel, servers: Sequence[str]) -> dict[str, Any]:
    """The description of ``read_resource`` for ``servers``, listing what each offers (connecting them)."""
    lines = []
    for server in servers:
        resources = await kernel.list_resources(server)
        templates = await kernel.list_resource_templates(server)
        shown = [f"  - {r.uri}" + (f": {r.description}" if r.description else "") for r in resources[:_LISTED]]
        if len(resources) > _LISTED:
            shown.append(f"  - ... and {len(resources) - _LISTED} more")
        shown += [f"  - {t.uri_template} (a template: fill in the braces)" for t in templates]
        lines.append(f"Server {server!r}:\n" + ("\n".join(shown) if shown else "  (no resources)"))
    return {
        "name": READ_RESOURCE,
        "description": "Read a resource (a document or data) of an MCP server by its URI.\n\n" + "\n\n".join(lines),
        "inputSchema": {
            "type": "object",
            "properties": {
                "server": {"type": "string", "enum": list(servers), "description": "The server."},
                "uri": {"type": "string", "description": "The resource's URI, as listed (templates filled in)."},
            },
            "required": ["server", "uri"],
        },
    }


async def read_resource_result(kernel: FunctionKernel, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Answer a ``read_resource`` call: the resource's contents (text, or base64 ``blob``)."""
    contents = await kernel.read_resource(str(arguments.get("server", "")), str(arguments.get("uri", "")))
    return {"contents": [item.model_dump(by_alias=True, exclude_none=True) for item in contents]}
