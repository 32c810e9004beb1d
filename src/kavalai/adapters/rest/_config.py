"""RestServer: the configuration of one REST server (no I/O here, so importing it is cheap)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Final, Self
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from kavalai.adapters._doubt import OnDoubt, on_doubt_field, tools_on_doubt_field
from kavalai.adapters._origin import url_origin
from kavalai.adapters._settings import ServerName, masked_repr_args, settings_error
from kavalai.adapters.rest._auth import Auth, BasicAuth, Credentials, read_env
from kavalai.auth import OAuth
from kavalai.errors import ConfigurationError
from kavalai.kernel import Seconds
from kavalai.secrets import MASK, Redactor, register_environment_values, register_secret

__all__ = ["ResolvedServer", "RestServer"]


class RestServer(BaseModel):
    """A REST server whose endpoints become ``rest://<name>.<tool>`` tools.

    Example::

        RestServer(name="shop", url="https://shop.example/api", auth=BearerAuth(token_env="SHOP_TOKEN"))

    Give the base URL as ``url`` or as the name of an environment variable holding it (``url_env``). Header
    values and secrets never appear in the repr.

    Raises:
        pydantic.ValidationError: the configuration is incomplete or invalid (both or neither of ``url`` and
            ``url_env``, a URL that is not http(s) or holds credentials, a bad name or timeout); its one message
            names the server, the fields at fault and the fix. Like pydantic's other models, and like Kaval.AI
            1.0's ``RestServer``. (An auth setting such as ``BearerAuth`` checks itself when it is made.)
    """

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    name: ServerName
    url: str | None = Field(default=None, description="The base URL; tool paths are relative to it.")
    url_env: str | None = Field(default=None, description="Environment variable holding the base URL.")
    headers: dict[str, str] = Field(default_factory=dict, description="Headers sent with every request.")
    timeout: Seconds | None = Field(
        default=30.0, description="Default timeout of a call in seconds; None for no limit."
    )
    verify: bool | str = Field(
        default=True, description="Verify TLS certificates (default); False to skip, or a CA bundle path."
    )
    auth: Auth | None = Field(default=None, description="BasicAuth, BearerAuth, ApiKeyAuth, or OAuth (kavalai.auth).")
    deadline_header: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$",
        description="A header in which each request tells the server the milliseconds its call has left (the "
        "smaller of the call's timeout and the deadline of the run around it) as a non-negative decimal integer, "
        "e.g. 'X-Request-Deadline-Ms: 4999'; sent only when the call has a deadline. Not a credential, framing or "
        "hop-by-hop header (see docs/tools.md). None (the default) sends nothing: the server must opt in.",
    )
    max_connections: int = Field(default=100, ge=1, description="Size of the server's connection pool.")
    max_response_bytes: int = Field(
        default=64 * 1024 * 1024,
        gt=0,
        description="The largest response body accepted, counted after decompression (64 MiB by default).",
    )
    username_env: str | None = Field(
        default=None,
        description="Kaval.AI 1.0's Basic auth: the variable holding the username (with password_env). Unlike "
        "BasicAuth, the request goes without auth when either variable is unset.",
    )
    password_env: str | None = Field(default=None, description="Kaval.AI 1.0's Basic auth: the password's variable.")
    on_doubt: OnDoubt | None = on_doubt_field()
    tools_on_doubt: dict[str, OnDoubt] = tools_on_doubt_field()

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: str | None) -> str | None:
        return None if url is None else _checked_url(url)

    @model_validator(mode="after")
    def _register_secrets(self) -> Self:
        """The secret gate learns any secret variable of the environment written into ``url`` or ``headers`` in Python
        (``RestServer(url=f"https://api.example/bot{os.environ['BOT_TOKEN']}")``)."""
        register_environment_values(self.url, *self.headers.values())
        return self

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.url is not None and self.url_env is not None:
            raise ValueError(
                f"REST server {self.name!r}: Only one of 'url' or 'url_env' can be specified: give url= or url_env=."
            )
        if self.url is None and self.url_env is None:
            raise ValueError(
                f"REST server {self.name!r}: Either 'url' or 'url_env' must be specified: give url= (the base URL) or "
                "url_env= (the variable holding it)."
            )
        if (self.username_env is None) != (self.password_env is None):
            raise ValueError("give both username_env and password_env, or neither")
        if self.username_env is not None and self.auth is not None:
            raise ValueError("give auth=BasicAuth(username_env=..., password_env=...) or username_env/password_env")
        return self

    @model_validator(mode="wrap")
    @classmethod
    def _one_message(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        name = data.get("name") if isinstance(data, dict) else None
        where = f"REST server configuration {name!r}" if isinstance(name, str) else "REST server configuration"
        try:
            return handler(data)
        except (ValidationError, ConfigurationError) as exc:
            raise settings_error(cls.__name__, where, exc) from None

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for key, value in masked_repr_args(super().__repr_args__()):
            if key == "headers" and isinstance(value, dict):
                yield key, dict.fromkeys(value, MASK)
            else:
                yield key, value

    @model_validator(mode="after")
    def _check_deadline_header(self) -> Self:
        header = self.deadline_header
        if header is None:
            return self
        lowered = header.lower()
        taken = {name.lower() for name in (*self.headers, *self._auth_header_names())}
        if lowered in _NOT_DEADLINE_HEADERS or _is_sensitive(header) or lowered in taken:
            raise ValueError(
                f"deadline_header {header!r} would replace a credential, framing or hop-by-hop header, or one this "
                "server already sends: name a header of its own, such as 'X-Request-Deadline-Ms'"
            )
        return self

    def _auth_header_names(self) -> tuple[str, ...]:
        if self.username_env is not None:
            return ("Authorization",)
        if self.auth is not None and not isinstance(self.auth, OAuth):
            return self.auth.header_names
        return ()

    @model_validator(mode="after")
    def _check_oauth(self) -> Self:
        if isinstance(self.auth, OAuth) and any(name.lower() == "authorization" for name in self.headers):
            raise ValueError("give auth=OAuth(...) or an Authorization header, not both")
        return self

    def resolve(self, *, env_credentials: bool = True) -> ResolvedServer:
        """Read the URL and credentials (from the environment where asked) into a :class:`ResolvedServer`.

        With ``env_credentials=False`` the credentials held in environment variables are left out (a session
        reads them for every request, :meth:`request_credentials`); the headers carrying them are still named
        in ``secret_headers``.

        Raises:
            ConfigurationError: an environment variable is unset or empty, or holds an invalid URL.
        """
        if self.url_env is not None:
            if not os.environ.get(self.url_env):
                raise ConfigurationError(
                    f"URL for REST server {self.name!r} not found: environment variable {self.url_env} (base URL) "
                    "is not set or empty. Set it, or give url= directly."
                )
            raw = read_env(self.url_env, server=self.name, what="base URL")
            try:
                url = _checked_url(raw)
            except ValueError as exc:
                raise ConfigurationError(
                    f"REST server {self.name!r}: environment variable {self.url_env}: {exc}"
                ) from exc
        else:
            url = self.url or ""
        # OAuth tokens go per request and identity (kavalai.adapters.rest._oauth).
        if isinstance(self.auth, OAuth) or (self.credentials_per_request and not env_credentials):
            credentials = Credentials()
        else:
            credentials = self.request_credentials() if self.credentials_per_request else self._static_credentials()
        headers = {**self.headers, **credentials.headers}
        sensitive = [name for name in self.headers if _is_sensitive(name)]
        secrets = credentials.secrets + tuple(self.headers[name] for name in sensitive)
        return ResolvedServer(
            name=self.name,
            base_url=url.rstrip("/"),
            headers=headers,
            query=credentials.query,
            secrets=tuple(s for s in secrets if s),
            secret_headers=tuple(dict.fromkeys([*credentials.headers, *self._env_header_names(), *sensitive])),
        )

    @property
    def origin(self) -> str | None:
        """Where its tools' effects go, as a durable step records it (:mod:`kavalai.adapters._origin`): the base URL's
        ``scheme://host:port`` (``url_env`` read now); ``None`` while it has none."""
        url = self.url if self.url_env is None else os.environ.get(self.url_env, "")
        return url_origin(url or "")

    @property
    def credentials_per_request(self) -> bool:
        """Whether the credentials come from environment variables, read for every request (``username_env`` /
        ``password_env``, or an auth setting's ``*_env`` field)."""
        if self.username_env is not None:
            return True
        return self.auth is not None and not isinstance(self.auth, OAuth) and self.auth.reads_env

    def request_credentials(self) -> Credentials:
        """The credentials read from the environment now (for one request); none when the server has none there.

        ``username_env``/``password_env`` with either variable unset or empty give no credentials (the request
        goes without auth, as in Kaval.AI 1.0); an auth setting's unset variable raises.

        Raises:
            ConfigurationError: an auth setting's variable is unset or empty.
        """
        if self.auth is not None and not isinstance(self.auth, OAuth) and self.auth.reads_env:
            return self.auth.credentials(self.name)
        return self._env_basic_auth()

    def _static_credentials(self) -> Credentials:
        if self.auth is None or isinstance(self.auth, OAuth):
            return Credentials()
        return self.auth.credentials(self.name)

    def _env_header_names(self) -> tuple[str, ...]:
        if not self.credentials_per_request:
            return ()
        if self.auth is not None and not isinstance(self.auth, OAuth):
            return self.auth.header_names
        return ("Authorization",)

    def _env_basic_auth(self) -> Credentials:
        if self.username_env is None or self.password_env is None:
            return Credentials()
        user, password = os.environ.get(self.username_env, ""), os.environ.get(self.password_env, "")
        if not (user and password):  # Kaval.AI 1.0 sent no auth then; BasicAuth(...) refuses instead
            return Credentials()
        return BasicAuth(username=user, password=SecretStr(password)).credentials(self.name)


