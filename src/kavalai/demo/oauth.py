"""An OAuth 2.1 authorization server and two servers it protects, on loopback ports, for the docs and the tests.

Run all three for the length of a block::

    async with serve_demo_oauth() as demo:
        demo.issuer      # the authorization server, "http://127.0.0.1:<port>"
        demo.mcp_url     # a streamable-HTTP MCP server whose tool `whoami` says who signed in
        demo.rest_url    # a REST API (aiohttp) whose GET /whoami says the same

The authorization server is built from the MCP SDK's server pieces (``mcp.server.auth``: metadata, authorization,
token, registration and revocation endpoints) over an in-memory provider. What it adds: a sign-in page standing in
for a real login (``/login?request=...&user=<name>``), the client credentials grant for the clients given as
``clients={client_id: secret}``, and client ID metadata documents published with
:meth:`DemoAuthorizationServer.publish_client_document` (instead of fetched). Both resource servers publish their
protected resource metadata (RFC 9728), accept only unexpired tokens issued for themselves (RFC 8707), and answer
``401`` with a ``WWW-Authenticate`` challenge otherwise.

:meth:`DemoOAuth.sign_in` is a stand-in for the user's browser: given as ``OAuth(on_authorize=demo.sign_in)``, it
follows the authorization URL, signs in as the identity asked for and follows the redirect back to the client.

Importing this module imports the MCP SDK's server, starlette, uvicorn (the ``server`` extra) and aiohttp.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import math
import secrets
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import parse_qs, unquote, urlsplit

import anyio
import uvicorn
from aiohttp import web
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    IdentityAssertionParams,
    ProviderTokenVerifier,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.routes import build_metadata, create_auth_routes
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl, AnyUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from kavalai._listen import listening_socket
from kavalai.http import Outbound, aiohttp_session, origin_guard, parse_networks

__all__ = ["SCOPE", "DemoAuthorizationServer", "DemoOAuth", "serve_demo_oauth"]

#: The one scope the demo servers ask for.
SCOPE: Final = "demo"
_LOOPBACK: Final = parse_networks(["127.0.0.0/8", "::1/128"])


class DemoAuthorizationServer:
    """An in-memory authorization server: the provider the MCP SDK's OAuth endpoints call, and the sign-in page.

    Attributes:
        events: what happened, in order: ``"register"``, ``"sign-in:<user>"``, ``"denied:<user>"``,
            ``"token:<grant type>"`` (``authorization_code``, ``refresh_token``, ``client_credentials``).
    """

    def __init__(
        self,
        issuer: str,
        *,
        access_token_lifetime: int = 3600,
        clients: dict[str, str] | None = None,
        deny: Iterable[str] = (),
    ) -> None:
        self.issuer = issuer
        self.access_token_lifetime = access_token_lifetime
        self.events: list[str] = []
        self._deny = set(deny)
        self._confidential = dict(clients or {})
        self._clients: dict[str, OAuthClientInformationFull] = {}
        self._documents: dict[str, OAuthClientInformationFull] = {}
        self._pending: dict[str, tuple[OAuthClientInformationFull, AuthorizationParams]] = {}
        self._codes: dict[str, AuthorizationCode] = {}
        self._access: dict[str, AccessToken] = {}
        self._refresh: dict[str, RefreshToken] = {}

    def publish_client_document(self, url: str, *, redirect_uris: Sequence[str], name: str = "client") -> None:
        """Accept ``url`` as a client ID, as if its client ID metadata document listed ``redirect_uris``."""
        self._documents[url] = OAuthClientInformationFull(
            client_id=url,
            client_name=name,
            redirect_uris=[AnyUrl(uri) for uri in redirect_uris],
            token_endpoint_auth_method="none",
            grant_types=["authorization_code", "refresh_token"],
            scope=SCOPE,
        )

    def tokens_of(self, subject: str) -> list[str]:
        """The live access tokens issued to ``subject``."""
        now = time.time()
        return [
            token.token
            for token in self._access.values()
            if token.subject == subject and (token.expires_at is None or token.expires_at > now)
        ]

    def revoke_all(self) -> None:
        """Forget every access and refresh token (as a server that was reset would)."""
        self._access.clear()
        self._refresh.clear()

    # ------------------------------------------------------------- the SDK's OAuthAuthorizationServerProvider

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        """A registered client, or one whose client ID metadata document was published."""
        return self._clients.get(client_id) or self._documents.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        """Dynamic registration: keep the client."""
        self.events.append("register")
        self._clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        """Where the browser goes to sign in: this server's sign-in page for the request."""
        request = secrets.token_urlsafe(16)
        self._pending[request] = (client, params)
        return f"{self.issuer.rstrip('/')}/login?request={request}"

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        """The code issued to ``client``, if it is still unused."""
        code = self._codes.get(authorization_code)
        return code if code is not None and code.client_id == client.client_id else None

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        """Tokens for a code (the SDK's handler has checked PKCE, the client and the redirect URI)."""
        self._codes.pop(authorization_code.code, None)
        self.events.append("token:authorization_code")
        return self._issue(
            client.client_id, authorization_code.scopes, authorization_code.resource, authorization_code.subject
        )

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        """The refresh token issued to ``client``, if it is still unused."""
        token = self._refresh.get(refresh_token)
        return token if token is not None and token.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        """New tokens for a refresh token, which is used up (rotated)."""
        self._refresh.pop(refresh_token.token, None)  # rotated: a refresh token is used once
        self.events.append("token:refresh_token")
        return self._issue(
            client.client_id, scopes or refresh_token.scopes, refresh_token.resource, refresh_token.subject
        )

    async def load_access_token(self, token: str) -> AccessToken | None:
        """The access token, if it was issued and has not expired or been revoked."""
        found = self._access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at <= time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        """Forget ``token``."""
        self._access.pop(token.token, None)
        self._refresh.pop(token.token, None)

    async def exchange_identity_assertion(
        self, client: OAuthClientInformationFull, params: IdentityAssertionParams
    ) -> OAuthToken:
        """Not supported by the demo."""
        raise TokenError(error="unsupported_grant_type", error_description="not supported by the demo")

    # --------------------------------------------------------------------------------------- own endpoints

    def _issue(
        self, client_id: str, scopes: list[str], resource: str | None, subject: str | None, *, refresh: bool = True
    ) -> OAuthToken:
        access = secrets.token_urlsafe(24)
        expires_at = math.ceil(time.time() + self.access_token_lifetime)
        self._access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=expires_at,
            resource=resource,
            subject=subject,
            claims={"iss": self.issuer},
        )
        refresh_token = None
        if refresh:
            refresh_token = secrets.token_urlsafe(24)
            self._refresh[refresh_token] = RefreshToken(
                token=refresh_token, client_id=client_id, scopes=scopes, resource=resource, subject=subject
            )
        return OAuthToken(
            access_token=access,
            expires_in=self.access_token_lifetime,
            scope=" ".join(scopes) or None,
            refresh_token=refresh_token,
        )

    async def sign_in_page(self, request: Request) -> Response:
        """``/login?request=...&user=<name>``: the user signs in (a form when ``user`` is missing)."""
        pending = self._pending.get(request.query_params.get("request", ""))
        if pending is None:
            return HTMLResponse("<h1>Unknown or finished sign-in</h1>", status_code=400)
        user = request.query_params.get("user", "")
        if not user:
            form = (
                "<form><input type='hidden' name='request' value='{}'>"
                "<label>User <input name='user'></label> <button>Sign in</button></form>"
            )
            return HTMLResponse(form.format(request.query_params["request"]))
        self._pending.pop(request.query_params["request"])
        client, params = pending
        if user in self._deny:
            self.events.append(f"denied:{user}")
            target = construct_redirect_uri(
                str(params.redirect_uri),
                error="access_denied",
                error_description=f"{user} may not use this client",
                state=params.state,
                iss=self.issuer,
            )
            return RedirectResponse(target, status_code=302)
        self.events.append(f"sign-in:{user}")
        code = secrets.token_urlsafe(24)
        self._codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject=user,
        )
        target = construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state, iss=self.issuer)
        return RedirectResponse(target, status_code=302)

    def client_credentials(self, headers: dict[str, str], form: dict[str, str]) -> Response:
        """The token endpoint's client credentials grant (the SDK's token endpoint has no such grant)."""
        client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        authorization = headers.get("authorization", "")
        if authorization.lower().startswith("basic "):
            decoded = base64.b64decode(authorization[6:]).decode()
            client_id, _, secret = (unquote(part) for part in decoded.partition(":"))
        expected = self._confidential.get(client_id)
        if expected is None or not secrets.compare_digest(expected, secret):
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        self.events.append("token:client_credentials")
        scopes = form.get("scope", SCOPE).split()
        token = self._issue(client_id, scopes, form.get("resource"), client_id, refresh=False)
        return JSONResponse(token.model_dump(exclude_none=True), headers={"Cache-Control": "no-store"})

    def app(self) -> Starlette:
        """The authorization server's ASGI app: the SDK's endpoints, its metadata extended with client
        credentials and client ID metadata documents, the sign-in page and the token endpoint's extra grant."""
        issuer = AnyHttpUrl(self.issuer)
        registration = ClientRegistrationOptions(enabled=True, valid_scopes=[SCOPE], default_scopes=[SCOPE])
        revocation = RevocationOptions(enabled=True)
        routes = create_auth_routes(
            self, issuer, client_registration_options=registration, revocation_options=revocation
        )
        metadata = build_metadata(issuer, None, registration, revocation)
        metadata.grant_types_supported = [*(metadata.grant_types_supported or []), "client_credentials"]
        metadata.client_id_metadata_document_supported = True
        metadata.authorization_response_iss_parameter_supported = True
        document = metadata.model_dump(mode="json", exclude_none=True)

        async def metadata_endpoint(request: Request) -> Response:
            return JSONResponse(document)

        kept: list[Route] = []
        for route in routes:
            if route.path == "/.well-known/oauth-authorization-server":
                continue
            if route.path == "/token":
                route = Route("/token", endpoint=_TokenEndpoint(self, route.app), methods=["POST"])
            kept.append(route)
        kept.append(Route("/.well-known/oauth-authorization-server", endpoint=metadata_endpoint, methods=["GET"]))
        kept.append(Route("/login", endpoint=self.sign_in_page, methods=["GET"]))
        return Starlette(routes=kept)


