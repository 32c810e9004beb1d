"""A FastMCP server with the tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663, from the
``fastmcp-tasks`` package): its ``task=True`` tools run in the background, and a client that advertises the
extension gets a task to poll (``tasks/get``), answer (``tasks/update``) or cancel (``tasks/cancel``).

fastmcp-tasks pins its own FastMCP release, so it runs from a virtual environment of its own, which the tests'
set-up makes (``tests/adapters/mcp/test_tasks.py``). Run it with that environment's Python:
``python tests/servers/mcp_tasks.py [stdio|http PORT]``.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from fastmcp import Context, FastMCP
from fastmcp_tasks import TasksExtension
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult
from pydantic import BaseModel


class Approval(BaseModel):
    """What ``needs_approval`` asks for."""

    approved: bool


def _write(path: str, text: str) -> None:
    Path(path).write_text(text)


def build() -> FastMCP:
    """The server."""
    server = FastMCP("tasks")
    server.add_extension(TasksExtension(url="memory://"))

    @server.tool(task=True)
    async def crunch(n: int, seconds: float = 0.3) -> int:
        """Work for a while in the background, then return n squared."""
        await asyncio.sleep(seconds)
        return n * n

    @server.tool(task=True)
    async def explode(message: str) -> str:
        """Fail in the background."""
        await asyncio.sleep(0.1)
        raise ValueError(message)

    @server.tool(task=True)
    async def linger(marker: str, seconds: float = 30.0) -> str:
        """Write "started" to the file ``marker``, sleep, and write "cancelled" there if cancelled meanwhile."""
        _write(marker, "started")
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            _write(marker, "cancelled")
            raise
        return "finished"

    @server.tool(task=True)
    async def needs_approval(ctx: Context) -> str | InputRequiredResult:
        """Ask the user, from the background, whether to go on (the task parks as input_required meanwhile)."""
        answer = (ctx.input_responses or {}).get("go")
        if answer is None:
            params = ElicitRequestFormParams(message="Go on?", requested_schema=Approval.model_json_schema())
            return InputRequiredResult(input_requests={"go": ElicitRequest(params=params)})
        if isinstance(answer, ElicitResult) and answer.action == "accept" and (answer.content or {}).get("approved"):
            return "approved"
        return "not approved"

    @server.tool()
    def quick(text: str) -> str:
        """An ordinary tool beside them."""
        return text.upper()

    return server


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        build().run("http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        build().run("stdio")
