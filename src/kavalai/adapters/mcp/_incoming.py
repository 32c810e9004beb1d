"""What an MCP server sends that answers no request: its log messages (``notifications/message``) and its notices
that something changed (list changes, a subscribed resource updated), each handed to where the server's
``McpServer`` says (a Python logger or ``log_handler``; ``on_change``) and to a gateway's relay.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any, Final, Literal

import mcp_types
from mcp.client.session import IncomingMessage

from kavalai.adapters.mcp._catalog import McpChange, McpLogMessage
from kavalai.adapters.mcp._config import McpServer
from kavalai.adapters.mcp._errors import scrub, scrubber
from kavalai.adapters.mcp._generation import Generation
from kavalai.adapters.mcp._healing import hand_over
from kavalai.adapters.mcp._relay import RelaySlot
from kavalai.secrets import excerpt, get_logger

__all__ = ["MessageHandler", "ServerLog"]

logger = get_logger("kavalai.mcp")

_MAX_LOG_CHARS: Final = 10_000  # a server's log line is cut here: a log record is not a place for megabytes
_MAX_LOGGER_CHARS: Final = 200  # and the name of its logger here (a name, not a second place for the text)

_ORDER: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


class ServerLog:
    """A server's log messages (``notifications/message``), on the Python logger ``kavalai.mcp.<server>`` at the
    matching level, or to the server's ``log_handler``; secrets masked either way. What reaches ``log_handler`` (and a
    gateway's relay) is filtered by the level asked for now: the one last set at run time (``set_log_level``), else
    the configured ``log_level``, so a server that does not filter itself is filtered here."""

    _LEVELS: Final = {
        "debug": logging.DEBUG,
        "info": logging.INFO,
        "notice": logging.INFO,
        "warning": logging.WARNING,
        "error": logging.ERROR,
        "critical": logging.CRITICAL,
        "alert": logging.CRITICAL,
        "emergency": logging.CRITICAL,
    }

    def __init__(self, config: McpServer, slot: RelaySlot, level: Callable[[], str | None]) -> None:
        self._config = config
        self._slot = slot
        self._level = level  # the level asked for now: the last one set at run time, else the configured one
        self._logger = get_logger(f"kavalai.mcp.{config.name}")

    async def __call__(self, params: mcp_types.LoggingMessageNotificationParams) -> None:
        relay = self._slot.relay
        if relay is not None:
            await self._hand(relay.log, params)  # passed on (kavalai serve's host), beside the server's own handler
        handler = self._config.log_handler
        if handler is not None:
            await self._hand(handler, params)
            return
        level = self._LEVELS.get(str(params.level), logging.INFO)
        if self._logger.isEnabledFor(level):
            source = f"[{_logger_name(self._config, params)}] " if params.logger else ""
            data = params.data if isinstance(params.data, str) else json.dumps(params.data, default=str)
            self._logger.log(level, "%s%s", source, excerpt(data, _MAX_LOG_CHARS, also=scrubber(self._config)))

    async def _hand(self, handler: Any, params: mcp_types.LoggingMessageNotificationParams) -> None:
        wanted = self._level()
        if wanted is not None and _ORDER.index(str(params.level)) < _ORDER.index(wanted):
            return  # below the level asked for: a server that does not filter itself is filtered here
        text = params.data if isinstance(params.data, str) else json.dumps(params.data, default=str)
        masked = scrub(self._config, text)
        shown = excerpt(masked, _MAX_LOG_CHARS)  # masked, then cut: no piece of a secret at the cut
        data = shown if isinstance(params.data, str) or masked != text else params.data
        level = str(params.level) if str(params.level) in self._LEVELS else "info"
        name = _logger_name(self._config, params)
        message = McpLogMessage(server=self._config.name, level=level, logger=name, data=data)  # type: ignore[arg-type]
        await hand_over(handler, message, "log_handler", self._config.name)


def _logger_name(config: McpServer, params: mcp_types.LoggingMessageNotificationParams) -> str | None:
    """The name of the logger a server's log message names, masked and cut at :data:`_MAX_LOGGER_CHARS` (its data
    is cut at :data:`_MAX_LOG_CHARS`; a megabyte name made a megabyte log line, and was relayed whole)."""
    if params.logger is None:
        return None
    return excerpt(params.logger, _MAX_LOGGER_CHARS, marker="...", also=scrubber(config))


class MessageHandler:
    """Receives the server's notifications: a changed tool list wakes the generation's refresher; every change
    (tools, resources, prompts, a subscribed resource) reaches the server's ``on_change`` callback."""

    _LISTS: Final[dict[type, Literal["tools", "resources", "prompts"]]] = {
        mcp_types.ToolListChangedNotification: "tools",
        mcp_types.ResourceListChangedNotification: "resources",
        mcp_types.PromptListChangedNotification: "prompts",
    }

    def __init__(self, gen: Generation, config: McpServer, on_stray: Callable[[str], None], slot: RelaySlot) -> None:
        self._gen = gen
        self._config = config
        self._on_stray = on_stray
        self._slot = slot

    async def __call__(self, message: IncomingMessage) -> None:
        if isinstance(message, ValueError):  # an HTTP transport's message that could not be read, naming no request
            self._on_stray(f"a message that could not be read ({type(message).__name__}: {str(message)[:200]})")
            return
        if isinstance(message, Exception):
            logger.debug("MCP transport reported %s", type(message).__name__)
            return
        kind = self._LISTS.get(type(message))
        if kind is not None:
            await self._tell(McpChange(server=self._config.name, kind=kind))
        elif isinstance(message, mcp_types.ResourceUpdatedNotification):
            await self._tell(McpChange(server=self._config.name, kind="resource", uri=str(message.params.uri)))

    async def _tell(self, change: McpChange) -> None:
        if change.kind == "tools":
            self._gen.refresh.set()  # listed again (in the background) before anyone reads the change
        if self._config.on_change is not None:
            await hand_over(self._config.on_change, change, "on_change callback", self._config.name)
        relay = self._slot.relay
        if relay is not None:
            await hand_over(relay.changed, change, "relay", self._config.name)