class _TokenEndpoint:
    """The token endpoint: client credentials here, every other grant to the SDK's handler."""

    def __init__(self, server: DemoAuthorizationServer, sdk: ASGIApp) -> None:
        self._server = server
        self._sdk = sdk

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        form = {key: values[0] for key, values in parse_qs(body.decode()).items()}
        if form.get("grant_type") == "client_credentials":
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            await self._server.client_credentials(headers, form)(scope, receive, send)
            return

        async def replay() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        await self._sdk(scope, replay, send)


def _mcp_app(
    server: DemoAuthorizationServer, mcp_url: str, *, sse: bool = False, tools: Sequence[Callable[..., Any]] = ()
) -> Starlette:
    """The protected MCP server (the SDK's): its tool ``whoami``, over streamable HTTP (or legacy SSE)."""
    mcp = MCPServer(
        "demo-oauth",
        log_level="WARNING",
        token_verifier=ProviderTokenVerifier(server),
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(server.issuer),
            resource_server_url=AnyHttpUrl(mcp_url),
            required_scopes=[SCOPE],
            validate_token_resource=True,
        ),
    )

    @mcp.tool()
    def whoami() -> dict[str, str | None]:
        """Who signed in: the token's subject and client."""
        token = get_access_token()
        return {"user": token.subject if token else None, "client_id": token.client_id if token else None}

    for tool in tools:
        mcp.tool()(tool)
    return mcp.sse_app() if sse else mcp.streamable_http_app()


