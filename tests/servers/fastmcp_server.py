"""A real FastMCP server (the ``fastmcp`` package, a dev dependency) for the ``mcp://`` tests: a typed tool with
structured output, tools returning plain values (which FastMCP wraps and marks), a tool that reports progress, a tool
that fails, a resource, a template and a prompt.

Run it over stdio: ``python -m tests.servers.fastmcp_server``; or serve :func:`build` over HTTP.
"""

from __future__ import annotations

from fastmcp import Context, FastMCP
from pydantic import BaseModel


class Stats(BaseModel):
    """Counts of a text."""

    words: int
    longest: str


def build() -> FastMCP:
    """The server."""
    server = FastMCP("fast-peer")

    @server.tool
    def text_stats(text: str) -> Stats:
        """Count the words of a text and find its longest word."""
        words = text.split()
        return Stats(words=len(words), longest=max(words, key=len, default=""))

    @server.tool
    def word_count(text: str) -> int:
        """Count the words of a text (a plain value: FastMCP wraps it as {"result": n} and marks the schema)."""
        return len(text.split())

    @server.tool
    def each_stats(texts: list[str]) -> list[Stats]:
        """The stats of each text (a list of models: wrapped, with its $defs at the schema's root)."""
        return [text_stats(text) for text in texts]

    @server.tool
    async def steps(n: int, ctx: Context) -> int:
        """Report progress n times."""
        for i in range(n):
            await ctx.report_progress(i + 1, n)
        return n

    @server.tool
    def refuse(reason: str) -> str:
        """Always fails."""
        raise ValueError(f"refused: {reason}")

    @server.resource("fast://motd", mime_type="text/plain")
    def motd() -> str:
        """The message of the day."""
        return "1.10 stays a string"

    @server.resource("fast://greeting/{name}")
    def greeting(name: str) -> str:
        """A greeting for a name."""
        return f"hello {name}"

    @server.prompt
    def haiku(topic: str) -> str:
        """Ask for a haiku."""
        return f"Write a haiku about {topic}."

    return server


if __name__ == "__main__":
    build().run(show_banner=False)
