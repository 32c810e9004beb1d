"""One resource's OAuth flow for one identity, over the MCP SDK's client (``mcp.client.auth``).

The SDK's ``OAuthClientProvider`` (and ``ClientCredentialsOAuthProvider``) is an ``httpx2.Auth``: on a ``401`` it
discovers the protected resource's metadata and its authorization server's, registers the client (or uses a client
ID metadata document), runs the authorization code grant with PKCE (or client credentials), and refreshes expired
tokens. This module supplies what the SDK leaves to the application, and no OAuth of its own:

- the storage the SDK reads and writes, over a :class:`~kavalai.auth.TokenStore` keyed by resource and identity.
  It also keeps the absolute expiry and the authorization server's metadata with the tokens, which the SDK does not
  persist: without them a token read back after a restart would never be refreshed (its expiry unknown), or its
  refresh would go to the resource server's own ``/token`` instead of the authorization server;
- the redirect and callback handlers of the interactive flow (``on_authorize`` and the loopback listener);
- a fast path: a token known to be valid is attached without entering the SDK's flow, which holds a lock until the
  server's response headers arrive, so concurrent requests of one identity would otherwise take turns;
- the REST side: the SDK's flow is driven from an aiohttp client middleware (the request it authenticates goes
  through the REST server's aiohttp session; its own requests, to the authorization server, through ``httpx2``);
- failures as :class:`~kavalai.errors.AuthenticationError` naming the server and the identity, never a credential.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import webbrowser
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, Final, cast
from urllib.parse import parse_qs, urlsplit

import aiohttp
import anyio.to_thread
import httpx2
from aiohttp.client_middlewares import ClientHandlerType, ClientMiddlewareType
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, OAuthRegistrationError
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.auth.utils import issuers_match
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from pydantic import AnyUrl, ValidationError
from yarl import URL

from kavalai.auth._loopback import AuthorizationDenied
from kavalai.auth._store import OAuthRecord, StoredTokens
from kavalai.errors import AuthenticationError, FunctionKernelException, OutboundRefusedError, ServerConnectionError
from kavalai.http import Outbound, httpx_client, parse_networks
from kavalai.secrets import Redactor, excerpt, get_logger, register_secret

if TYPE_CHECKING:
    from kavalai.auth._oauth import OAuth

__all__ = ["OAuthFlow", "open_browser"]

logger = get_logger("kavalai.auth")

#: A token this close to its expiry is not attached on the fast path (the SDK's flow refreshes it first).
_EXPIRY_MARGIN: Final = 5.0
#: The largest answer of an authorization server read (metadata, registration, tokens are a few KiB).
_MAX_AUTH_ANSWER: Final = 1024 * 1024
#: Timeout of each request to the authorization server on the REST side.
_AUTH_SERVER_TIMEOUT: Final = 30.0
_MAX_DETAIL: Final = 300
_KEPT_SECRETS: Final = 16


class OAuthFlow:
    """The OAuth flow of one protected resource for one identity: its tokens and how to get and renew them.

    Made by :meth:`OAuth.flow <kavalai.auth.OAuth.flow>`, one per resource and identity for the life of the
    setting, so what discovery found is kept between connections.
    """

    def __init__(self, oauth: OAuth, server: str, resource: str, *, kind: str = "server") -> None:
        self.oauth = oauth
        self.server = server
        self.resource = resource
        self.identity = oauth.identity
        self.label = f"{kind} {server!r}"
        self.kind = kind
        self.failures = 0
        self.last_failure: AuthenticationError | None = None
        self.failed_at = -math.inf  # time.monotonic() of the last failure
        self._record = OAuthRecord()
        self._provider: OAuthClientProvider | None = None
        self._building: asyncio.Lock | None = None
        self._redirect_uri: str | None = None
        self._pending_state: str | None = None
        self._secrets: list[str] = []
        self._redactor = Redactor(())

    def __repr__(self) -> str:
        return f"OAuthFlow({self.label}, identity={self.identity!r}, resource={self.resource!r})"

    # ----------------------------------------------------------------------------------------------- tokens

    def bearer(self) -> str | None:
        """The access token, if one is held and not about to expire (no I/O: the fast path)."""
        tokens = self._record.tokens
        if tokens is None or tokens.expired(_EXPIRY_MARGIN):
            return None
        return tokens.access_token

    async def provider(self) -> OAuthClientProvider:
        """The SDK's provider of this flow, built at first use from what the store holds."""
        if self._provider is not None:
            return self._provider
        if self._building is None:
            self._building = asyncio.Lock()
        async with self._building:
            if self._provider is None:
                self._provider = await self._build()
        return self._provider

    async def _build(self) -> OAuthClientProvider:
        oauth = self.oauth
        record = await oauth.store.load(self.resource, self.identity)
        self._record = record if record is not None else OAuthRecord()
        self._remember_record()
        storage = _Storage(self)
        provider: OAuthClientProvider
        if oauth.grant == "client_credentials":
            provider = ClientCredentialsOAuthProvider(
                server_url=self.resource,
                storage=storage,
                client_id=cast(str, oauth.client_id),
                client_secret=cast(str, oauth.client_secret_value()),
                token_endpoint_auth_method=oauth.token_endpoint_auth_method,
                issuer=oauth.issuer,
            )
        else:
            self._redirect_uri = oauth.listener().redirect_uri(_loopback_port(self._record.client))
            secret = oauth.client_secret_value()
            metadata = OAuthClientMetadata(
                client_name=oauth.client_name,
                redirect_uris=[AnyUrl(self._redirect_uri)],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method=oauth.token_endpoint_auth_method if secret else "none",
            )
            provider = OAuthClientProvider(
                self.resource,
                metadata,
                storage,
                redirect_handler=self._send_user,
                callback_handler=self._await_code,
                client_metadata_url=oauth.client_metadata_url,
            )
        storage.provider = provider
        self._restore(provider)
        return provider

    def _restore(self, provider: OAuthClientProvider) -> None:
        """Give the SDK what it does not persist itself: the expiry and the authorization server's metadata."""
        context, record = provider.context, self._record
        if record.tokens is not None:
            context.current_tokens = _sdk_token(record.tokens)
            context.token_expiry_time = record.tokens.expires_at
        issuer = record.authorization_server
        if issuer is None or record.server_metadata is None:
            return
        if self.oauth.issuer is not None and not issuers_match(issuer, self.oauth.issuer):
            return  # the setting names another authorization server now: discover afresh
        try:
            context.oauth_metadata = OAuthMetadata.model_validate(record.server_metadata)
            if record.resource_metadata is not None:
                context.protected_resource_metadata = ProtectedResourceMetadata.model_validate(record.resource_metadata)
        except ValidationError:
            context.oauth_metadata = context.protected_resource_metadata = None
            return
        context.auth_server_url = issuer

    async def saved(self, record: OAuthRecord) -> None:
        """Keep ``record`` as this flow's (called by the SDK's storage)."""
        self._record = record
        self._remember_record()
        await self.oauth.store.save(self.resource, self.identity, record)

    @property
    def record(self) -> OAuthRecord:
        """What this flow holds now (tokens, client, authorization server)."""
        return self._record

    @property
    def redirect_uri(self) -> str | None:
        """The redirect URI of the interactive flow, once chosen."""
        return self._redirect_uri

    # ------------------------------------------------------------------------------------- the user signs in

    async def _send_user(self, url: str) -> None:
        state = parse_qs(urlsplit(url).query).get("state", [""])[0]
        listener = self.oauth.listener()
        try:
            await listener.expect(state)
        except OSError as exc:
            raise self._error(
                f"cannot listen for the redirect on {self._redirect_uri}: {exc.strerror or exc}"
            ) from None
        self._pending_state = state
        try:
            await self.oauth.tell_user(url)
        except BaseException:
            self._pending_state = None
            await listener.discard(state)
            raise

    async def _await_code(self) -> AuthorizationCodeResult:
        state, self._pending_state = self._pending_state or "", None
        result = await self.oauth.listener().wait(state, self.oauth.login_timeout)
        return AuthorizationCodeResult(code=result.code, state=result.state, iss=result.iss)

    # ------------------------------------------------------------------------------------------- adapters

    def outbound(self) -> Outbound:
        """The outbound gate's policy for the resource's requests and this flow's own: the resource, the issuer and
        the client metadata URL are the user's; every URL discovery finds is learned from a server."""
        oauth = self.oauth
        return Outbound(
            self.server,
            [self.resource, oauth.issuer, oauth.client_metadata_url],
            allowed_networks=parse_networks(oauth.allowed_networks),
            kind=self.kind,
        )

    def httpx_auth(self) -> httpx2.Auth:
        """An ``httpx2.Auth`` for the HTTP clients of an MCP server's transports."""
        return _HttpxAuth(self)

    def aiohttp_middleware(self, origin: str) -> ClientMiddlewareType:
        """An aiohttp client middleware authorizing the requests to ``origin`` (a REST server's base URL)."""
        home = URL(origin).origin()

        async def oauth(request: aiohttp.ClientRequest, handler: ClientHandlerType) -> aiohttp.ClientResponse:
            if request.url.origin() != home:  # never a token for another origin (a redirect elsewhere)
                request.headers.popall("Authorization", None)
                return await handler(request)
            token = self.bearer()
            if token is not None:
                request.headers["Authorization"] = f"Bearer {token}"
                response = await handler(request)
                if not _challenged(response.status, response.headers.get("WWW-Authenticate")):
                    return response
                response.release()
            try:
                return await self._drive(request, handler)
            except (AuthenticationError, OutboundRefusedError) as exc:
                raise _Carrier(exc) from None

        return oauth

    def unwrap(self, exc: BaseException) -> ServerConnectionError | None:
        """The :class:`AuthenticationError` (or the outbound gate's refusal) that left :meth:`aiohttp_middleware` as
        ``exc``, if it is one."""
        return exc.error if isinstance(exc, _Carrier) else None

    async def _drive(self, request: aiohttp.ClientRequest, handler: ClientHandlerType) -> aiohttp.ClientResponse:
        """Run the SDK's flow for an aiohttp request: the request itself through ``handler`` (the REST server's
        session), the flow's own requests (metadata, registration, tokens) through a bounded ``httpx2`` client."""
        proxy = httpx2.Request(request.method, str(request.url))
        response: aiohttp.ClientResponse | None = None
        async with httpx_client(self.outbound(), _BoundedTransport, timeout=_AUTH_SERVER_TIMEOUT) as client:
            try:
                async with contextlib.aclosing(_steps(await self.provider(), proxy)) as steps:
                    async for outgoing, reply in steps:
                        if outgoing is not proxy:
                            reply.set(await client.send(outgoing))
                            continue
                        if response is not None:
                            response.release()
                        authorization = proxy.headers.get("Authorization")
                        if authorization is not None:
                            request.headers["Authorization"] = authorization
                        else:
                            request.headers.popall("Authorization", None)
                        response = await handler(request)
                        challenge = [(k, v) for k, v in response.headers.items() if k.lower() == "www-authenticate"]
                        reply.set(httpx2.Response(response.status, headers=challenge, request=proxy))
            except AuthenticationError as exc:
                if response is not None:
                    response.release()
                raise self.failed(exc) from None
            except FunctionKernelException:
                if response is not None:
                    response.release()
                raise
            except Exception as exc:
                if response is not None:
                    response.release()
                raise self.failed(exc) from None
        if response is None:  # pragma: no cover - the SDK's flow always sends the request it authenticates
            raise self.failed(OAuthFlowError("the request was never sent"))
        if _challenged(response.status, response.headers.get("WWW-Authenticate")):
            response.release()
            raise self.refused(response.status)
        self.succeeded()
        return response

    # ------------------------------------------------------------------------------------- errors, secrets

    def failed(self, exc: BaseException) -> AuthenticationError:
        """The error for a flow that could not get a token (``exc`` is why); counted in :attr:`failures`."""
        error = exc if isinstance(exc, AuthenticationError) else self._error(self._why(exc))
        self.failures += 1
        self.last_failure = error
        self.failed_at = time.monotonic()
        return error

    def _error(self, why: str) -> AuthenticationError:
        return AuthenticationError(
            f"{self.label}: OAuth for identity {self.identity!r} failed: {why}.",
            server=self.server,
            identity=self.identity,
        )

    def refused(self, status: int) -> AuthenticationError:
        """The error for a server that refused a token it had just been given (HTTP ``status``)."""
        return self.failed(
            AuthenticationError(
                f"{self.label} refused the OAuth access token of identity {self.identity!r} (HTTP {status}), "
                "also right after a new one was obtained.",
                server=self.server,
                identity=self.identity,
            )
        )

    def succeeded(self) -> None:
        """A request went through with a token: earlier failures are history."""
        self.last_failure = None

    def _why(self, exc: BaseException) -> str:
        if isinstance(exc, AuthorizationDenied):
            return f"the authorization server refused the sign-in ({self.redact(exc)})"
        if isinstance(exc, TimeoutError):
            return f"nobody signed in within {self.oauth.login_timeout:g} s (login_timeout of the OAuth setting)"
        if isinstance(exc, httpx2.TransportError):
            return f"cannot reach the authorization server ({type(exc).__name__})"
        if isinstance(exc, FunctionKernelException):
            return exc.message
        detail = excerpt(exc, _MAX_DETAIL, marker="...", also=self._redactor)
        if isinstance(exc, OAuthFlowError):
            return detail or type(exc).__name__
        return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__

    def scrub(self, exc: FunctionKernelException) -> None:
        """Mask this flow's tokens and secrets in ``exc``: its message and, for an HTTP error, its body excerpt (a
        server may echo a token back); a cause whose text holds one is dropped."""
        if self.holds_secret(exc.message):
            exc.message = self.redact(exc.message)
            exc.args = (exc.message,)
        body = getattr(exc, "body", None)
        if isinstance(body, str) and self.holds_secret(body):
            exc.body = self.redact(body)  # type: ignore[attr-defined]
        if exc.__cause__ is not None and self.holds_secret(exc.__cause__):
            exc.__cause__ = None
            exc.__suppress_context__ = True

    def redact(self, text: object) -> str:
        """``text`` with every token and client secret of this flow masked."""
        return self._redactor.redact(text)

    def holds_secret(self, text: object) -> bool:
        """Whether ``text`` holds a token or client secret of this flow."""
        return self._redactor.holds(text)

    def remember(self, *secrets: str | None) -> None:
        """Mask these values in this flow's messages from now on (the last few tokens are kept)."""
        fresh = [s for s in secrets if s and s not in self._secrets]
        register_secret(*fresh)  # the secret gate: masked in every message, log record and span of the process
        if fresh:
            self._secrets = [*self._secrets, *fresh][-_KEPT_SECRETS:]
            self._redactor = Redactor(self._secrets, min_length=8)

    def _remember_record(self) -> None:
        tokens, client = self._record.tokens, self._record.client or {}
        self.remember(
            tokens.access_token if tokens else None,
            tokens.refresh_token if tokens else None,
            client.get("client_secret"),
        )
        with contextlib.suppress(FunctionKernelException):  # an unset variable is reported when the secret is needed
            self.remember(self.oauth.client_secret_value())


