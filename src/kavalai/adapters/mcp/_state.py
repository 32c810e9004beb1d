"""McpServerState: what the kernel can tell about one MCP server's connection (no ``mcp`` import here)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kavalai.adapters.mcp._config import McpTransport

__all__ = ["McpServerState", "McpStatus"]


class McpStatus(enum.StrEnum):
    """The state of one MCP server's connection; each member is also its plain string (``"connected"``).

    ``registered``: configured, never connected. ``connecting``: starting or reaching the server. ``connected``:
    its tools are listed and callable. ``failed``: it could not connect, or it died (the state's ``error`` says
    why; the next use tries again, except for a server lost 5 times within 60 s after connecting, a crash loop,
    which is not started again until the oldest of those losses is 60 s old). ``closed``: the kernel closed it
    (the next use connects again).
    """

    REGISTERED = "registered"
    CONNECTING = "connecting"
    CONNECTED = "connected"
    FAILED = "failed"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class McpServerState:
    """A snapshot of one MCP server's connection.

    Attributes:
        name: the server's registered name.
        status: see :data:`McpStatus`.
        transport: ``"stdio"``, ``"streamable-http"`` or ``"sse"``: for a ``url`` left to auto-detection, the
            transport found (streamable HTTP is reported until one is found).
        tools: the URIs of the tools it offers, sorted (empty until it has connected).
        error: why it failed (for a stdio server, with its exit code and stderr tail); ``None`` otherwise.
        pid: the process id of a running stdio server (the server's own, not the shim's it runs under on Linux);
            ``None`` otherwise.
        connects: how many times it has connected successfully (a restart after a crash counts again).
        protocol_version: the MCP protocol revision negotiated with the server (``"2025-11-25"``, ...), once
            connected.
        stray_messages: how many messages the server sent that answer no request (unreadable ones naming none,
            answers with a null id or the id of no request awaiting one), over all its connects. Each is dropped
            and the session goes on; the first few are logged at WARNING on ``kavalai.mcp``.
        server_info_name: the name the server gives itself (``serverInfo.name``), once connected.
        restored: what was set up again after a reconnect or a re-opened change stream, over all its connects:
            each resource subscription (``resources/subscribe`` again, or a ``subscriptions/listen`` stream with
            the same filter) and each logging level set again (``logging/setLevel``); a subscription reported
            lost that a later reconnect set up again counts too (``McpChange(kind="restored")``).
        lost: what could not be set up again (each also reached ``on_change`` as ``McpChange(kind="lost")``).
        subscriptions: the URIs of the resources subscribed to now (``subscribe_resource``; a ``kavalai serve``
            gateway's: those its hosts and listen streams hold), sorted; one reported lost is not among them until
            a reconnect sets it up again.
    """

    name: str
    status: McpStatus
    transport: McpTransport
    tools: tuple[str, ...] = ()
    error: str | None = None
    pid: int | None = None
    connects: int = 0
    protocol_version: str | None = None
    stray_messages: int = 0
    server_info_name: str | None = None
    restored: int = 0
    lost: int = 0
    subscriptions: tuple[str, ...] = ()
