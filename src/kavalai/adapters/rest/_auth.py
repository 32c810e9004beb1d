"""Credentials of a REST server: HTTP Basic, a bearer token, or an API key in a header or query parameter.

Each secret is given directly (held as a :class:`pydantic.SecretStr`, so it never shows in a repr) or as the name
of an environment variable, read for every request (so a rotated or removed credential takes effect at the next
call). A variable that is unset or empty is a :class:`~kavalai.errors.ConfigurationError`, never a request sent
without auth. An
incomplete or contradictory setting is a ``ConfigurationError`` too (not a pydantic ``ValidationError``), and its
message never shows the values given.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidatorFunctionWrapHandler,
    model_validator,
)

from kavalai.auth import OAuth
from kavalai.errors import ConfigurationError

__all__ = ["ApiKeyAuth", "Auth", "BasicAuth", "BearerAuth", "Credentials", "read_env", "validated"]

_CONFIG = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)  # inputs may be secrets


@dataclass(frozen=True, slots=True, repr=False)
class Credentials:
    """What an auth setting adds to every request, with the secret values kept for redaction.

    Attributes:
        headers: headers to send (``Authorization`` or the API key header).
        query: query parameters to send (an API key in the query).
        secrets: the secret strings, so messages and excerpts can be scrubbed of them.
    """

    headers: dict[str, str] = field(default_factory=dict)
    query: tuple[tuple[str, str], ...] = ()
    secrets: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"Credentials(headers={sorted(self.headers)}, query={[k for k, _ in self.query]})"


def read_env(variable: str, *, server: str, what: str) -> str:
    """The value of ``variable``; :class:`ConfigurationError` naming the server and the variable if unset or empty."""
    value = os.environ.get(variable, "")
    if not value:
        raise ConfigurationError(
            f"REST server {server!r}: environment variable {variable} ({what}) is not set or empty. "
            f"Set it, or give the {what} directly."
        )
    return value


def validated(data: Any, handler: ValidatorFunctionWrapHandler, what: str) -> Any:
    """Run pydantic's validation of a setting; turn its ValidationError into a :class:`ConfigurationError`.

    The message names ``what`` and each field with its problem, never the value given (it may be a secret).
    """
    try:
        return handler(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False, include_input=False, include_context=False):
            where = ".".join(str(part) for part in error["loc"])
            message = str(error["msg"]).removeprefix("Value error, ")
            problems.append(f"{where}: {message}" if where else message)
        raise ConfigurationError(f"Invalid {what}: {'; '.join(problems)}.") from None


def _secret(value: SecretStr | None, variable: str | None, *, server: str, what: str) -> str:
    if variable is not None:
        return read_env(variable, server=server, what=what)
    # The model validators require one of the two, so value is set here.
    return value.get_secret_value() if value is not None else ""


class _AuthSetting(BaseModel):
    """The base of the auth settings: each field in ``_given_once`` is given directly or as ``<field>_env``."""

    model_config = _CONFIG
    _given_once: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="after")
    def _check(self) -> Self:
        for name in self._given_once:
            if (getattr(self, name) is None) == (getattr(self, f"{name}_env") is None):
                raise ValueError(f"give exactly one of {name} or {name}_env")
        return self

    @model_validator(mode="wrap")
    @classmethod
    def _configuration_error(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return validated(data, handler, cls.__name__)

    @property
    def reads_env(self) -> bool:
        """Whether a secret comes from an environment variable (then it is read for every request)."""
        return any(getattr(self, f"{name}_env") is not None for name in self._given_once)

    @property
    def header_names(self) -> tuple[str, ...]:
        """The headers that carry the credentials (never sent to another origin)."""
        return ("Authorization",)


class BasicAuth(_AuthSetting):
    """HTTP Basic auth: ``username`` and ``password``, each given directly or by environment variable name."""

    _given_once: ClassVar[tuple[str, ...]] = ("username", "password")

    type: Literal["basic"] = "basic"
    username: str | None = None
    password: SecretStr | None = None
    username_env: str | None = Field(default=None, description="Environment variable holding the username.")
    password_env: str | None = Field(default=None, description="Environment variable holding the password.")

    def credentials(self, server: str) -> Credentials:
        """The ``Authorization: Basic ...`` header for ``server`` (reads environment variables now)."""
        if self.username_env is not None:
            user = read_env(self.username_env, server=server, what="username")
        else:
            user = self.username or ""
        password = _secret(self.password, self.password_env, server=server, what="password")
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        return Credentials(headers={"Authorization": f"Basic {token}"}, secrets=(password, token))


class BearerAuth(_AuthSetting):
    """A bearer token (``Authorization: Bearer <token>``), given directly or by environment variable name."""

    _given_once: ClassVar[tuple[str, ...]] = ("token",)

    type: Literal["bearer"] = "bearer"
    token: SecretStr | None = None
    token_env: str | None = Field(default=None, description="Environment variable holding the token.")

    def credentials(self, server: str) -> Credentials:
        """The ``Authorization: Bearer ...`` header for ``server`` (reads environment variables now)."""
        token = _secret(self.token, self.token_env, server=server, what="bearer token")
        return Credentials(headers={"Authorization": f"Bearer {token}"}, secrets=(token,))


class ApiKeyAuth(_AuthSetting):
    """An API key sent in a header (``location="header"``, the default) or a query parameter (``"query"``).

    ``name`` is the header or parameter name; the key is given directly or by environment variable name.
    """

    _given_once: ClassVar[tuple[str, ...]] = ("key",)

    type: Literal["api_key"] = "api_key"
    name: str = Field(default="X-API-Key", min_length=1, description="The header or query parameter name.")
    location: Literal["header", "query"] = "header"
    key: SecretStr | None = None
    key_env: str | None = Field(default=None, description="Environment variable holding the key.")

    @property
    def header_names(self) -> tuple[str, ...]:
        """The header that carries the key, when it goes in a header."""
        return (self.name,) if self.location == "header" else ()

    def credentials(self, server: str) -> Credentials:
        """The header or query parameter carrying the key for ``server`` (reads environment variables now)."""
        key = _secret(self.key, self.key_env, server=server, what="API key")
        if self.location == "query":
            return Credentials(query=((self.name, key),), secrets=(key,))
        return Credentials(headers={self.name: key}, secrets=(key,))


#: Any of the auth settings, told apart by ``type`` when loaded from a dict (``{"type": "bearer", ...}``);
#: :class:`kavalai.auth.OAuth` (``"oauth"``) gets its tokens per request and identity.
Auth = Annotated[BasicAuth | BearerAuth | ApiKeyAuth | OAuth, Field(discriminator="type")]
