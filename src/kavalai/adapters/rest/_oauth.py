"""A REST server with OAuth: a pooled session per identity, each authorized by that identity's OAuth flow.

Each identity gets an aiohttp session of its own (its own connection pool and cookie jar, so not even a cookie set
for one identity reaches another), whose first client middleware is the identity's
:class:`~kavalai.auth.OAuthFlow`: it attaches the identity's access token to every request to the server's origin,
and on a ``401`` runs the MCP SDK's flow (discovery, registration, sign-in or client credentials, refresh). The
caller's identity is a context variable (:func:`kavalai.auth.identity`), read here only, so servers without OAuth
pay nothing for it.

Tokens change while the process runs, so they cannot be among the server's fixed secrets: an error whose message,
body excerpt or cause holds one of the flow's tokens has it masked (or the cause dropped) here
(:meth:`OAuthFlow.scrub <kavalai.auth.OAuthFlow.scrub>`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aiohttp

from kavalai.adapters.rest._config import RestServer
from kavalai.adapters.rest._request import PreparedRequest
from kavalai.adapters.rest._session import ServerSession
from kavalai.auth import OAuth, current_identity
from kavalai.errors import ConfigurationError, FunctionKernelException

if TYPE_CHECKING:
    from kavalai.auth import OAuthFlow  # the MCP SDK's OAuth client loads with the first flow

__all__ = ["OAuthServerSession", "session_for"]


def session_for(server: RestServer) -> ServerSession:
    """The session of ``server``: per identity when it has OAuth, else the one pooled session."""
    if isinstance(server.auth, OAuth):
        return OAuthServerSession(server)
    return ServerSession(server)


class OAuthServerSession(ServerSession):
    """The sessions of a REST server with OAuth, one per identity, and the router to the caller's."""

    def __init__(self, server: RestServer) -> None:
        super().__init__(server)
        if not isinstance(server.auth, OAuth):  # pragma: no cover - session_for decides
            raise TypeError("OAuthServerSession needs a RestServer with auth=OAuth(...)")
        self._oauth = server.auth
        self._identities: dict[str, tuple[ServerSession, OAuthFlow]] = {}

    def _for_caller(self, uri: str | None) -> tuple[ServerSession, OAuthFlow]:
        who = current_identity() or self._oauth.identity
        found = self._identities.get(who)
        if found is None:
            try:
                base_url = self.resolved.base_url
            except ConfigurationError as exc:
                exc.uri = exc.uri or uri
                raise
            flow = self._oauth.for_identity(who).flow(self.name, base_url, kind="REST server")
            session = ServerSession(self.server, middlewares=(flow.aiohttp_middleware(base_url),))
            found = self._identities[who] = (session, flow)
        return found

    @property
    def client_session(self) -> aiohttp.ClientSession | None:
        """The caller's identity's aiohttp session, if it is open."""
        found = self._identities.get(current_identity() or self._oauth.identity)
        return found[0].client_session if found is not None else None

    async def send(self, request: PreparedRequest, *, uri: str | None = None) -> Any:
        """Send ``request`` over the caller's identity's session (see :meth:`ServerSession.send`)."""
        session, flow = self._for_caller(uri)
        try:
            return await session.send(request, uri=uri)
        except FunctionKernelException as exc:
            exc.uri = exc.uri or uri
            flow.scrub(exc)  # a server may echo a token in its error body
            raise
        except Exception as exc:
            error = flow.unwrap(exc)  # the flow's failure, carried out of aiohttp's middleware chain
            if error is None:
                raise
            error.uri = error.uri or uri
            raise error from None

    async def aclose(self) -> None:
        """Close every identity's session (the next request opens a new one)."""
        for session, _flow in list(self._identities.values()):
            await session.aclose()
        await super().aclose()
