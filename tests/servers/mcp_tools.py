"""A real MCP server written with the SDK's ``MCPServer`` API, used by the ``mcp://`` tests.

Run it over stdio (``python -m tests.servers.mcp_tools``) or serve :func:`build_server` over HTTP. Its tools
cover what the adapter must handle: typed arguments with optional fields, an output schema, an image, an
``isError`` result, a slow tool (which records its cancellation in a file), a tool that makes the process
exit, one that spawns a child process, and one that changes the tool list.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from pydantic import BaseModel, Field

#: One red pixel, PNG.
PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


class Weather(BaseModel):
    """A weather report."""

    city: str
    celsius: float
    conditions: list[str]


def build_server(name: str = "tools") -> MCPServer:
    """The test server with all its tools."""
    server = MCPServer(name, log_level="WARNING")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @server.tool(structured_output=False)
    def describe(
        name: Annotated[str, Field(description="Who to describe.")],
        age: int | None = None,
        mood: Literal["happy", "sad"] = "happy",
        tags: list[str] | None = None,
    ) -> str:
        """Describe a person; reports which optional arguments arrived."""
        return f"name={name} age={age} mood={mood} tags={tags} sent={sorted(_sent_keys(name, age, mood, tags))}"

    @server.tool()
    def weather(city: str) -> Weather:
        """Today's weather in a city (made up)."""
        return Weather(city=city, celsius=21.5, conditions=["sunny", "breezy"])

    @server.tool(structured_output=False)
    def numbers(count: int) -> str:
        """A JSON array of numbers, as text."""
        return str(list(range(count)))

    @server.tool()
    def pixel() -> Image:
        """A one-pixel PNG image."""
        return Image(data=PIXEL_PNG, format="png")

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails with the given reason."""
        raise ToolError(f"refused: {reason}")

    @server.tool()
    async def sleep(seconds: float, marker: str | None = None) -> str:
        """Sleep; write 'started' to the marker file first, and 'cancelled' when cancelled."""
        if marker:
            _mark(marker, "started")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            if marker:
                _mark(marker, "cancelled")
            raise
        return "slept"

    @server.tool()
    def noisy(lines: int) -> int:
        """Write many lines to stderr (more than a pipe holds), then answer."""
        for i in range(lines):
            print(f"noise line {i:06d} " + "." * 40, file=sys.stderr)
        sys.stderr.flush()
        return lines

    @server.tool()
    def crash(code: int = 3) -> str:
        """Write to stderr and exit the process at once."""
        print(f"crashing on purpose with code {code}", file=sys.stderr, flush=True)
        os._exit(code)

    @server.tool()
    def spawn_child(detach: bool = False) -> int:
        """Start a long-lived child process (it would outlive a careless client) and return its pid; ``detach``
        puts it in a session and process group of its own, as daemons and browser launchers do."""
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=detach,
        )
        return child.pid

    @server.tool()
    def header(name: str, ctx: Context) -> str:
        """The value of an HTTP request header ('' over stdio or when absent)."""
        return (ctx.headers or {}).get(name, "")

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Add a tool named 'extra' and tell the client that the tool list changed."""
        if "extra" not in {tool.name for tool in await server.list_tools()}:
            server.add_tool(lambda: "extra!", name="extra", description="Added at run time.")
        if ctx.request_context.protocol_version >= "2026-07-28":
            await ctx.notify_tools_changed()  # to the client's subscriptions/listen stream
        else:
            await ctx.session.send_tool_list_changed()  # on the session, as the handshake era does
        return "grown"

    return server


def _mark(marker: str, text: str) -> None:
    Path(marker).write_text(text)


def _sent_keys(name: str, age: int | None, mood: str, tags: list[str] | None) -> set[str]:
    sent = {"name"}
    if age is not None:
        sent.add("age")
    if tags is not None:
        sent.add("tags")
    return sent


if __name__ == "__main__":
    if secret := os.environ.get("MCP_TEST_STARTUP_FAIL"):
        print("starting up", file=sys.stderr)
        print(f"configuration error: bad token {secret}", file=sys.stderr, flush=True)
        sys.exit(7)
    build_server().run()