@dataclass(frozen=True, slots=True, repr=False)
class ResolvedServer:
    """A server's settings with URL and credentials read, ready for requests.

    Attributes:
        name: the server name.
        base_url: the base URL without a trailing slash.
        headers: default headers, auth included.
        query: query parameters added to every request (an API key in the query).
        secrets: secret values to scrub from messages and body excerpts.
        secret_headers: names of the headers that carry credentials, never sent to another origin.
    """

    name: str
    base_url: str
    headers: dict[str, str]
    query: tuple[tuple[str, str], ...]
    secrets: tuple[str, ...]
    secret_headers: tuple[str, ...] = ()

    redactor: Redactor = field(init=False, compare=False)
    #: Headers of credentials read for one request (:meth:`with_credentials`), sent with it.
    request_headers: dict[str, str] = field(init=False, compare=False, default_factory=dict)
    #: Whether :attr:`headers` names a ``Content-Type`` (a request's own body type is sent over it).
    content_type_set: bool = field(init=False, compare=False, default=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "redactor", Redactor(self.secrets))
        object.__setattr__(self, "content_type_set", any(name.lower() == "content-type" for name in self.headers))
        register_secret(*self.secrets)  # the secret gate: masked in every message, log record and span too

    def holds_secret(self, text: str) -> bool:
        """Whether ``text`` contains one of the secret values."""
        return self.redactor.holds(text)

    def redact(self, text: str) -> str:
        """``text`` with every secret value replaced by ``***``."""
        return self.redactor.redact(text)

    def with_credentials(self, credentials: Credentials) -> ResolvedServer:
        """These settings with ``credentials`` (read for one request) added: their query parameters and secrets;
        their headers go with the request (:attr:`request_headers`)."""
        if not (credentials.headers or credentials.query or credentials.secrets):
            return self
        resolved = replace(
            self,
            query=self.query + credentials.query,
            secrets=self.secrets + tuple(s for s in credentials.secrets if s),
        )
        object.__setattr__(resolved, "request_headers", credentials.headers)
        return resolved

    def __repr__(self) -> str:
        return f"ResolvedServer(name={self.name!r}, base_url={self.base_url!r})"


_SENSITIVE_WORDS = ("auth", "token", "key", "secret", "password", "cookie")
# Headers a deadline may never replace: credentials, the message's framing, hop-by-hop headers (RFC 9110 7.6.1),
# and those kavalai sets itself.
_NOT_DEADLINE_HEADERS: Final = frozenset(
    {
        "authorization", "proxy-authorization", "proxy-authenticate", "www-authenticate", "cookie", "set-cookie",
        "content-length", "transfer-encoding", "content-encoding", "content-type", "content-range", "trailer",
        "host", "connection", "keep-alive", "proxy-connection", "te", "upgrade", "expect", "via", "forwarded",
        "accept-encoding", "range", "idempotency-key", "x-forwarded-for", "x-forwarded-host", "x-real-ip",
    }
)  # fmt: skip


def _is_sensitive(header: str) -> bool:
    lowered = header.lower()
    return any(word in lowered for word in _SENSITIVE_WORDS)


def _checked_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise ValueError("the base URL must not hold credentials; use auth=BasicAuth(...) instead")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"the base URL must be an http:// or https:// URL with a host, not {url!r}")
    if parts.query or parts.fragment:
        raise ValueError("the base URL must not have a query or fragment; use headers or auth for those")
    return url
