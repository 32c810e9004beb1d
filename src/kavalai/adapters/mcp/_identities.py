"""An MCP server with OAuth: one connection per identity, and every call routed to the caller's.

A server's session belongs to whoever authorized it (the SDK's server binds a session to the token's principal),
and so do the requests it sends back (sampling, elicitation) and its notifications. So a server configured with
``auth=OAuth(...)`` gets a connection per identity, each with that identity's tokens (its transport's ``httpx2.Auth``
is the identity's :class:`~kavalai.auth.OAuthFlow`), and nothing of one identity is used for another.

The connection the adapter registers acts for the setting's own identity (``OAuth(identity=...)``, ``"default"``
unless set); a call inside ``kavalai.auth.identity("bob")`` uses bob's, opened on first use. Every connection lists
the server's tools into the kernel's one registry (the same URIs), and whichever of them built a tool's definition,
its calls are routed by the identity of the caller, so a tool listed for alice and called by bob runs with bob's
tokens. A call outside any identity block is the setting's identity's: a server only ever signs in the identities
that are used.

Routing is by a context variable read here only, so servers without OAuth pay nothing for it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio

from kavalai.adapters.base import ToolRegistry
from kavalai.adapters.mcp._config import McpServer
from kavalai.adapters.mcp._connection import McpConnection
from kavalai.adapters.mcp._state import McpServerState
from kavalai.auth import OAuth, current_identity
from kavalai.errors import AuthenticationError, ConfigurationError, FunctionKernelException, ServerConnectionError
from kavalai.kernel import ToolDefinition

if TYPE_CHECKING:
    from kavalai.auth import OAuthFlow

__all__ = ["IdentityConnections", "connection_for"]


def connection_for(config: McpServer, registry: ToolRegistry) -> McpConnection:
    """The connection of ``config``: per identity when it has OAuth, else the plain one."""
    if isinstance(config.auth, OAuth):
        return IdentityConnections(config, registry)
    return McpConnection(config, registry)


class IdentityConnections(McpConnection):
    """One identity's connection to an MCP server with OAuth, and the router to the other identities' (see the
    module docstring). The adapter holds the one made for the setting's identity; it makes the others."""

    def __init__(
        self,
        config: McpServer,
        registry: ToolRegistry,
        *,
        pool: dict[str, IdentityConnections] | None = None,
        default: str | None = None,
    ) -> None:
        if config.transport is None:
            # Not the fallback to legacy SSE after a failed streamable-HTTP connect: a refused sign-in would only be
            # asked again. OAuth came with streamable HTTP (2025-03-26); pin transport="sse" for an older server.
            config = config.model_copy(update={"transport": "streamable-http"})
        super().__init__(config, registry)
        oauth = config.auth
        if not isinstance(oauth, OAuth):  # pragma: no cover - connection_for decides
            raise TypeError("IdentityConnections needs an McpServer with auth=OAuth(...)")
        self._oauth = oauth
        self._shared_registry = registry
        self._pool: dict[str, IdentityConnections] = pool if pool is not None else {}
        self._default = default if default is not None else oauth.identity
        self._pool[oauth.identity] = self

    @property
    def identity(self) -> str:
        """The identity this connection acts for."""
        return self._oauth.identity

    def _route(self) -> IdentityConnections:
        """The connection of the caller's identity (made now if it has none yet)."""
        who = current_identity() or self._default
        connection = self._pool.get(who)
        if connection is None:
            config = self.config.model_copy(update={"auth": self._oauth.for_identity(who)})
            connection = IdentityConnections(config, self._shared_registry, pool=self._pool, default=self._default)
            connection.relay = self.relay  # the adapter's: what this identity's server sends is relayed too
        return connection

    async def _direct(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Run the plain connection's ``method`` on this connection; an authorization failure behind a lost
        connection comes out as the :class:`AuthenticationError` it is."""
        started = time.monotonic()
        try:
            return await getattr(super(), method)(*args, **kwargs)
        except AuthenticationError:
            raise
        except ServerConnectionError as exc:
            flow = self._flow()
            failure = flow.last_failure if flow is not None and flow.failed_at >= started else None
            if failure is None:
                if flow is not None:
                    flow.scrub(exc)
                raise
            raise AuthenticationError(failure.message, uri=exc.uri, server=self.name, identity=self.identity) from exc
        except FunctionKernelException as exc:
            flow = self._flow()
            if flow is not None:
                flow.scrub(exc)  # a server may echo a token in an error
            raise

    def _flow(self) -> OAuthFlow | None:
        """This identity's OAuth flow (the one its transport uses), if its url can be read."""
        try:
            url = self.config.resolved().url
        except ConfigurationError:
            return None
        if url is None:  # pragma: no cover - an McpServer with auth has a url
            return None
        return self._oauth.flow(self.name, url, kind="MCP server")

    # ------------------------------------------------------------------------------ what the adapter calls

    @property
    def connected(self) -> bool:
        """Whether the caller's identity has a live session now."""
        return super(IdentityConnections, self._route()).connected

    def state(self) -> McpServerState:
        """A snapshot of the caller's identity's connection."""
        return super(IdentityConnections, self._route()).state()

    def tool(self, uri: str) -> ToolDefinition | None:
        """The published definition at ``uri``, if the caller's identity's connection lists it."""
        return super(IdentityConnections, self._route()).tool(uri)

    async def connect(self) -> None:
        """Connect the caller's identity's connection unless it is connected (signing in first if needed)."""
        await self._route()._direct("connect")

    async def call(self, *args: Any, **kwargs: Any) -> Any:
        """Run ``tools/call`` over the caller's identity's connection."""
        return await self._route()._direct("call", *args, **kwargs)

    async def request(self, *args: Any, **kwargs: Any) -> Any:
        """Send a request other than ``tools/call`` over the caller's identity's connection."""
        return await self._route()._direct("request", *args, **kwargs)

    async def subscribe(self, *args: Any, **kwargs: Any) -> Any:
        """Subscribe over the caller's identity's connection."""
        return await self._route()._direct("subscribe", *args, **kwargs)

    async def aclose(self) -> None:
        """Close this connection; the setting's own also closes every other identity's."""
        if self.identity != self._default:
            await super().aclose()
            return
        async with anyio.create_task_group() as tg:
            for connection in [c for c in self._pool.values() if c is not self]:
                tg.start_soon(connection.aclose)
        await super().aclose()
