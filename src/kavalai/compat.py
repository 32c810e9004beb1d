"""Kaval.AI 1.0 compatibility: the kernel methods and helpers its code and tests call, beside our own API.

Kaval.AI 1.0 code calls ``kernel._call_python_tool(name, args, output_type=...)``, ``_call_rest_tool(server, tool,
args, method=...)`` and ``_call_mcp_tool(server, tool, args)``, reads ``kernel.python_tool_definitions`` and friends,
and maps outputs into models by its own rules (a single value fills a one-field model). Those methods live here,
mixed into :class:`~kavalai.FunctionKernel`, so that code runs unchanged. New code should call
``call_tool(uri, arguments, output_type=T)``, which validates into any type, strictly (see
docs/migrating_from_kaval.md).
"""

from __future__ import annotations

import contextlib
import json
import unicodedata
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID

from pydantic import BaseModel, ValidationError

from kavalai.errors import ToolNotFoundError, ToolOutputError

if TYPE_CHECKING:
    from kavalai.kernel import Kernel, ToolDefinition

__all__ = ["KavalCompatMixin", "cast_output", "clean_text", "is_tool_allowed", "to_plain"]


def cast_output(raw: Any, output_type: type[Any] | None, uri: str) -> Any:
    """Kaval.AI 1.0's output mapping of ``raw`` into an ``output_type`` model.

    A model with one field named ``result`` takes the value as that field; a dict fills the model's fields; a model
    is re-read as the other model; a single value fills a model of exactly one field. A type that is not a model
    leaves ``raw`` as it is. Our ``call_tool(..., output_type=T)`` validates any type, strictly.

    Raises:
        ToolOutputError: ``raw`` does not fit (the message says it "does not match" the model, as Kaval.AI's did).
    """
    if not (isinstance(output_type, type) and issubclass(output_type, BaseModel)) or isinstance(raw, output_type):
        return raw
    fields = list(output_type.model_fields)
    try:
        if fields == ["result"]:
            return output_type.model_validate({"result": raw})
        if isinstance(raw, Mapping):
            return output_type.model_validate(dict(raw))
        if isinstance(raw, BaseModel):
            return output_type.model_validate(raw.model_dump())
        if len(fields) == 1:
            return output_type.model_validate({fields[0]: raw})
        raise ValueError(f"{type(raw).__name__} cannot fill the {len(fields)} fields of {output_type.__name__}")
    except (ValidationError, ValueError) as exc:
        message = f"{uri} returned a result that does not match {output_type.__name__}: {exc}"
        raise ToolOutputError(message, uri=uri) from exc


def clean_text(text: Any) -> Any:
    """``text`` in Unicode NFC with control characters (NUL included) removed, keeping newlines, carriage returns
    and tabs, as Kaval.AI 1.0's ``clean_text`` made text safe for its database; anything not a string as it is."""
    if not isinstance(text, str):
        return text
    text = unicodedata.normalize("NFC", text)
    if text.isprintable():  # the common case: nothing to remove
        return text
    return "".join(ch for ch in text if ch in "\n\r\t" or unicodedata.category(ch)[0] != "C")