class _Carrier(Exception):
    """Carries an :class:`AuthenticationError` or an ``OutboundRefusedError`` out of aiohttp, which would wrap it (a
    ``ConnectionError``, so an ``OSError``) into a ``ClientOSError``; the REST adapter unwraps it with
    :meth:`OAuthFlow.unwrap`."""

    def __init__(self, error: ServerConnectionError) -> None:
        super().__init__(error.message)
        self.error = error


class _Storage:
    """The SDK's ``TokenStorage`` over the flow's record (and so its :class:`~kavalai.auth.TokenStore`)."""

    def __init__(self, flow: OAuthFlow) -> None:
        self._flow = flow
        self.provider: OAuthClientProvider | None = None

    async def get_tokens(self) -> OAuthToken | None:
        tokens = self._flow.record.tokens
        return _sdk_token(tokens) if tokens is not None else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + int(tokens.expires_in) if tokens.expires_in else None
        update: dict[str, Any] = {
            "tokens": StoredTokens(
                access_token=tokens.access_token,
                refresh_token=tokens.refresh_token,
                token_type=tokens.token_type,
                scope=tokens.scope,
                expires_in=tokens.expires_in,
                expires_at=expires_at,
            )
        }
        context = self.provider.context if self.provider is not None else None
        if context is not None and context.oauth_metadata is not None:
            update["authorization_server"] = context.auth_server_url or str(context.oauth_metadata.issuer)
            update["server_metadata"] = context.oauth_metadata.model_dump(mode="json", exclude_none=True)
            if context.protected_resource_metadata is not None:
                update["resource_metadata"] = context.protected_resource_metadata.model_dump(
                    mode="json", exclude_none=True
                )
        await self._flow.saved(self._flow.record.model_copy(update=update))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        flow = self._flow
        oauth = flow.oauth
        if oauth.client_id is not None:  # registered beforehand
            secret = oauth.client_secret_value()
            return OAuthClientInformationFull(
                client_id=oauth.client_id,
                client_secret=secret,
                redirect_uris=[AnyUrl(flow.redirect_uri)] if flow.redirect_uri else None,
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method=oauth.token_endpoint_auth_method if secret else "none",
                issuer=oauth.issuer,
            )
        stored = flow.record.client
        if stored is None:
            return None
        try:
            client = OAuthClientInformationFull.model_validate(stored)
        except ValidationError:
            return None
        registered = [str(uri) for uri in client.redirect_uris or []]
        if flow.redirect_uri is not None and flow.redirect_uri not in registered:
            return None  # registered for another redirect URI (another port): register again
        return client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        flow = self._flow
        if flow.oauth.client_id is not None and client_info.client_id != flow.oauth.client_id:
            raise OAuthRegistrationError(
                f"the server sent the flow to another authorization server than client_id's issuer "
                f"{flow.oauth.issuer!r}; its credentials are not sent there"
            )
        flow.remember(client_info.client_secret)
        client = client_info.model_dump(mode="json", exclude_none=True)
        await flow.saved(flow.record.model_copy(update={"client": client}))


