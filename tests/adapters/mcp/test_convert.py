"""The MCP <-> kernel seam on its own: results into values, odd schemas into models that still work."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from kavalai.adapters.mcp import McpResourceContent
from kavalai.adapters.mcp._convert import build_models, error_text, result_value


def _text(*texts: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=t) for t in texts])


@pytest.mark.parametrize("text", ["hello", "42", "1.10", "-1.5", "true", "null", '{"a": [1, 2]}', '"quoted"', "{x"])
def test_text_is_kept_as_the_server_wrote_it_without_an_output_schema(text: str) -> None:
    # Parsing it as JSON would lose data: "1.10" would become 1.1 and "null" None.
    assert result_value(_text(text), structured=False) == text


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", 42),
        ("1.10", 1.1),
        ('{"a": [1, 2]}', {"a": [1, 2]}),
        ('"quoted"', "quoted"),
        ("{not json", "{not json"),
        ("12 apples", "12 apples"),
    ],
)
def test_with_an_output_schema_text_only_content_is_read_as_the_structured_json(text: str, value: Any) -> None:
    assert result_value(_text(text), structured=True) == value


def test_several_items_become_a_list_and_none_become_none() -> None:
    assert result_value(_text("a", "[1]"), structured=False) == ["a", "[1]"]
    assert result_value(types.CallToolResult(content=[]), structured=False) is None


def test_structured_content_wins() -> None:
    result = types.CallToolResult(content=[types.TextContent(type="text", text="{}")], structured_content={"x": 1})
    assert result_value(result, structured=False) == {"x": 1}
    assert result_value(result, structured=True) == {"x": 1}


def test_blob_resource_is_kept() -> None:
    blob = types.BlobResourceContents(uri="file:///a.bin", mime_type="application/octet-stream", blob="AAE=")
    result = types.CallToolResult(content=[types.EmbeddedResource(type="resource", resource=blob)])
    assert result_value(result, structured=False) == McpResourceContent(
        uri="file:///a.bin", mime_type="application/octet-stream", blob="AAE="
    )


def test_error_text_without_text_items_says_what_there_was() -> None:
    image = types.ImageContent(type="image", data="AA==", mime_type="image/png")
    assert error_text(types.CallToolResult(content=[image], is_error=True)) == "(no error text; the result held image)"
    assert error_text(_text("boom", "details")) == "boom\ndetails"


def test_unusable_input_schema_does_not_break_discovery(caplog: pytest.LogCaptureFixture) -> None:
    tool = types.Tool(name="odd tool!", input_schema={"type": "string"})
    models = build_models("srv", tool)
    assert models.input_model.__name__ == "SrvOddToolInput"
    assert models.input_model.model_validate({"anything": 1}).model_dump() == {"anything": 1}
    assert "input schema not understood" in caplog.text


def test_output_schema_that_is_not_an_object_is_wrapped() -> None:
    tool = types.Tool(name="count", input_schema={"type": "object"}, output_schema={"type": "integer"})
    models = build_models("srv", tool)
    assert (models.wrapped, models.structured) == (True, True)
    assert models.output_model.model_validate({"result": "7"}).model_dump() == {"result": 7}
    assert models.output_schema == {"type": "integer"}
