"""A small MCP server that ships with kavalai, for ``kavalai demo`` and for trying ``mcp://`` tools offline.

Run it over stdio with ``python -m kavalai.demo.mcp_server``, or let a kernel start it::

    kernel.register_mcp_server(demo_server_config())
    await kernel.call_tool("mcp://demo.text_stats", {"text": "to be or not to be"})

Its tools: ``text_stats`` (structured output), ``slugify`` (text), ``to_fahrenheit`` (a number, and an error
below absolute zero). It also offers a resource (``demo://about``), a resource template (``demo://units/{unit}``)
and a prompt (``summarize``). This module imports the ``mcp`` SDK; ``import kavalai`` never imports it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from kavalai.adapters.mcp import McpServer

__all__ = ["TextStats", "build_demo_server", "demo_server_config"]

_ABSOLUTE_ZERO = -273.15


class TextStats(BaseModel):
    """Counts of a text."""

    words: int = Field(description="How many words.")
    characters: int = Field(description="How many characters, spaces included.")
    longest_word: str = Field(description="The longest word (the first, on a tie).")


def build_demo_server() -> MCPServer:
    """The demo server: its three tools, a resource, a resource template and a prompt."""
    server = MCPServer("kavalai-demo", log_level="WARNING")

    @server.tool()
    def text_stats(text: str) -> TextStats:
        """Count the words and characters of a text and find its longest word."""
        words = text.split()
        return TextStats(words=len(words), characters=len(text), longest_word=max(words, key=len, default=""))

    @server.tool(structured_output=False)
    def slugify(text: str, separator: str = "-") -> str:
        """Turn a title into a URL slug: lower case, words joined by the separator."""
        return separator.join(re.findall(r"[a-z0-9]+", text.lower()))

    @server.tool()
    def to_fahrenheit(celsius: float) -> float:
        """Convert degrees Celsius to degrees Fahrenheit."""
        if celsius < _ABSOLUTE_ZERO:
            raise ToolError(f"{celsius} °C is below absolute zero ({_ABSOLUTE_ZERO} °C)")
        return round(celsius * 9 / 5 + 32, 2)

    @server.resource("demo://about", name="about", description="What this server is.", mime_type="text/plain")
    def about() -> str:
        return "The kavalai demo MCP server: three tools, a resource, a template and a prompt."

    @server.resource("demo://units/{unit}", name="unit", description="What a temperature unit is.")
    def unit(unit: str) -> str:
        return _UNITS.get(unit.lower(), f"{unit}: not a unit this server knows ({', '.join(_UNITS)})")

    @server.prompt(description="Ask for a summary of a text in a given number of words.")
    def summarize(text: str, words: str = "20") -> str:
        return f"Summarize in at most {words} words:\n\n{text}"

    return server


_UNITS = {"celsius": "celsius: 0 is where water freezes", "fahrenheit": "fahrenheit: 32 is where water freezes"}


def demo_server_config(name: str = "demo") -> McpServer:
    """The configuration that starts this server with the running Python interpreter."""
    package_root = str(Path(__file__).resolve().parents[3])
    return McpServer(
        name=name,
        command=sys.executable,
        args=["-m", "kavalai.demo.mcp_server"],
        # The server inherits only a few variables; make sure it imports this very kavalai.
        env={"PYTHONPATH": package_root},
    )


if __name__ == "__main__":
    build_demo_server().run()
