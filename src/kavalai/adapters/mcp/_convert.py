"""MCP wire types <-> kernel types, converted at this one seam: tool listings into models, results into values."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any, Final, Literal, NoReturn

import mcp_types
from pydantic import BaseModel, ConfigDict, create_model

from kavalai.adapters.mcp._content import (
    McpAudioContent,
    McpImageContent,
    McpResourceContent,
    McpResourceLink,
    content_result_field,
)
from kavalai.errors import ToolExecutionError
from kavalai.kernel import model_from_json_schema, output_model_from_json_schema
from kavalai.secrets import excerpt, get_logger

__all__ = [
    "ToolModels",
    "build_models",
    "error_text",
    "raise_tool_error",
    "result_value",
    "unwrapped",
    "wraps_result",
]

logger = get_logger("kavalai.mcp")

_NOT_IDENT = re.compile(r"[^0-9A-Za-z]+")
# What a model is shown for a tool without an outputSchema: short, where the generated schema of McpResult
# would spell out every content model.
_CONTENT_OUTPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "result": {
            "description": "The tool's structured content, or its text (parsed when it is JSON); image, audio "
            "and resource items as objects with a 'type' of 'image', 'audio', 'resource' or 'resource_link'; "
            "a list when there are several items."
        }
    },
    "required": ["result"],
}
_MAX_ERROR_CHARS = 2000
_WRAP_RESULT_MARK: Final = "x-fastmcp-wrap-result"


class ToolModels(BaseModel):
    """The models the kernel uses for one MCP tool."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    input_model: type[BaseModel]
    output_model: type[BaseModel]
    wrapped: bool
    structured: bool
    output_schema: dict[str, Any]
    #: The server wraps the value as ``{"result": value}`` and says so with FastMCP's mark (:func:`wraps_result`).
    unwrap: bool = False


def wraps_result(schema: Mapping[str, Any]) -> bool:
    """Whether an output schema carries FastMCP's ``"x-fastmcp-wrap-result": true``: the tool returns a plain
    value (an ``int``, a list) that its ``structuredContent`` holds as ``{"result": value}``. The value, not the
    wrapper, is then what the tool returns."""
    properties = schema.get("properties")
    return schema.get(_WRAP_RESULT_MARK) is True and isinstance(properties, Mapping) and "result" in properties


def unwrapped(value: Any) -> Any:
    """The value inside a marked tool's ``{"result": value}`` (anything else as it is)."""
    return value["result"] if isinstance(value, dict) and "result" in value else value


def content_output_schema() -> dict[str, Any]:
    """The output schema of a tool without an ``outputSchema`` (a copy: callers may change it)."""
    return copy.deepcopy(_CONTENT_OUTPUT_SCHEMA)


def build_models(
    server: str,
    tool: mcp_types.Tool,
    *,
    extra_arguments: Literal["forbid", "allow"] = "forbid",
    extra_output: Literal["allow", "ignore", "forbid"] = "allow",
) -> ToolModels:
    """Build the input and output models of ``tool``. Never raises: a schema the converter cannot use gives
    a permissive model instead, so one odd tool does not break the server's discovery. ``extra_arguments`` and
    ``extra_output``: as on :class:`~kavalai.McpServer` (what a schema that does not say about undeclared
    properties means)."""
    base = _class_name(server, tool.name)
    try:
        input_model = model_from_json_schema(tool.input_schema, f"{base}Input", undeclared=extra_arguments)
    except Exception as exc:  # an unusable schema must not break discovery of the server's other tools
        logger.warning("mcp://%s.%s: input schema not understood (%s); accepting any arguments", server, tool.name, exc)
        input_model = create_model(f"{base}Input", __config__=ConfigDict(extra="allow"))
    if tool.output_schema is not None:
        try:
            undeclared = None if extra_output == "allow" else extra_output  # "allow": open at the top, as ever
            output_model, wrapped = output_model_from_json_schema(
                tool.output_schema, f"{base}Output", undeclared=undeclared
            )
            unwrap = False
            if wraps_result(tool.output_schema):  # the model of the value itself, which the kernel wraps
                inner = tool.output_schema["properties"]["result"]
                value_model, unwrap = output_model_from_json_schema(inner, f"{base}Output", root=tool.output_schema)
                if unwrap:  # (FastMCP marks only values that are not objects; an object stays as sent)
                    output_model, wrapped = value_model, True
            return ToolModels(
                input_model=input_model,
                output_model=output_model,
                wrapped=wrapped,
                structured=True,
                output_schema=tool.output_schema,
                unwrap=unwrap,
            )
        except Exception as exc:
            logger.warning(
                "mcp://%s.%s: output schema not understood (%s); using the generic one", server, tool.name, exc
            )
    output_model = create_model(f"{base}Output", result=content_result_field())
    return ToolModels(
        input_model=input_model,
        output_model=output_model,
        wrapped=True,
        structured=False,
        output_schema=copy.deepcopy(_CONTENT_OUTPUT_SCHEMA),
    )


