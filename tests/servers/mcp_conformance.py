"""A real MCP server (the SDK's ``MCPServer``) offering what the server scenarios of the official conformance suite
(``@modelcontextprotocol/conformance``) ask for, written from the requirements each scenario states: the tools
``test_*``, the resources ``test://...``, the prompts ``test_*_prompt...`` and completion. ``kavalai serve
--names own`` fronts it in ``tests/serve/test_conformance.py``, so that the suite meets it through the gateway.

Run it over stdio: ``python -m tests.servers.mcp_conformance``.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import Message, UserMessage

from tests.servers.mcp_content import PIXEL, WAV

_DEFAULTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "description": "Verified", "default": True},
    },
    "required": [],
}
_CHOICES = ("value1", "value2", "value3")
_ENUMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [{"const": value, "title": f"Option {value[-1]}"} for value in _CHOICES],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {
            "type": "array",
            "items": {"anyOf": [{"const": value, "title": f"Choice {value[-1]}"} for value in _CHOICES]},
        },
    },
    "required": [],
}


def _add_tools(server: MCPServer) -> None:
    @server.tool()
    def test_simple_text() -> str:
        """Simple text."""
        return "This is a simple text response for testing."

    @server.tool()
    def test_image_content() -> types.CallToolResult:
        """An image."""
        return types.CallToolResult(content=[types.ImageContent(data=PIXEL, mime_type="image/png")])

    @server.tool()
    def test_audio_content() -> types.CallToolResult:
        """Audio."""
        return types.CallToolResult(content=[types.AudioContent(data=WAV, mime_type="audio/wav")])

    @server.tool()
    def test_embedded_resource() -> types.CallToolResult:
        """An embedded resource."""
        text = "This is an embedded resource content."
        resource = types.TextResourceContents(uri="test://embedded-resource", mime_type="text/plain", text=text)
        return types.CallToolResult(content=[types.EmbeddedResource(resource=resource)])

    @server.tool()
    def test_multiple_content_types() -> types.CallToolResult:
        """Text, an image and an embedded resource."""
        data = json.dumps({"test": "data", "value": 123})
        resource = types.TextResourceContents(
            uri="test://mixed-content-resource", mime_type="application/json", text=data
        )
        return types.CallToolResult(
            content=[
                types.TextContent(text="Multiple content types test:"),
                types.ImageContent(data=PIXEL, mime_type="image/png"),
                types.EmbeddedResource(resource=resource),
            ]
        )

    @server.tool()
    async def test_tool_with_logging(ctx: Context) -> str:
        """Three log messages while it runs."""
        for i, text in enumerate(("Tool execution started", "Tool processing data", "Tool execution completed")):
            if i:
                await anyio.sleep(0.05)
            await ctx.info(text)
        return "Tool with logging executed successfully"

    @server.tool()
    def test_error_handling() -> str:
        """Always fails."""
        raise ToolError("This tool intentionally returns an error for testing")

    @server.tool()
    async def test_tool_with_progress(ctx: Context) -> str:
        """Progress 0, 50 and 100 of 100."""
        for i, done in enumerate((0, 50, 100)):
            if i:
                await anyio.sleep(0.05)
            await ctx.report_progress(done, 100)
        return "Tool with progress executed successfully"

    @server.tool()
    async def test_sampling(prompt: str, ctx: Context) -> str:
        """Ask the client's model."""
        message = types.SamplingMessage(role="user", content=types.TextContent(text=prompt))
        result = await ctx.session.create_message(messages=[message], max_tokens=100)
        content = result.content
        return f"LLM response: {content.text if isinstance(content, types.TextContent) else content}"

    @server.tool()
    async def test_elicitation(message: str, ctx: Context) -> str:
        """Ask the user for a username and an email."""
        schema = {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"},
            },
            "required": ["username", "email"],
        }
        result = await ctx.session.elicit_form(message, schema)
        return f"User response: action={result.action}, content={json.dumps(result.content)}"

    @server.tool()
    async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
        """Ask with defaults for every primitive type."""
        result = await ctx.session.elicit_form("Please accept the defaults", _DEFAULTS_SCHEMA)
        return f"Elicitation completed: action={result.action}, content={json.dumps(result.content)}"

    @server.tool()
    async def test_elicitation_sep1330_enums(ctx: Context) -> str:
        """Ask with the five kinds of enum."""
        result = await ctx.session.elicit_form("Please choose", _ENUMS_SCHEMA)
        return f"Elicitation completed: action={result.action}, content={json.dumps(result.content)}"


def _add_resources(server: MCPServer) -> None:
    @server.resource("test://static-text", name="static-text", description="A text.", mime_type="text/plain")
    def static_text() -> str:
        return "This is the content of the static text resource."

    @server.resource("test://static-binary", name="static-binary", description="A PNG.", mime_type="image/png")
    def static_binary() -> bytes:
        return base64.b64decode(PIXEL)

    @server.resource(
        "test://template/{id}/data", name="template", description="Data by id.", mime_type="application/json"
    )
    def template(id: str) -> str:
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @server.resource("test://watched-resource", name="watched", description="Subscribable.", mime_type="text/plain")
    def watched() -> str:
        return "Watched resource content."

    subscribed: set[str] = set()

    async def subscribe(ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
        subscribed.add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        subscribed.discard(str(params.uri))
        return types.EmptyResult()

    lowlevel = server._lowlevel_server  # MCPServer has no decorator for subscriptions
    lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)


def _add_prompts(server: MCPServer) -> None:
    @server.prompt(description="A simple prompt.")
    def test_simple_prompt() -> str:
        return "This is a simple prompt for testing."

    @server.prompt(description="A prompt with two arguments.")
    def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
        return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"

    @server.prompt(description="A prompt embedding a resource.")
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:  # the suite names it so
        text = "Embedded resource content for testing."
        resource = types.TextResourceContents(uri=resourceUri, mime_type="text/plain", text=text)
        return [
            UserMessage(types.EmbeddedResource(resource=resource)),
            UserMessage("Please process the embedded resource above."),
        ]

    @server.prompt(description="A prompt with an image.")
    def test_prompt_with_image() -> list[Message]:
        image = types.ImageContent(data=PIXEL, mime_type="image/png")
        return [UserMessage(image), UserMessage("Please analyze the image above.")]

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> types.Completion:
        words = ("paris", "park", "party")
        value = str(getattr(argument, "value", ""))
        return types.Completion(values=[w for w in words if w.startswith(value)], has_more=False)


def build_server() -> MCPServer:
    """The server."""
    server = MCPServer("conformance", log_level="DEBUG")
    _add_tools(server)
    _add_resources(server)
    _add_prompts(server)
    return server


if __name__ == "__main__":
    build_server().run("stdio")