def to_plain(value: Any) -> Any:
    """``value`` as plain data, as Kaval.AI 1.0's ``to_plain`` made it: models become their dumped data, tuples
    lists, datetimes and UUIDs their ``str()``, text :func:`clean_text`, and the ``__dunder__`` metadata keys YAML
    loaders add (``__line__``) are dropped at any depth (Kaval.AI dropped every key starting with ``_``; a field
    named ``_id`` is data here)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, datetime | UUID):
        return str(value)
    if isinstance(value, Mapping):
        return {
            clean_text(key): to_plain(item)
            for key, item in value.items()
            if not (isinstance(key, str) and key.startswith("__") and key.endswith("__"))
        }
    if isinstance(value, list | tuple):
        return [to_plain(item) for item in value]
    return value


def is_tool_allowed(uri: str, allowed_tools: list[str] | None) -> bool:
    """Whether ``uri`` passes ``allowed_tools`` (exact URIs and ``server.*`` wildcards; ``None`` allows all), as
    Kaval.AI 1.0 decided it for one URI."""
    import fnmatch

    if allowed_tools is None:
        return True
    bare = uri.split(" [", 1)[0]
    return any(bare == entry.split(" [", 1)[0] or fnmatch.fnmatchcase(bare, entry) for entry in allowed_tools)


class KavalCompatMixin:
    """Kaval.AI 1.0's kernel methods (see the module docstring). Mixed into :class:`~kavalai.FunctionKernel`."""

    @property
    def python_tool_definitions(self) -> dict[str, ToolDefinition]:
        """The ``python://`` tools by name (Kaval.AI 1.0)."""
        return {d.uri.tool: d for d in _k(self).registry.tools_of("python")}

    @property
    def rest_tool_definitions(self) -> dict[str, dict[str, ToolDefinition]]:
        """The ``rest://`` tools by server, then by tool name (Kaval.AI 1.0)."""
        return _by_server(_k(self).registry.tools_of("rest"))

    @property
    def mcp_tool_definitions(self) -> dict[str, dict[str, ToolDefinition]]:
        """The ``mcp://`` tools of connected servers by server, then by tool name (Kaval.AI 1.0)."""
        return _by_server(_k(self).registry.tools_of("mcp"))

    async def _call_python_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, output_type: type[Any] | None = None
    ) -> Any:
        uri = f"python://{name}"
        if uri not in _k(self).registry:
            raise ToolNotFoundError(f"Python tool {name!r} is not registered (register_python_tool).", uri=uri)
        output = await _k(self).call_tool(uri, arguments)
        if output_type is None:
            return output
        definition = _k(self).get_tool_definition(uri)
        return cast_output(getattr(output, "result", None) if definition.wrapped else output, output_type, uri)

    async def _call_rest_tool(
        self,
        server_name: str,
        tool_name: str,
        arguments: Mapping[str, Any] | None = None,
        method: str = "get",
        output_type: type[Any] | None = None,
    ) -> Any:
        if not _has_server(_k(self), "rest", server_name):
            raise ToolNotFoundError(f"REST server {server_name!r} not registered (register_rest_server).")
        uri = f"rest://{server_name}.{tool_name}"
        output = await _k(self).call_tool(uri, arguments, method=method.upper())
        definition = await _k(self).resolve_tool(f"{uri} [{method.upper()}]")
        raw = getattr(output, "result", None) if definition.wrapped else output.model_dump(by_alias=True)
        return cast_output(raw, output_type, uri)

    async def _call_mcp_tool(
        self,
        server_name: str,
        tool_name: str,
        arguments: Mapping[str, Any] | None = None,
        output_type: type[Any] | None = None,
    ) -> Any:
        if not _has_server(_k(self), "mcp", server_name):
            raise ToolNotFoundError(f"MCP server {server_name!r} not registered (register_mcp_server).")
        uri = f"mcp://{server_name}.{tool_name}"
        output = await _k(self).call_tool(uri, arguments)
        if output_type is None:
            return output
        definition = _k(self).get_tool_definition(uri)
        raw: Any = getattr(output, "result", None) if definition.wrapped else output
        if isinstance(raw, str):  # Kaval.AI read text content as JSON when it could
            with contextlib.suppress(ValueError):
                raw = json.loads(raw)
        return cast_output(raw, output_type, uri)


def _k(mixin: object) -> Kernel:
    return cast("Kernel", mixin)


def _by_server(definitions: list[ToolDefinition]) -> dict[str, dict[str, ToolDefinition]]:
    grouped: dict[str, dict[str, ToolDefinition]] = {}
    for definition in definitions:
        grouped.setdefault(definition.uri.server or "", {})[definition.uri.tool] = definition
    return grouped


def _has_server(kernel: Kernel, scheme: str, name: str) -> bool:
    adapter = kernel.adapter(scheme)
    servers = getattr(adapter, "server_names", None)
    return name in servers() if callable(servers) else bool(kernel.registry.tools_of(scheme, name))
