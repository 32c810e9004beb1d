"""OAuth: the setting that makes an HTTP MCP server or a REST server use OAuth 2.1 (no I/O, cheap to import)."""

from __future__ import annotations

import inspect
import ipaddress
import os
from collections.abc import Awaitable, Callable
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Literal, Self, TypeAlias
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, field_validator, model_validator

from kavalai.auth._identity import DEFAULT_IDENTITY, check_identity
from kavalai.auth._store import FileTokenStore, MemoryTokenStore, TokenStore
from kavalai.errors import ConfigurationError
from kavalai.kernel import Seconds

if TYPE_CHECKING:
    from kavalai.auth._flow import OAuthFlow
    from kavalai.auth._loopback import LoopbackRedirect

__all__ = ["OAuth", "OnAuthorize"]

#: Shows the user where to sign in: ``on_authorize(url, identity)``, sync or async. It returns once the user has
#: been sent there (a browser opened, a link shown); the code comes back through the loopback redirect listener.
OnAuthorize: TypeAlias = Callable[[str, str], Awaitable[None] | None]


class _Runtime:
    """What every copy of one OAuth setting shares while the process runs: the flows and the redirect listener."""

    def __init__(self) -> None:
        self.flows: dict[tuple[str, str], OAuthFlow] = {}
        self.listener: LoopbackRedirect | None = None