def result_value(result: mcp_types.CallToolResult, *, structured: bool) -> Any:
    """The raw value the kernel coerces into the output model.

    A tool with an output schema gives its structured content (or, from an older server that sent it only as
    text, that text parsed as JSON). Otherwise: the structured content when there is any; else the content items,
    text as the server wrote it (``"1.10"`` stays ``"1.10"``, ``"null"`` stays the text) and other items as typed
    content models; one item alone, several as a list, ``None`` for none.
    """
    content = result.content
    if result.structured_content is not None or (structured and not content):
        return result.structured_content
    if len(content) == 1 and not structured and type(first := content[0]) is mcp_types.TextContent:
        return first.text  # the usual answer of a tool without an output schema: one text, as written
    values = [_item_value(item, structured) for item in content]
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def _item_value(item: Any, structured: bool) -> Any:
    if isinstance(item, mcp_types.TextContent):
        return _parse_text(item.text) if structured else item.text
    if isinstance(item, mcp_types.ImageContent):
        return McpImageContent(data=item.data, mime_type=item.mime_type)
    if isinstance(item, mcp_types.AudioContent):
        return McpAudioContent(data=item.data, mime_type=item.mime_type)
    if isinstance(item, mcp_types.EmbeddedResource):
        resource = item.resource
        return McpResourceContent(
            uri=str(resource.uri),
            mime_type=resource.mime_type,
            text=getattr(resource, "text", None),
            blob=getattr(resource, "blob", None),
        )
    if isinstance(item, mcp_types.ResourceLink):
        return McpResourceLink(
            uri=str(item.uri), name=item.name, description=item.description, mime_type=item.mime_type
        )
    return item.model_dump(mode="json", by_alias=True, exclude_none=True)  # pragma: no cover - future item kinds


def _parse_text(text: str) -> Any:
    stripped = text.strip()
    if stripped[:1] in ("{", "[", '"') or stripped in ("true", "false", "null") or _looks_numeric(stripped):
        try:
            return json.loads(stripped)
        except ValueError:
            return text
    return text


def _looks_numeric(text: str) -> bool:
    return bool(text) and (text[0].isdigit() or (text[0] == "-" and text[1:2].isdigit()))


def error_text(result: mcp_types.CallToolResult) -> str:
    """The tool's own error message from an ``isError`` result: its text items, else a short summary."""
    texts = [item.text for item in result.content if isinstance(item, mcp_types.TextContent)]
    text = "\n".join(texts).strip()
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content, default=str)
    if not text:
        kinds = ", ".join(item.type for item in result.content) or "no content"
        text = f"(no error text; the result held {kinds})"
    return excerpt(text, _MAX_ERROR_CHARS, marker="...")  # masked, then cut: no piece of a secret


def raise_tool_error(uri: str, result: mcp_types.CallToolResult) -> NoReturn:
    """Raise :class:`ToolExecutionError` for an ``isError`` result."""
    raise ToolExecutionError(f"Tool {uri} reported an error: {error_text(result)}", uri=uri)


def _class_name(server: str, tool: str) -> str:
    parts = [part for part in _NOT_IDENT.split(f"{server} {tool}") if part]
    name = "".join(part[:1].upper() + part[1:] for part in parts) or "McpTool"
    return name if name[0].isalpha() else f"Mcp{name}"
