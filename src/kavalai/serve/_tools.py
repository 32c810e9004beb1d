"""Which kernel tools an MCP server offers, under which names, with which schemas.

MCP hosts pass tool names on to model providers, which accept only ``^[a-zA-Z0-9_-]{1,64}$``. The names are the
ones agents use (:class:`kavalai.llm.names.ToolNameMap`): ``python://fs.ls`` is ``python_fs_ls``; names that would
clash or be too long end in ``_`` and 8 hex digits of the URI's SHA-256, so the mapping does not depend on the order
of the tools. :class:`ExposedTools` keeps the mapping both ways. With ``names="own"`` each tool is served under its
own name instead (an MCP server's tool as that server names it, ``python://fs.ls`` as ``fs.ls``), and two tools that
would share one are refused with :class:`~kavalai.errors.ConfigurationError` naming both.

An ``mcp://`` tool is passed through: listed with the output schema its server declared (none when it declared
none), since its calls return what the server sent (see :mod:`kavalai.serve._server`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from typing import Any, Final, Literal, TypeAlias

import mcp_types as types

from kavalai.errors import ConfigurationError
from kavalai.kernel import Kernel, ToolDefinition, ToolURI
from kavalai.llm.names import ToolNameMap

__all__ = [
    "NAMING",
    "ExposedTools",
    "Naming",
    "mcp_input_schema",
    "mcp_output_schema",
    "own_names",
    "passed_output_schema",
    "passes_through",
]

#: How served tools, prompts and resources are named: ``"prefixed"`` (scheme and server in front, collision-free
#: whatever is served) or ``"own"`` (their own names; a collision is refused).
Naming: TypeAlias = Literal["prefixed", "own"]
NAMING: Final[tuple[Naming, ...]] = ("prefixed", "own")

_DEFINITION_KEYS: Final = ("$defs", "definitions")
#: FastMCP's mark on an output schema whose ``structuredContent`` is the value wrapped as ``{"result": value}``.
WRAP_RESULT_MARK: Final = "x-fastmcp-wrap-result"


class ExposedTools:
    """The kernel's tools an MCP server offers: those ``allow`` admits and ``deny`` does not, each under a
    provider-safe name.

    The set is read from the kernel whenever it is asked for, so tools of a server that reconnects with a new
    catalog appear (and vanish) without a restart.

    Args:
        kernel: the kernel whose tools are offered.
        allow: URI globs (``"python://fs.*"``, ``"mcp://github.*"``); when given, a tool must match one of them.
        deny: URI globs; a tool matching any of them is never offered (nor callable), even when allowed.
        names: ``"prefixed"`` (the default: ``python_fs_ls``) or ``"own"`` (``fs.ls``; an MCP server's tool as the
            server names it), refused when two offered tools would share a name.
    """

    def __init__(
        self,
        kernel: Kernel,
        *,
        allow: Sequence[str] | None = None,
        deny: Sequence[str] = (),
        names: Naming = "prefixed",
    ) -> None:
        if names not in NAMING:
            raise ConfigurationError(f"names must be one of {', '.join(NAMING)}, not {names!r}")
        self.kernel = kernel
        self.allow = tuple(allow) if allow is not None else None
        self.deny = tuple(deny)
        self.naming: Naming = names
        self._uris: tuple[str, ...] = ()
        self._version: int | None = None  # the kernel's tools_version() the names were made for
        self._to_uri: dict[str, str] = {}
        self._to_name: dict[str, str] = {}

    def admits(self, uri: str) -> bool:
        """Whether ``uri`` passes the ``allow`` and ``deny`` globs."""
        if self.allow is not None and not _matches(uri, self.allow):
            return False
        return not _matches(uri, self.deny)

    def uris(self) -> list[str]:
        """The URIs offered now, sorted."""
        return [uri for uri in self.kernel.list_tools() if self.admits(uri)]

    def names(self) -> dict[str, str]:
        """The offered tools now, as ``{mcp name: URI}``."""
        self._refresh()
        return dict(self._to_uri)

    def name_of(self, uri: str) -> str:
        """The MCP name of an offered tool.

        Raises:
            KeyError: ``uri`` is not offered.
            ConfigurationError: ``names="own"`` and two offered tools would share a name.
        """
        self._refresh()
        return self._to_name[uri]

    def uri_of(self, name: str) -> str | None:
        """The URI behind an MCP name, or ``None`` when no offered tool has that name."""
        self._refresh()
        return self._to_uri.get(name)

    def definition_of(self, name: str) -> ToolDefinition | None:
        """The definition of the tool offered as ``name``, or ``None``."""
        uri = self.uri_of(name)
        return None if uri is None else self.kernel.get_tool_definition(uri)

    def mcp_tools(self) -> list[types.Tool]:
        """Every offered tool as an MCP tool: name, title (its URI; an MCP server's tool: its server's title,
        annotations, icons and ``_meta``), description and both schemas."""
        return [self.mcp_tool(name, self.kernel.get_tool_definition(uri)) for name, uri in self.names().items()]

    @staticmethod
    def mcp_tool(name: str, definition: ToolDefinition) -> types.Tool:
        """``definition`` as the MCP tool ``name`` (a passed-through ``mcp://`` tool with its server's output
        schema, or none)."""
        if passes_through(definition):  # as its server listed it: its own title, annotations, icons, _meta
            listed = definition.metadata.get("listed") or {}
            return types.Tool.model_validate(
                {
                    **listed,
                    "name": name,
                    "description": definition.description or definition.name,
                    "inputSchema": mcp_input_schema(definition),
                    "outputSchema": passed_output_schema(definition),
                }
            )
        return types.Tool(
            name=name,
            title=definition.name,
            description=definition.description or definition.name,
            input_schema=mcp_input_schema(definition),
            output_schema=mcp_output_schema(definition),
        )

    def _refresh(self) -> None:
        # Every call looks its name up here: the listing (sorted, globbed) is redone only when the kernel's tools
        # changed, not once a call (O(tools) a call: 1 ms and more with 500 tools).
        version = self.kernel.tools_version()
        if version == self._version:
            return
        uris = tuple(self.uris())
        if uris != self._uris or not self._to_uri:
            if self.naming == "own":
                self._to_name = own_names(uris, "tool")  # two tools sharing a name: raised at every lookup
            else:
                mapping = ToolNameMap(uris)
                self._to_name = {uri: mapping.to_provider(uri) for uri in uris}
            self._to_uri = {name: uri for uri, name in self._to_name.items()}
            self._uris = uris
        self._version = version


def own_names(uris: Iterable[str], kind: str) -> dict[str, str]:
    """``{URI: its own name}``: an ``mcp://`` or ``rest://`` URI's tool name (without the server), a
    ``python://`` URI's path.

    Raises:
        ConfigurationError: two URIs would share a name (the message names them and the way out).
    """
    named: dict[str, str] = {}
    taken: dict[str, str] = {}
    for uri in uris:
        name = ToolURI.parse(uri).tool
        other = taken.get(name)
        if other is not None:
            raise ConfigurationError(
                f"the {kind}s {other} and {uri} would both be served as {name!r} under their own "
                "names; serve with prefixed names (names='prefixed', --names prefixed) or leave one out (--deny)"
            )
        taken[name] = uri
        named[uri] = name
    return named


def passes_through(definition: ToolDefinition) -> bool:
    """Whether calls of ``definition`` are answered with the result its MCP server sent (an ``mcp://`` tool)."""
    return "structured" in definition.metadata and definition.uri.scheme == "mcp"


def passed_output_schema(definition: ToolDefinition) -> dict[str, Any] | None:
    """The output schema a passed-through tool's server declared, or ``None`` when it declared none (its results
    are then content blocks, sent as they came)."""
    return definition.get_output_schema() if definition.metadata.get("structured") else None


def mcp_input_schema(definition: ToolDefinition) -> dict[str, Any]:
    """The tool's input schema, with the ``"type": "object"`` root MCP requires."""
    schema = definition.get_input_schema()
    return schema if schema.get("type") == "object" else {**schema, "type": "object"}


def mcp_output_schema(definition: ToolDefinition) -> dict[str, Any]:
    """The JSON schema of what a call returns as ``structuredContent``: the output model dumped as JSON.

    A tool whose raw value the kernel wraps (``{"result": value}``) may describe only the raw value (a REST
    endpoint returning a list, say); its schema is then nested under ``result``, with its ``$defs`` kept at the
    root so that its references still resolve. A wrapped schema carries ``"x-fastmcp-wrap-result": true``, the
    mark FastMCP's client reads to hand its caller the value itself (``.data == 2``, not ``{"result": 2}``).
    """
    schema = definition.get_output_schema()
    if not definition.wrapped:
        return schema if "type" in schema else {**schema, "type": "object"}
    if _describes_wrapper(schema):
        return {**schema, WRAP_RESULT_MARK: True}
    inner = {key: value for key, value in schema.items() if key not in _DEFINITION_KEYS}
    wrapper: dict[str, Any] = {"type": "object", "properties": {"result": inner}, "required": ["result"]}
    wrapper.update({key: schema[key] for key in _DEFINITION_KEYS if key in schema})
    wrapper[WRAP_RESULT_MARK] = True
    return wrapper


def _describes_wrapper(schema: dict[str, Any]) -> bool:
    """Whether an output schema already describes the ``{"result": ...}`` wrapper (the schema of a generated
    wrapper model, or an adapter's own): a wrapped tool's raw schema never is an object with only ``result``, as
    such an object would have been its model."""
    properties = schema.get("properties")
    return schema.get("type") == "object" and isinstance(properties, dict) and set(properties) == {"result"}


def _matches(uri: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(uri, pattern) for pattern in patterns)