class OAuth(BaseModel):
    """OAuth 2.1 for an HTTP MCP server (``McpServer(url=..., auth=OAuth())``) or a REST server
    (``RestServer(url=..., auth=OAuth())``).

    With no arguments it is the interactive flow an MCP client is expected to run: on the server's first ``401`` the
    protected resource's metadata (RFC 9728) names its authorization server, whose metadata (RFC 8414) gives the
    endpoints; the client registers itself (dynamic registration, RFC 7591, or the URL of a client ID metadata
    document), the user signs in through ``on_authorize`` (the system browser by default) and the code comes back to
    a loopback listener; the code is exchanged with PKCE for tokens, which are kept in ``store`` and refreshed when
    they expire. With ``grant="client_credentials"`` a service signs in with its own ``client_id`` and secret.

    Tokens are kept per identity (:func:`kavalai.auth.identity`), and each identity has connections of its own.

    The flows themselves are the MCP SDK's (``mcp.client.auth``); this setting chooses which and where tokens live.

    Raises:
        pydantic.ValidationError: a contradictory or incomplete setting (a secret without ``client_id`` or
            ``issuer``, client credentials without a secret, a client metadata URL that is not ``https://``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    type: Literal["oauth"] = "oauth"
    grant: Literal["authorization_code", "client_credentials"] = Field(
        default="authorization_code",
        description="'authorization_code' (a user signs in, with PKCE) or 'client_credentials' (a service).",
    )
    client_id: str | None = Field(
        default=None, description="A client registered beforehand; None: register dynamically (or use the URL)."
    )
    client_secret: SecretStr | None = Field(default=None, description="The secret of client_id, if it has one.")
    client_secret_env: str | None = Field(
        default=None, description="Instead of client_secret: the environment variable holding it."
    )
    issuer: str | None = Field(
        default=None,
        description="The issuer URL of the authorization server client_id belongs to; the client's secret is sent "
        "to no other. Required with a secret.",
    )
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post"] = Field(
        default="client_secret_basic", description="How a client with a secret authenticates at the token endpoint."
    )
    client_metadata_url: str | None = Field(
        default=None,
        description="The https:// URL of a client ID metadata document describing this client; used as the client "
        "ID where the authorization server supports it, instead of dynamic registration.",
    )
    client_name: str = Field(default="kavalai", description="The client's name shown on the sign-in page.")
    identity: str = Field(
        default=DEFAULT_IDENTITY, description="The identity used outside any kavalai.auth.identity(...) block."
    )
    store: Any = Field(
        default_factory=MemoryTokenStore,
        exclude=True,
        description="A TokenStore (MemoryTokenStore by default), or the path of a FileTokenStore.",
    )
    on_authorize: Any = Field(
        default=None,
        exclude=True,
        repr=False,
        description="on_authorize(url, identity), sync or async: send the user to url to sign in. None: open the "
        "system browser (and log the URL).",
    )
    redirect_host: Literal["127.0.0.1", "localhost", "::1"] = Field(
        default="127.0.0.1", description="The loopback address the redirect comes back to."
    )
    redirect_port: int = Field(
        default=0, ge=0, le=65535, description="The port of the redirect listener; 0: one is chosen and kept."
    )
    redirect_path: str = Field(default="/callback", pattern=r"^/[^?#\s]*$", description="The redirect URI's path.")
    login_timeout: Seconds = Field(
        default=300.0, description="Seconds to wait for the user to sign in before the flow fails."
    )

    allowed_networks: tuple[str, ...] = Field(
        default=(),
        description="Networks (CIDR) a URL the server's OAuth metadata names may reach although private or loopback "
        "(an authorization server on your intranet). Hosts you configured (the server's url, issuer) need none.",
    )

    _runtime: _Runtime = PrivateAttr(default_factory=_Runtime)

    @field_validator("store", mode="before")
    @classmethod
    def _store(cls, value: Any) -> Any:
        if isinstance(value, str | PurePath):
            return FileTokenStore(value)
        if not isinstance(value, TokenStore):
            raise ValueError(f"store must be a TokenStore or a file path, not {type(value).__name__}")
        return value

    @field_validator("identity")
    @classmethod
    def _identity(cls, value: str) -> str:
        return check_identity(value)

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.on_authorize is not None and not callable(self.on_authorize):
            raise ValueError(f"on_authorize must be a function, not {type(self.on_authorize).__name__}")
        if self.client_secret is not None and self.client_secret_env is not None:
            raise ValueError("give client_secret or client_secret_env, not both")
        has_secret = self.client_secret is not None or self.client_secret_env is not None
        if has_secret and self.client_id is None:
            raise ValueError("a client secret needs the client_id it belongs to")
        if has_secret and self.issuer is None:
            raise ValueError(
                "a client secret needs issuer= (the authorization server it was issued by), so that it is never "
                "sent to another one"
            )
        for entry in self.allowed_networks:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError as exc:
                raise ValueError(f"allowed_networks entry {entry!r} is not an IP network: {exc}") from None
        if self.issuer is not None and urlsplit(self.issuer).scheme not in ("http", "https"):
            raise ValueError("issuer must be the authorization server's http(s) issuer URL")
        if self.grant == "client_credentials":
            if not has_secret:
                raise ValueError("grant='client_credentials' needs client_id, client_secret (or client_secret_env)")
            if self.client_metadata_url is not None:
                raise ValueError("client_metadata_url applies to grant='authorization_code' only")
        if self.client_metadata_url is not None:
            url = urlsplit(self.client_metadata_url)
            if url.scheme != "https" or url.path in ("", "/"):
                raise ValueError("client_metadata_url must be an https:// URL with a path (the document's address)")
            if self.client_id is not None:
                raise ValueError("give client_id or client_metadata_url, not both")
        return self

    # ------------------------------------------------------------------------------------------ for adapters

    def for_identity(self, name: str) -> OAuth:
        """This setting acting for identity ``name`` (sharing its store, flows and redirect listener)."""
        if name == self.identity:
            return self
        return self.model_copy(update={"identity": check_identity(name)})

    def client_secret_value(self) -> str | None:
        """The client secret (read from ``client_secret_env`` now, if given), or ``None``.

        Raises:
            ConfigurationError: ``client_secret_env`` names a variable that is unset or empty.
        """
        if self.client_secret is not None:
            return self.client_secret.get_secret_value()
        if self.client_secret_env is None:
            return None
        value = os.environ.get(self.client_secret_env, "")
        if not value:
            raise ConfigurationError(
                f"OAuth: environment variable {self.client_secret_env} (the client secret) is not set or empty."
            )
        return value

    def flow(self, server: str, resource: str, *, kind: str = "server") -> OAuthFlow:
        """The flow of ``resource`` (the server's URL) for this setting's identity; ``kind`` and ``server`` name it
        in messages (``MCP server 'files'``). One flow per resource and identity lives as long as the setting."""
        from kavalai.auth._flow import OAuthFlow  # the MCP SDK's OAuth client, loaded when used

        key = (resource, self.identity)
        flow = self._runtime.flows.get(key)
        if flow is None:
            flow = self._runtime.flows[key] = OAuthFlow(self, server, resource, kind=kind)
        return flow

    def listener(self) -> LoopbackRedirect:
        """The redirect listener shared by this setting's interactive flows."""
        if self._runtime.listener is None:
            from kavalai.auth._loopback import LoopbackRedirect  # aiohttp.web, loaded when used

            self._runtime.listener = LoopbackRedirect(self.redirect_host, self.redirect_port, self.redirect_path)
        return self._runtime.listener

    async def tell_user(self, url: str) -> None:
        """Send the user to ``url`` with ``on_authorize`` (or the system browser)."""
        handler = self.on_authorize
        if handler is None:
            from kavalai.auth._flow import open_browser

            handler = open_browser
        outcome = handler(url, self.identity)
        if inspect.isawaitable(outcome):
            await outcome
