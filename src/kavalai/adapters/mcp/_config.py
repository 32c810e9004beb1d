"""McpServer: the configuration of one MCP server (no I/O here, and no ``mcp`` import, so importing it is cheap)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core.core_schema import ValidatorFunctionWrapHandler

from kavalai.adapters._doubt import OnDoubt, on_doubt_field, tools_on_doubt_field
from kavalai.adapters._origin import command_origin, url_origin
from kavalai.adapters._settings import ServerName, masked_repr_args, settings_error
from kavalai.adapters.mcp._catalog import McpLogLevel
from kavalai.auth import OAuth
from kavalai.errors import ConfigurationError
from kavalai.kernel import Seconds
from kavalai.secrets import register_environment_values, register_variable

__all__ = ["McpServer", "McpTransport"]

#: How the kernel talks to an MCP server: a child process over stdin/stdout, streamable HTTP, or legacy SSE.
McpTransport = Literal["stdio", "streamable-http", "sse"]

_MASK = "***"


class McpServer(BaseModel):
    """An MCP server whose tools become ``mcp://<name>.<tool>`` tools.

    Give either ``command`` (a process the kernel starts and talks to over stdio) or ``url`` (a server reached
    over streamable HTTP, or legacy SSE with ``transport="sse"``), never both::

        McpServer(name="files", command="uvx", args=["mcp-server-filesystem", "/data"], env={"TOKEN": "..."})
        McpServer(name="search", url="https://search.example/mcp", headers={"Authorization": "Bearer ..."})

    The values of ``env`` and ``headers`` are treated as secrets: they never appear in a repr, an error
    message, a log line or a tool description.

    Raises:
        pydantic.ValidationError: the configuration is incomplete or contradictory (both ``command`` and ``url``,
            neither, a transport that does not fit, a bad name or timeout); its one message names the server, the
            fields at fault and the fix. Like pydantic's other models, and like Kaval.AI 1.0's ``McpServer``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    name: ServerName
    command: str | None = Field(default=None, description="The executable that starts a stdio server.")
    args: list[str] = Field(default_factory=list, description="Arguments passed to `command`.")
    env: dict[str, str] = Field(
        default_factory=dict,
        repr=False,
        description="Extra environment variables for the process (secret). The process inherits only a few "
        "safe variables (PATH, HOME, ...) besides these.",
    )
    cwd: Path | None = Field(default=None, description="The working directory of the process.")
    url: str | None = Field(
        default=None, repr=False, description="The endpoint of an HTTP server (shown without credentials)."
    )
    command_env: str | None = Field(
        default=None, description="Instead of `command`: the environment variable holding it, read at connect."
    )
    url_env: str | None = Field(
        default=None, description="Instead of `url`: the environment variable holding it, read at connect."
    )
    headers: dict[str, str] = Field(
        default_factory=dict, repr=False, description="HTTP headers sent with every request (secret)."
    )
    transport: McpTransport | None = Field(
        default=None,
        description="'stdio' for `command`; for `url`, 'streamable-http' (the default) or the legacy 'sse'.",
    )
    protocol: str = Field(
        default="auto",
        pattern=r"^(auto|legacy|\d{4}-\d{2}-\d{2})$",
        description="'auto' (the default): the stateless 2026-07-28 protocol when the server speaks it, else the "
        "initialize handshake (2025-11-25 and older); 'legacy' always shakes hands; a date (2024-11-05, 2025-03-26, "
        "2025-06-18, 2025-11-25, 2026-07-28) is spoken exactly, or the connect fails naming the versions both sides "
        "speak.",
    )
    extra_arguments: Literal["forbid", "allow"] = Field(
        default="forbid",
        description="Arguments a tool's inputSchema does not declare, where the schema does not say (no "
        "additionalProperties): 'forbid' (the default) refuses them before anything is sent, as a misspelt name "
        "would otherwise be dropped or sent unchecked; 'allow' sends them on, as JSON Schema allows.",
    )
    extra_output: Literal["allow", "ignore", "forbid"] = Field(
        default="allow",
        description="Fields of a tool's structured output that its outputSchema does not declare: 'allow' (the "
        "default) keeps them (servers add fields), whatever the schema says at its top level; 'ignore' drops "
        "them and 'forbid' fails the call, where the schema does not say (no additionalProperties), and the top "
        "level then follows its additionalProperties too.",
    )
    max_message_bytes: int = Field(
        default=32 * 1024 * 1024,
        gt=0,
        description="The largest message the server may send, in bytes (32 MiB by default): a longer one fails the "
        "connection instead of being buffered whole.",
    )
    connect_timeout: Seconds = Field(
        default=30.0, description="Seconds to start or reach the server and list its tools."
    )
    timeout: Seconds | None = Field(
        default=60.0,
        description="The default timeout of one tool call in seconds (60 by default); None for no limit.",
    )
    crash_limit: int = Field(
        default=5,
        gt=0,
        description="A server lost this many times within `crash_window` seconds, each time after it had connected "
        "(one that dies right after every restart), is in a crash loop: it is not started again until the oldest "
        "of those losses is `crash_window` old (5 by default).",
    )
    crash_window: Seconds = Field(default=60.0, description="The window of `crash_limit`, in seconds (60 by default).")
    sampling: Any = Field(
        default=None,
        repr=False,
        exclude=True,
        validation_alias=AliasChoices("sampling", "sampling_handler"),  # FastMCP's client calls it so
        description="Answers the server's sampling requests: `async handler(McpSamplingRequest) -> str | None` "
        "(None refuses), or a kavalai.llm client. None (the default): sampling is not offered.",
    )
    sampling_approval: Any = Field(
        default=None,
        repr=False,
        exclude=True,
        description="`approve(McpSamplingRequest) -> bool` (sync or async), asked before each sampling request.",
    )
    sampling_max_tokens: int = Field(
        default=4096, gt=0, description="The most tokens one sampling request gets (a larger ask is capped)."
    )
    sampling_max_requests: int = Field(
        default=100, gt=0, description="The most sampling requests one session may make; later ones are refused."
    )
    elicitation: Any = Field(
        default=None,
        repr=False,
        exclude=True,
        validation_alias=AliasChoices("elicitation", "elicitation_handler"),
        description="Answers the server's requests for user input: `async handler(McpElicitation)` returning the "
        "values as a mapping (accept), None (decline), an McpElicitationResult or the SDK's ElicitResult (anything "
        "else is refused to the server); or 'caller': whoever makes each call answers "
        "(an agent's on_elicitation, a workflow run's, `kavalai run`'s terminal). None (the default): not offered.",
    )
    on_change: Any = Field(
        default=None,
        repr=False,
        exclude=True,
        description="Called with an McpChange when the server says its tools, resources or prompts changed, or "
        "that a subscribed resource did (sync or async).",
    )
    log_handler: Any = Field(
        default=None,
        repr=False,
        exclude=True,
        description="Called (sync or async) with an McpLogMessage for each log message of the server, instead of "
        "Python logging under `kavalai.mcp.<server>` (the default).",
    )
    log_level: McpLogLevel | None = Field(
        default=None,
        description="The least severe level the server is asked to send. None (the default): what Python logging "
        "would show of `kavalai.mcp.<server>` (WARNING unless configured).",
    )
    roots: list[str] | None = Field(
        default=None,
        description="Folders (or file:// URIs) the server is told it may work in; None: roots are not offered.",
    )

    auth: OAuth | None = Field(
        default=None,
        description="OAuth 2.1 for an HTTP server: OAuth() to sign users in (authorization code with PKCE), or "
        "OAuth(grant='client_credentials', ...); tokens and connections are kept per identity. None: no OAuth.",
    )
    on_doubt: OnDoubt | None = on_doubt_field()
    tools_on_doubt: dict[str, OnDoubt] = tools_on_doubt_field()

    @model_validator(mode="after")
    def _register_secrets(self) -> McpServer:
        """The secret gate learns this server's secrets process-wide, however it was made: ``env`` values of secret
        variables, and any secret variable of the environment written into ``args``, ``url`` or ``headers``."""
        for variable, value in self.env.items():
            register_variable(variable, value)
        register_environment_values(*self.args, self.url, *self.headers.values(), *self.env.values())
        return self

    @model_validator(mode="after")
    def _check_auth(self) -> McpServer:
        if self.auth is None:
            return self
        if self.command is not None or self.command_env is not None:
            raise ValueError(f"MCP server {self.name!r} is a stdio server; auth (OAuth) applies only to a url.")
        if any(header.lower() == "authorization" for header in self.headers):
            raise ValueError(f"MCP server {self.name!r} has both auth and an Authorization header; give one of them.")
        return self

    @model_validator(mode="after")
    def _check_handlers(self) -> McpServer:
        for name in ("sampling_approval", "elicitation", "on_change", "log_handler"):
            value = getattr(self, name)
            if name == "elicitation" and value == "caller":
                continue  # answered by the caller of each tool call (kavalai.adapters.mcp.answering)
            if value is not None and not callable(value):
                raise ValueError(f"MCP server {self.name!r}: {name} must be a function, not {type(value).__name__}")
        sampling = self.sampling
        if sampling is not None and not callable(sampling) and not callable(getattr(sampling, "complete", None)):
            raise ValueError(
                f"MCP server {self.name!r}: sampling must be a function or a kavalai.llm client, "
                f"not {type(sampling).__name__}"
            )
        return self

    @model_validator(mode="after")
    def _check_kind(self) -> McpServer:
        where = f"MCP server {self.name!r}"
        commands = [n for n in ("command", "command_env") if getattr(self, n) is not None]
        urls = [n for n in ("url", "url_env") if getattr(self, n) is not None]
        if commands and urls:
            raise ValueError(
                f"{where}: Cannot specify both stdio (command/command_env) and HTTP (url/url_env) configurations: "
                "it has both a command and a url; give one of them."
            )
        if len(commands) > 1:
            raise ValueError(
                f"{where}: Only one of 'command' or 'command_env' can be specified for stdio; it has both."
            )
        if len(urls) > 1:
            raise ValueError(f"{where}: Only one of 'url' or 'url_env' can be specified for HTTP; it has both.")
        if not commands and not urls:
            raise ValueError(
                f"{where}: Either stdio (command/command_env) or HTTP (url/url_env) must be specified: it has "
                "neither a command nor a url. Give command=... (with args=[...]) for a server started as a process, "
                "or url=... for an HTTP server (or command_env=/url_env= naming a variable)."
            )
        if commands:
            if self.command is not None and not self.command.strip():
                raise ValueError(f"{where} has an empty command.")
            if self.transport not in (None, "stdio"):
                raise ValueError(
                    f"{where} is started with a command, so its transport is 'stdio', not {self.transport!r}."
                )
            if self.headers:
                raise ValueError(f"{where} is a stdio server; headers apply only to a url.")
        else:
            if self.transport == "stdio":
                raise ValueError(f"{where} has a url; use 'streamable-http' or 'sse', not 'stdio'.")
            if self.args or self.env or self.cwd is not None:
                raise ValueError(f"{where} has a url; args, env and cwd apply only to a command.")
            if self.url is not None:
                _check_http(where, self.url, self.target)
        return self

    # Defined after the other validators, so it also sees their errors (pydantic wraps them in this order).
    @model_validator(mode="wrap")
    @classmethod
    def _one_message(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(data)
        except ValidationError as exc:
            name = data.get("name") if isinstance(data, dict) else None
            raise settings_error(cls.__name__, f"MCP server configuration {name or '(unnamed)'!r}", exc) from None

    def resolved(self) -> McpServer:
        """This configuration with ``command_env``/``url_env`` read from the environment (at connect time).

        Raises:
            ConfigurationError: the variable is unset or empty, or holds a url that is not http(s).
        """
        for field, target in (("command_env", "command"), ("url_env", "url")):
            variable = getattr(self, field)
            if variable is None:
                continue
            value = os.environ.get(variable, "").strip()
            if not value:
                raise ConfigurationError(
                    f"{target.capitalize()} for MCP server {self.name!r} not found: environment variable "
                    f"{variable} is not set or empty."
                )
            if target == "url":
                try:
                    _check_http(f"MCP server {self.name!r}", value, f"${variable}")
                except ValueError as exc:
                    raise ConfigurationError(str(exc)) from None
            return self.model_copy(update={field: None, target: value})
        return self

    @property
    def kind(self) -> McpTransport:
        """The transport in use: ``"stdio"`` for a command, else ``transport`` or ``"streamable-http"``."""
        if self.command is not None or self.command_env is not None:
            return "stdio"
        return self.transport or "streamable-http"

    @property
    def origin(self) -> str | None:
        """Where its tools' effects go, as a durable step records it (:mod:`kavalai.adapters._origin`): the url's
        ``scheme://host:port``, or ``stdio:`` and the command line with secrets masked; ``None`` while a variable it
        names is unset."""
        try:
            found = self.resolved()
        except ConfigurationError:
            return None
        if found.command is not None:
            return command_origin(found.command, found.args, found.cwd)
        return url_origin(found.url or "")

    @property
    def target(self) -> str:
        """What the server is, for messages: the command line, or the url without credentials and query."""
        if self.command is not None:
            return " ".join([self.command, *self.args])
        if self.command_env is not None:
            return " ".join([f"${self.command_env}", *self.args])
        if self.url_env is not None:
            return f"${self.url_env}"
        return _safe_url(self.url or "")

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        yield from masked_repr_args(self._repr_fields())

    def _repr_fields(self) -> Iterator[tuple[str | None, Any]]:
        yield from super().__repr_args__()
        if self.url is not None:
            yield "url", _safe_url(self.url)
        if self.env:
            yield "env", dict.fromkeys(self.env, _MASK)
        if self.headers:
            yield "headers", dict.fromkeys(self.headers, _MASK)


def _check_http(where: str, url: str, shown: str) -> None:
    if urlsplit(url).scheme not in ("http", "https"):
        raise ValueError(f"{where} needs an http:// or https:// url, not {_safe_url(shown)!r}.")


def _safe_url(url: str) -> str:
    """``url`` without user info, query or fragment, which may hold credentials."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(unparsable url)"
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
