"""Where a tool's effect goes: the origin of its server, kept in a tool definition's ``metadata["origin"]``.

An idempotency key protects a repeat only at the server that saw it: a server at another address never did. So a
durable step records its tool's origin in its sent mark (:mod:`kavalai.durable._doubt`), and a resume that finds the
server at another origin puts the step in doubt instead of sending it there again.

- An HTTP server (REST, MCP over HTTP or SSE): ``scheme://host:port`` of its URL: scheme and host in lower case, the
  port written out (80, 443 by default), an IPv6 host in brackets. No userinfo, path, query or fragment: nothing a
  credential may sit in, and a path changed on the same server is the same server.
- A stdio MCP server: ``stdio:`` and its command line (the command and its arguments, shell-quoted), every registered
  secret masked (a token written into an argument never reaches the journal), and ``(in <cwd>)`` when it has a
  working directory. Its environment is not part of it: a changed token is the same server.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from kavalai.secrets import redact

__all__ = ["command_origin", "url_origin"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def url_origin(url: str) -> str | None:
    """The origin of an HTTP server at ``url`` (see the module's doc), or ``None`` for a URL that has none."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if not scheme or not host:
        return None
    if port is None:
        port = _DEFAULT_PORTS.get(scheme)
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}" if port is None else f"{scheme}://{shown}:{port}"


def command_origin(command: str, args: Sequence[str], cwd: str | Path | None = None) -> str:
    """The origin of a stdio server started as ``command args`` in ``cwd`` (see the module's doc)."""
    line = redact(shlex.join([command, *args]))
    return f"stdio:{line}" if cwd is None else f"stdio:{line} (in {redact(str(cwd))})"