class _HttpxAuth(httpx2.Auth):
    """The flow as an ``httpx2.Auth``: a valid token is attached directly; otherwise (or on a ``401``) the SDK's
    flow runs. A server that refuses a token it was just given, or a flow that fails, raises
    :class:`~kavalai.errors.AuthenticationError`."""

    def __init__(self, flow: OAuthFlow) -> None:
        self._flow = flow

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        flow = self._flow
        token = flow.bearer()
        if token is not None:
            request.headers["Authorization"] = f"Bearer {token}"
            response = yield request
            if not _challenged(response.status_code, response.headers.get("WWW-Authenticate")):
                return
        last: httpx2.Response | None = None
        try:
            async with contextlib.aclosing(_steps(await flow.provider(), request)) as steps:
                async for outgoing, reply in steps:
                    response = yield outgoing
                    if outgoing is request:
                        last = response
                    reply.set(response)
        except AuthenticationError as exc:
            raise flow.failed(exc) from None
        except FunctionKernelException:
            raise
        except Exception as exc:
            raise flow.failed(exc) from None
        if last is not None and _challenged(last.status_code, last.headers.get("WWW-Authenticate")):
            raise flow.refused(last.status_code)
        flow.succeeded()


class _Reply:
    """Where a driver of :func:`_steps` puts the answer to the request it was handed."""

    __slots__ = ("response",)

    def __init__(self) -> None:
        self.response: httpx2.Response | None = None

    def set(self, response: httpx2.Response) -> None:
        self.response = response


