"""A real MCP server (the SDK's ``MCPServer``, both protocol eras) for connections that heal: what it offers and what
it refuses are read from a JSON file at its start, so a test can change them across a restart.

The file (path in ``HEALING_STATE``) holds ``{"version": 1 or 2, "refuse": [resource URIs], "refuse_level": bool}``:

- version 1 lists the tools ``touch``, ``shape(a)``, ``gone``, ``level`` and ``drop_streams`` and the prompt
  ``greet``; version 2 drops ``gone`` and the prompt, and ``shape`` takes ``a`` and ``b``;
- a resource in ``refuse`` is refused by ``resources/subscribe`` (handshake era) and left out of what a
  ``subscriptions/listen`` stream honors (2026-07-28);
- ``touch(uri)`` says that the resource changed, on every listen stream and to every handshake session subscribed;
- ``level_now()`` answers the logging level last set with ``logging/setLevel`` on this process (``"unset"``);
  with ``refuse_level``, ``logging/setLevel`` is refused;
- ``drop_streams()`` ends every listen stream (the server's graceful close), while the process lives;
- ``roots_told_now()`` counts the ``notifications/roots/list_changed`` this process received;
- ``grow()`` adds the tool ``extra`` silently (no list-changed notice), as a change whose notice was lost.

Run it over stdio: ``python -m tests.servers.mcp_healing``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import mcp_types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPError


def _state() -> dict[str, Any]:
    path = os.environ.get("HEALING_STATE")
    return json.loads(Path(path).read_text()) if path else {"version": 1, "refuse": []}


def build_server() -> MCPServer:
    """The server, as the state file says."""
    state = _state()
    refused = set(state.get("refuse", []))
    version = int(state.get("version", 1))
    server = MCPServer("healing", log_level="WARNING", subscriptions=False)
    subscribers: dict[str, list[Any]] = {}  # handshake era: resource -> the sessions subscribed to it
    level = ["unset"]
    listen = ListenHandler(server._subscriptions)  # the bus that notify_* publish on

    @server.resource("notes://{name}", name="note", description="A note.", mime_type="text/plain")
    def note(name: str) -> str:
        return f"note {name}"

    @server.tool()
    async def touch(uri: str, ctx: Context) -> str:
        """Say that the resource at ``uri`` changed."""
        await ctx.notify_resource_updated(uri)
        for session in subscribers.get(uri, []):
            await session.send_resource_updated(uri)
        return "touched"

    if version == 1:

        @server.tool()
        def shape(a: int) -> int:
            """Return ``a``."""
            return a

        @server.tool()
        def gone() -> str:
            """A tool that version 2 no longer has."""
            return "here"

        @server.prompt()
        def greet(name: str) -> str:
            """A prompt that version 2 no longer has."""
            return f"Hello {name}"

    else:

        @server.tool()
        def shape(a: int, b: str) -> str:  # type: ignore[misc]
            """Return ``a`` and ``b``."""
            return f"{a}{b}"

    @server.tool()
    def level_now() -> str:
        """The logging level last set on this process."""
        return level[0]

    @server.tool()
    def drop_streams() -> str:
        """End every listen stream gracefully."""
        listen.close()
        return "dropped"

    @server.tool()
    def grow() -> str:
        """Add the tool ``extra`` without a word: no list-changed notice is sent."""

        def extra() -> str:
            """A tool added at run time."""
            return "extra"

        server.add_tool(extra)
        return "grown"

    roots_told = [0]

    @server.tool()
    def roots_told_now() -> int:
        """How many times a client told this process that its roots changed."""
        return roots_told[0]

    async def roots_changed(ctx: Any, params: mcp_types.NotificationParams) -> None:
        roots_told[0] += 1

    async def subscribe(ctx: Any, params: mcp_types.SubscribeRequestParams) -> mcp_types.EmptyResult:
        uri = str(params.uri)
        if uri in refused:
            raise MCPError(mcp_types.INVALID_PARAMS, f"{uri} may not be subscribed to")
        subscribers.setdefault(uri, []).append(ctx.session)
        return mcp_types.EmptyResult()

    async def unsubscribe(ctx: Any, params: mcp_types.UnsubscribeRequestParams) -> mcp_types.EmptyResult:
        sessions = subscribers.get(str(params.uri), [])
        if ctx.session in sessions:
            sessions.remove(ctx.session)
        return mcp_types.EmptyResult()

    async def set_level(ctx: Any, params: mcp_types.SetLevelRequestParams) -> mcp_types.EmptyResult:
        if state.get("refuse_level"):
            raise MCPError(mcp_types.INVALID_PARAMS, "this server keeps its own logging level")
        level[0] = str(params.level)
        return mcp_types.EmptyResult()

    async def listen_honoring(ctx: Any, params: mcp_types.SubscriptionsListenRequestParams) -> Any:
        wanted = params.notifications.resource_subscriptions or []
        kept = [uri for uri in wanted if uri not in refused] or None
        notifications = params.notifications.model_copy(update={"resource_subscriptions": kept})
        return await listen(ctx, params.model_copy(update={"notifications": notifications}))

    lowlevel = server._lowlevel_server  # for handlers MCPServer does not offer
    lowlevel.add_request_handler("resources/subscribe", mcp_types.SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", mcp_types.UnsubscribeRequestParams, unsubscribe)
    lowlevel.add_request_handler("logging/setLevel", mcp_types.SetLevelRequestParams, set_level)
    lowlevel.add_notification_handler("notifications/roots/list_changed", mcp_types.NotificationParams, roots_changed)
    lowlevel.add_request_handler("subscriptions/listen", mcp_types.SubscriptionsListenRequestParams, listen_honoring)
    return server


if __name__ == "__main__":
    build_server().run("stdio")
