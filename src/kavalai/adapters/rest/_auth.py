"""Credentials of a REST server: HTTP Basic, a bearer token, or an API key in a header or query parameter.

Each secret is given directly (held as a :class:`pydantic.SecretStr`, so it never shows in a repr) or as the name
of an environment variable read when the server is registered and again whenever its session opens. A variable
that is unset or empty is a :class:`~kavalai.errors.ConfigurationError`, never a request sent without auth.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from kavalai.errors import ConfigurationError

__all__ = ["ApiKeyAuth", "Auth", "BasicAuth", "BearerAuth", "Credentials", "read_env"]

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


def _secret(value: SecretStr | None, variable: str | None, *, server: str, what: str) -> str:
    if variable is not None:
        return read_env(variable, server=server, what=what)
    # The model validators require one of the two, so value is set here.
    return value.get_secret_value() if value is not None else ""


def _one_of(value: object, variable: object, what: str) -> None:
    if (value is None) == (variable is None):
        raise ValueError(f"give exactly one of {what} or {what}_env")


class BasicAuth(BaseModel):
    """HTTP Basic auth: ``username`` and ``password``, each given directly or by environment variable name."""

    model_config = _CONFIG

    type: Literal["basic"] = "basic"
    username: str | None = None
    password: SecretStr | None = None
    username_env: str | None = Field(default=None, description="Environment variable holding the username.")
    password_env: str | None = Field(default=None, description="Environment variable holding the password.")

    @model_validator(mode="after")
    def _check(self) -> Self:
        _one_of(self.username, self.username_env, "username")
        _one_of(self.password, self.password_env, "password")
        return self

    def credentials(self, server: str) -> Credentials:
        """The ``Authorization: Basic ...`` header for ``server`` (reads environment variables now)."""
        if self.username_env is not None:
            user = read_env(self.username_env, server=server, what="username")
        else:
            user = self.username or ""
        password = _secret(self.password, self.password_env, server=server, what="password")
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        return Credentials(headers={"Authorization": f"Basic {token}"}, secrets=(password, token))


class BearerAuth(BaseModel):
    """A bearer token (``Authorization: Bearer <token>``), given directly or by environment variable name."""

    model_config = _CONFIG

    type: Literal["bearer"] = "bearer"
    token: SecretStr | None = None
    token_env: str | None = Field(default=None, description="Environment variable holding the token.")

    @model_validator(mode="after")
    def _check(self) -> Self:
        _one_of(self.token, self.token_env, "token")
        return self

    def credentials(self, server: str) -> Credentials:
        """The ``Authorization: Bearer ...`` header for ``server`` (reads environment variables now)."""
        token = _secret(self.token, self.token_env, server=server, what="bearer token")
        return Credentials(headers={"Authorization": f"Bearer {token}"}, secrets=(token,))


class ApiKeyAuth(BaseModel):
    """An API key sent in a header (``location="header"``, the default) or a query parameter (``"query"``).

    ``name`` is the header or parameter name; the key is given directly or by environment variable name.
    """

    model_config = _CONFIG

    type: Literal["api_key"] = "api_key"
    name: str = Field(default="X-API-Key", min_length=1, description="The header or query parameter name.")
    location: Literal["header", "query"] = "header"
    key: SecretStr | None = None
    key_env: str | None = Field(default=None, description="Environment variable holding the key.")

    @model_validator(mode="after")
    def _check(self) -> Self:
        _one_of(self.key, self.key_env, "key")
        return self

    def credentials(self, server: str) -> Credentials:
        """The header or query parameter carrying the key for ``server`` (reads environment variables now)."""
        key = _secret(self.key, self.key_env, server=server, what="API key")
        if self.location == "query":
            return Credentials(query=((self.name, key),), secrets=(key,))
        return Credentials(headers={self.name: key}, secrets=(key,))


#: Any of the auth settings, told apart by ``type`` when loaded from a dict (``{"type": "bearer", ...}``).
Auth = Annotated[BasicAuth | BearerAuth | ApiKeyAuth, Field(discriminator="type")]
