"""OAuth 2.1 for HTTP MCP servers and REST servers, with tokens kept per identity.

Give a server ``auth=OAuth()`` and its calls carry OAuth access tokens, got and renewed by the MCP SDK's client
flows (authorization code with PKCE, or client credentials)::

    from kavalai import FunctionKernel, McpServer
    from kavalai.auth import FileTokenStore, OAuth, identity

    oauth = OAuth(store=FileTokenStore("~/.config/kavalai/tokens.json"))
    kernel.register_mcp_server(McpServer(name="files", url="https://files.example/mcp", auth=oauth))
    with identity("alice"):
        await kernel.call_tool("mcp://files.read", {"path": "notes.txt"})  # alice signs in once

What is here:

- :class:`OAuth`: the setting (which grant, which client, where tokens live, how the user is sent to sign in);
- :func:`identity` and :func:`current_identity`: whose tokens a call uses. Tokens and connections are kept per
  identity and never shared across identities;
- :class:`TokenStore`, :class:`MemoryTokenStore` (the default), :class:`FileTokenStore` (one ``0600`` file,
  written atomically), and :class:`OAuthRecord`, what they keep;
- :class:`LoopbackRedirect`: the listener on ``127.0.0.1`` that receives the authorization code.

A failure to get a token, or a server that refuses one, is a :class:`~kavalai.errors.AuthenticationError` naming
the server and the identity.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from kavalai.auth._identity import DEFAULT_IDENTITY, current_identity, identity
from kavalai.auth._oauth import OAuth, OnAuthorize
from kavalai.auth._store import FileTokenStore, MemoryTokenStore, OAuthRecord, StoredTokens, TokenStore

if TYPE_CHECKING:
    from kavalai.auth._flow import OAuthFlow
    from kavalai.auth._loopback import LoopbackRedirect

# aiohttp.web and the MCP SDK's OAuth client load when these are first touched.
_LAZY = {"LoopbackRedirect": "kavalai.auth._loopback", "OAuthFlow": "kavalai.auth._flow"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kavalai.auth' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_IDENTITY",
    "FileTokenStore",
    "LoopbackRedirect",
    "MemoryTokenStore",
    "OAuth",
    "OAuthFlow",
    "OAuthRecord",
    "OnAuthorize",
    "StoredTokens",
    "TokenStore",
    "current_identity",
    "identity",
]
