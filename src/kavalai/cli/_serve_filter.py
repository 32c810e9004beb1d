"""Which servers of a configuration ``kavalai serve --allow/--deny`` needs: those that can offer a tool it serves.

A server's tools are all ``{scheme}://{name}.{tool}``, so a glob rules a server out without starting it when its
literal start (up to the first ``*``, ``?`` or ``[``) cannot begin such a URI, and a ``--deny`` glob of the form
``{start}*`` denies every tool of a server whose URIs begin with that start. Anything else might match: that server
is needed. MCP servers (a process to start or a session to open) and REST servers (an OpenAPI document to fetch) are
left out when not needed; Python functions and bundled tools cost nothing to register and stay.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

__all__ = ["needed_servers_only"]

_WILDCARD = re.compile(r"[*?\[]")


def needed_servers_only(config: Any, allow: Sequence[str] | None, deny: Sequence[str]) -> tuple[Any, list[str]]:
    """``config`` (a :class:`~kavalai.config.KernelConfig`) without the servers no admitted tool can come from,
    and the URI prefixes of the servers left out (``["mcp://files."]``)."""
    left_out: list[str] = []

    def keep(scheme: str, name: object) -> bool:
        if not isinstance(name, str):
            return True  # the configuration's own checks report it
        prefix = f"{scheme}://{name}."
        if _needed(prefix, allow, deny):
            return True
        left_out.append(prefix)
        return False

    update = {
        "mcp_servers": [server for server in config.mcp_servers if keep("mcp", server.get("name"))],
        "host_mcp_servers": {name: entry for name, entry in config.host_mcp_servers.items() if keep("mcp", name)},
        "vscode_servers": {name: entry for name, entry in config.vscode_servers.items() if keep("mcp", name)},
        "rest_servers": [server for server in config.rest_servers if keep("rest", server.get("name"))],
    }
    return config.model_copy(update=update), left_out


def _needed(prefix: str, allow: Sequence[str] | None, deny: Sequence[str]) -> bool:
    if allow is not None and not any(_may_match(pattern, prefix) for pattern in allow):
        return False
    return not any(_matches_all(pattern, prefix) for pattern in deny)


def _literal_start(pattern: str) -> str:
    wildcard = _WILDCARD.search(pattern)
    return pattern if wildcard is None else pattern[: wildcard.start()]


def _may_match(pattern: str, prefix: str) -> bool:
    """Whether ``pattern`` can match some URI beginning with ``prefix`` (an over-estimate: never a wrong no)."""
    start = _literal_start(pattern)
    return start.startswith(prefix) or (prefix.startswith(start) and start != pattern)


def _matches_all(pattern: str, prefix: str) -> bool:
    """Whether ``pattern`` matches every URI beginning with ``prefix`` (``mcp://files.*``, ``mcp://*``, ``*``)."""
    start = _literal_start(pattern)
    return pattern == start + "*" and prefix.startswith(start)