def _rest_app(server: DemoAuthorizationServer, rest_url: str, extra: Sequence[web.RouteDef]) -> web.Application:
    """The protected REST API (aiohttp): ``GET /whoami`` under the resource's path, and its metadata."""
    path = urlsplit(rest_url).path
    origin = rest_url[: len(rest_url) - len(path)]
    metadata_url = f"{origin}/.well-known/oauth-protected-resource{path}"
    challenge = f'Bearer error="invalid_token", resource_metadata="{metadata_url}", scope="{SCOPE}"'

    async def token_of(request: web.Request) -> AccessToken | None:
        header = request.headers.get("Authorization", "")
        token = await server.load_access_token(header[7:]) if header.lower().startswith("bearer ") else None
        return token if token is not None and token.resource == rest_url else None

    @web.middleware
    async def protect(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path.startswith(f"{path}/") and await token_of(request) is None:
            return web.json_response({"error": "invalid_token"}, status=401, headers={"WWW-Authenticate": challenge})
        return await handler(request)  # type: ignore[no-any-return]

    async def resource_metadata(request: web.Request) -> web.Response:
        return web.json_response(
            {"resource": rest_url, "authorization_servers": [server.issuer], "scopes_supported": [SCOPE]}
        )

    async def whoami(request: web.Request) -> web.Response:
        token = await token_of(request)
        assert token is not None  # protect() let the request in
        return web.json_response({"user": token.subject, "client_id": token.client_id})

    app = web.Application(middlewares=[protect])
    app.router.add_get(f"/.well-known/oauth-protected-resource{path}", resource_metadata)
    app.router.add_get(f"{path}/whoami", whoami)
    for route in extra:
        app.router.add_route(route.method, f"{path}{route.path}", route.handler)
    return app


@dataclass
class DemoOAuth:
    """The running demo: its URLs, the authorization server, and a stand-in for the user's browser.

    Attributes:
        issuer: the authorization server's issuer URL.
        mcp_url: the protected MCP server's endpoint.
        rest_url: the protected REST API's base URL.
        server: the authorization server (its ``events``, its tokens).
        sse_url: the protected MCP server's legacy SSE endpoint, when asked for (``sse=True``).
        visits: the authorization URLs :meth:`sign_in` followed, in order.
    """

    issuer: str
    mcp_url: str
    rest_url: str
    server: DemoAuthorizationServer
    sse_url: str | None = None
    visits: list[str] = field(default_factory=list)

    async def sign_in(self, url: str, identity: str) -> None:
        """An ``on_authorize`` for the demo: follow ``url`` as a browser would, sign in as ``identity``, and follow
        the redirect back to the client's loopback listener."""
        self.visits.append(url)
        # Every hop after the issuer's is a URL a server sent (a Location): judged by the outbound gate's rules, with
        # loopback allowed (the demo and the client's listener run there), before it is sent.
        outbound = Outbound("demo browser", [self.issuer], allowed_networks=_LOOPBACK, kind="OAuth")
        browser, resolver = aiohttp_session(
            outbound, middlewares=(origin_guard(self.issuer, check=outbound.hop_check),)
        )
        try:
            async with browser:
                async with browser.get(url, allow_redirects=False) as answer:
                    login = answer.headers["Location"]
                async with browser.get(login, params={"user": identity}, allow_redirects=False) as answer:
                    back = answer.headers["Location"]
                async with browser.get(back) as answer:
                    await answer.read()
        finally:
            if resolver is not None:
                await resolver.close()


@contextlib.asynccontextmanager
async def serve_demo_oauth(
    *,
    access_token_lifetime: int = 3600,
    clients: dict[str, str] | None = None,
    deny: Iterable[str] = (),
    rest_routes: Sequence[web.RouteDef] = (),
    mcp_tools: Sequence[Callable[..., Any]] = (),
    sse: bool = False,
) -> AsyncIterator[DemoOAuth]:
    """Serve the authorization server, the MCP server and the REST API on free loopback ports for the block.

    Args:
        access_token_lifetime: seconds an access token lives (refresh tokens do not expire).
        clients: confidential clients allowed the client credentials grant, ``{client_id: secret}``.
        deny: users whose sign-in is refused (the client is redirected back with ``access_denied``).
        rest_routes: more routes of the REST API (aiohttp route definitions, paths relative to its base URL).
        mcp_tools: more tools of the MCP server (functions, as ``MCPServer.tool()`` takes them).
        sse: also serve the MCP server over the legacy SSE transport, at ``DemoOAuth.sse_url``.
    """
    with _listening() as as_socket, _listening() as mcp_socket:
        issuer = str(AnyHttpUrl(_base_url(as_socket)))  # as the metadata renders it ("http://host:port/")
        mcp_url = f"{_base_url(mcp_socket)}/mcp"
        server = DemoAuthorizationServer(
            issuer, access_token_lifetime=access_token_lifetime, clients=clients, deny=deny
        )
        runner: web.AppRunner | None = None
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(_uvicorn(server.app(), as_socket))
            await stack.enter_async_context(_uvicorn(_mcp_app(server, mcp_url, tools=mcp_tools), mcp_socket))
            rest_socket = stack.enter_context(_listening())
            rest_url = f"{_base_url(rest_socket)}/api"
            runner = web.AppRunner(_rest_app(server, rest_url, rest_routes), access_log=None)
            await runner.setup()
            stack.push_async_callback(runner.cleanup)
            await web.SockSite(runner, rest_socket).start()
            sse_url = None
            if sse:
                sse_socket = stack.enter_context(_listening())
                sse_url = f"{_base_url(sse_socket)}/sse"
                await stack.enter_async_context(
                    _uvicorn(_mcp_app(server, sse_url, sse=True, tools=mcp_tools), sse_socket)
                )
            yield DemoOAuth(issuer=issuer, mcp_url=mcp_url, rest_url=rest_url, server=server, sse_url=sse_url)


@contextlib.contextmanager
def _listening() -> Iterator[socket.socket]:
    sock = listening_socket("127.0.0.1", 0, backlog=64)
    try:
        yield sock
    finally:
        sock.close()


def _base_url(sock: socket.socket) -> str:
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


class _Uvicorn(uvicorn.Server):
    """A uvicorn server that leaves signals to the program it runs in."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def _uvicorn(app: ASGIApp, sock: socket.socket) -> AsyncIterator[None]:
    server = _Uvicorn(uvicorn.Config(app, log_level="warning", ws="none", lifespan="on", timeout_graceful_shutdown=1))
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        with anyio.fail_after(10):
            while not server.started:  # uvicorn sets a flag, no event
                if serving.done():
                    serving.result()  # raises what stopped it
                    raise RuntimeError("the demo server stopped while starting")
                await asyncio.sleep(0.01)
        yield
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(serving), 5)
        if not serving.done():
            server.force_exit = True
            serving.cancel()
            with contextlib.suppress(BaseException):
                await serving