async def _steps(
    provider: OAuthClientProvider, request: httpx2.Request
) -> AsyncGenerator[tuple[httpx2.Request, _Reply]]:
    """The SDK's flow for ``request``, one request at a time: each is handed out with a :class:`_Reply` that the
    caller fills with its response before asking for the next."""
    flow = provider.async_auth_flow(request)
    try:
        outgoing = await flow.__anext__()
        while True:
            reply = _Reply()
            yield outgoing, reply
            if reply.response is None:  # pragma: no cover - a driver that did not answer
                raise RuntimeError("the OAuth flow's request was not answered")
            try:
                outgoing = await flow.asend(reply.response)
            except StopAsyncIteration:
                return
    finally:
        await flow.aclose()


def _challenged(status: int, www_authenticate: str | None) -> bool:
    """Whether a response asks for (other) credentials: a 401, or a 403 for want of scope."""
    if status == 401:
        return True
    return status == 403 and www_authenticate is not None and "insufficient_scope" in www_authenticate


def _sdk_token(tokens: StoredTokens) -> OAuthToken:
    return OAuthToken(
        access_token=tokens.access_token,
        expires_in=tokens.expires_in,
        scope=tokens.scope,
        refresh_token=tokens.refresh_token,
    )


def _loopback_port(client: dict[str, Any] | None) -> int | None:
    """The port of an earlier registration's loopback redirect URI, to keep that registration usable."""
    uris = (client or {}).get("redirect_uris") or []
    try:
        port = urlsplit(str(uris[0])).port if uris else None
    except ValueError:
        return None
    return port


async def open_browser(url: str, identity: str) -> None:
    """The default ``on_authorize``: open ``url`` in the system browser, and log it for a terminal without one."""
    logger.warning("Sign in as %r to continue: %s", identity, url)
    await anyio.to_thread.run_sync(webbrowser.open, url)


class _BoundedTransport(httpx2.AsyncBaseTransport):
    """Bounds what an authorization server sends (the SDK reads its answers whole): an uncompressed answer of at
    most 1 MiB. The MCP side has the same from its transports' own bounded client."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = "identity"
        response = await self._inner.handle_async_request(request)
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            await response.aclose()
            raise httpx2.DecodingError(f"the authorization server answered {encoding!r}-compressed, unasked")
        body = bytearray()
        async for chunk in cast(httpx2.AsyncByteStream, response.stream):
            body += chunk
            if len(body) > _MAX_AUTH_ANSWER:
                await response.aclose()
                raise httpx2.DecodingError(f"the authorization server's answer is larger than {_MAX_AUTH_ANSWER:,} B")
        await response.aclose()
        return httpx2.Response(response.status_code, headers=response.headers, content=bytes(body), request=request)

    async def aclose(self) -> None:
        await self._inner.aclose()
