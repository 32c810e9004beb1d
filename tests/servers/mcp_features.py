"""A real MCP server (the SDK's ``MCPServer``) with resources, a resource template, prompts and completion, and a
tool that reports progress and logs.

Run it over stdio: ``python -m tests.servers.mcp_features``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, Elicit, ListRoots, MCPServer, Resolve, Sample
from mcp.server.mcpserver.prompts.base import AssistantMessage, UserMessage
from mcp.server.mcpserver.utilities.types import Image
from mcp.shared.exceptions import MCPError
from mcp_types import (
    Completion,
    CreateMessageResult,
    ListRootsResult,
    ModelHint,
    ModelPreferences,
    PromptReference,
    ResourceTemplateReference,
    SamplingMessage,
    TextContent,
)
from pydantic import BaseModel

from tests.servers.mcp_tools import PIXEL_PNG

CITIES = ("Berlin", "Bern", "Bergen", "Paris")


class NameForm(BaseModel):
    """What ask_user asks for."""

    name: str


# The same three questions asked the way that works in both eras: a resolver returns what it needs, and the
# SDK asks it on the session (handshake era) or in an InputRequiredResult (2026-07-28).
def sample_question(question: str) -> Sample:
    message = SamplingMessage(role="user", content=TextContent(text=question))
    return Sample([message], max_tokens=100_000, system_prompt="Answer briefly.")


def name_question() -> Elicit[NameForm]:
    return Elicit("Who are you?", NameForm)


def roots_question() -> ListRoots:
    return ListRoots()


def _mark(marker: str, text: str) -> None:
    Path(marker).write_text(text)


def build_server(name: str = "features") -> MCPServer:
    """The server."""
    server = MCPServer(name, log_level="WARNING")

    @server.resource("notes://readme", name="readme", description="The readme.", mime_type="text/plain")
    def readme() -> str:
        return "1.10 is a version, not a number"

    @server.resource("notes://pixel", name="pixel", mime_type="image/png")
    def pixel() -> bytes:
        return PIXEL_PNG

    @server.resource("weather://{city}/today", name="weather", description="Today's weather in a city.")
    def weather(city: str) -> str:
        return f"sunny in {city}"

    @server.prompt(description="Ask for a review of some code.")
    def review(code: str, language: str = "python") -> list[UserMessage | AssistantMessage]:
        return [UserMessage(f"Review this {language}:\n{code}"), AssistantMessage("Looking at it.")]

    @server.prompt(description="A prompt with a picture.")
    def picture() -> list[UserMessage]:
        return [UserMessage(Image(data=PIXEL_PNG, format="png").to_image_content())]

    @server.tool()
    async def count(n: int, ctx: Context) -> int:
        """Count to n, reporting progress at each step and logging as it goes."""
        await ctx.warning("counting started token=s3cr3t-token", logger_name="counter")
        for i in range(n):
            await ctx.report_progress(i + 1, n, f"step {i + 1}")
        return n

    @server.tool()
    async def chatty(ctx: Context) -> str:
        """Log one debug and one warning message."""
        await ctx.debug("a detail", logger_name="chatty")
        await ctx.warning("a warning", logger_name="chatty")
        return "said"

    @server.tool()
    def trace_context(ctx: Context) -> str:
        """The W3C traceparent this call's request carried in its _meta ("" when none)."""
        meta = ctx.request_context.meta
        if meta is None:
            return ""
        found = (
            meta.get("traceparent") if isinstance(meta, dict) else getattr(meta, "model_extra", {}).get("traceparent")
        )
        return str(found or "")

    @server.tool()
    async def ask_model(question: str, ctx: Context) -> str:
        """Ask the client's model (sampling); the answer, or the refusal's message."""
        try:
            result = await ctx.session.create_message(
                messages=[SamplingMessage(role="user", content=TextContent(text=question))],
                max_tokens=100_000,
                system_prompt="Answer briefly.",
                model_preferences=ModelPreferences(hints=[ModelHint(name="small-model")]),
            )
        except MCPError as exc:
            return f"refused: {exc.message}"
        content = result.content
        return content.text if isinstance(content, TextContent) else str(content)

    @server.tool()
    async def ask_user(ctx: Context) -> str:
        """Ask the user for a name (elicitation); what happened."""
        try:
            answer = await ctx.elicit("Who are you?", NameForm)
        except MCPError as exc:
            return f"refused: {exc.message}"
        return f"{answer.action}: {answer.data.name if answer.action == 'accept' and answer.data else '-'}"

    @server.tool()
    async def my_roots(ctx: Context) -> list[str]:
        """The roots the client offers."""
        try:
            roots = await ctx.session.list_roots()
        except MCPError as exc:
            return [f"refused: {exc.message}"]
        return [str(root.uri) for root in roots.roots]

    @server.tool()
    def consult(question: str, answer: Annotated[CreateMessageResult, Resolve(sample_question)]) -> str:
        """Ask the client's model (sampling), in either era."""
        content = answer.content
        return content.text if isinstance(content, TextContent) else str(content)

    @server.tool()
    async def consult_then_wait(
        question: str, marker: str, answer: Annotated[CreateMessageResult, Resolve(sample_question)]
    ) -> str:
        """Ask the client's model (in either era), then write 'started' to the marker file and wait; 'cancelled'
        there when the call is cancelled."""
        _mark(marker, "started")
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            _mark(marker, "cancelled")
            raise
        return "finished"

    @server.tool()
    def greet(who: Annotated[NameForm, Resolve(name_question)]) -> str:
        """Ask the user for a name (elicitation), in either era."""
        return f"hello {who.name}"

    @server.tool()
    def folders(roots: Annotated[ListRootsResult, Resolve(roots_question)]) -> list[str]:
        """The roots the client offers, in either era."""
        return [str(root.uri) for root in roots.roots]

    @server.completion()
    async def complete(
        ref: PromptReference | ResourceTemplateReference, argument: object, context: object
    ) -> Completion | None:
        value = getattr(argument, "value", "")
        if isinstance(ref, ResourceTemplateReference) and getattr(argument, "name", "") == "city":
            return Completion(values=[c for c in CITIES if c.lower().startswith(value.lower())])
        if isinstance(ref, PromptReference) and getattr(argument, "name", "") == "language":
            return Completion(values=[x for x in ("python", "perl", "php") if x.startswith(value)], has_more=False)
        return None

    return server


if __name__ == "__main__":
    build_server().run("stdio")
