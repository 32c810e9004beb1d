"""The demo's closing section: an agent run over every registered tool kind, scripted or on a real model.

Offline, the model is a :class:`~kavalai.testing.ScriptedLLM` whose script asks for one tool of each kind
(``python://``, ``rest://``, ``mcp://``) in a single step, with arguments made up from each tool's schema, and then
summarises the results. The output says plainly that the replies are scripted. With ``--model`` the same agent runs
on that model through :func:`~kavalai.llm.make_client`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from kavalai import FunctionKernel
from kavalai.agent import Agent, AgentEvent, EventHandler, ModelResponded, ToolCallFinished
from kavalai.cli._console import DemoConsole
from kavalai.llm import ToolResultMessage, UserMessage
from kavalai.llm.errors import LLMError
from kavalai.testing import ScriptedLLM, ScriptedRequest, ScriptFunction, ScriptItem, tool_call

__all__ = ["agent_section", "demo_calls", "example_arguments"]

_INSTRUCTIONS = (
    "You are the kavalai demo agent. Call a few of the available tools (at most one per kind), "
    "then summarise in two sentences what each returned."
)
_PROMPT = "Show what your tools can do: call one python, one rest and one mcp tool if you have them."
_SCHEMES = ("python", "rest", "mcp")
_SAMPLES: Mapping[str, Any] = {"string": "Oslo", "integer": 2, "number": 1.5, "boolean": True}


async def agent_section(
    kernel: FunctionKernel,
    console: DemoConsole,
    *,
    model: str | None = None,
    calls: Sequence[tuple[str, Mapping[str, Any]]] | None = None,
) -> bool:
    """Run the demo agent over the kernel's tools and print what happens; return whether every run worked (a real
    model that cannot be reached, or a missing API key, makes it ``False``, so ``kavalai demo`` exits non-zero).

    Args:
        kernel: the demo's kernel, with its tools registered.
        console: where to print.
        model: a model id (``"openai/gpt-4.1-mini"``) to also run the agent on a real model.
        calls: the scripted tool calls as ``(uri, arguments)``; by default :func:`demo_calls` picks them.
    """
    descriptions = await kernel.describe_tools()
    chosen = list(calls) if calls is not None else demo_calls(descriptions)
    console.heading("agent (ScriptedLLM: scripted replies, no model is called)")
    console.line(f"The agent sees {len(descriptions)} tools; the script calls {len(chosen)} of them in one step.")
    llm = ScriptedLLM(_script(chosen))
    scripted_ok = await _run(Agent(llm, kernel=kernel, instructions=_INSTRUCTIONS, on_event=_printer(console)), console)
    if model is None:
        console.line("Run `kavalai demo --model openai/gpt-4.1-mini` to drive the same agent with a real model.")
        return scripted_ok
    console.heading(f"agent on a real model: {model}")
    try:
        real = Agent(model, kernel=kernel, instructions=_INSTRUCTIONS, on_event=_printer(console))
    except LLMError as exc:
        console.line(f"cannot use the model: {exc}")
        return False
    async with real:  # the agent built the client from the model id, so it closes it
        return await _run(real, console) and scripted_ok


async def _run(agent: Agent[str], console: DemoConsole) -> bool:
    try:
        result = await agent.run(_PROMPT)
    except LLMError as exc:
        console.line(f"the run failed: {type(exc).__name__}: {exc}")
        return False
    console.show("answer", result.output)
    failed = sum(1 for record in result.tool_calls if not record.ok)
    console.line(
        f"{result.steps} model calls, {len(result.tool_calls)} tool calls ({failed} failed), "
        f"{result.usage.total_tokens} tokens"
    )
    return True


def demo_calls(descriptions: Sequence[Mapping[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """One tool per kind whose required arguments can be made up from its schema, with those arguments."""
    chosen: list[tuple[str, dict[str, Any]]] = []
    for scheme in _SCHEMES:
        for description in descriptions:
            if not description["name"].startswith(f"{scheme}://"):
                continue
            arguments = example_arguments(description.get("inputSchema") or {})
            if arguments is not None:
                chosen.append((description["name"], arguments))
                break
    return chosen


def example_arguments(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """Plausible values for the required arguments of ``schema``, or ``None`` if one is not a simple type."""
    properties: Mapping[str, Any] = schema.get("properties") or {}
    arguments: dict[str, Any] = {}
    for name in schema.get("required") or ():
        value = _example(properties.get(name) or {})
        if value is None:
            return None
        arguments[name] = value
    return arguments


def _example(prop: Mapping[str, Any]) -> Any:
    if prop.get("examples"):
        return prop["examples"][0]
    if prop.get("enum"):
        return prop["enum"][0]
    if "default" in prop:
        return prop["default"]
    return _SAMPLES.get(str(prop.get("type")))


def _script(calls: Sequence[tuple[str, Mapping[str, Any]]]) -> ScriptFunction:
    def reply(request: ScriptedRequest) -> ScriptItem:
        if isinstance(request.last_message, UserMessage) and calls:
            return [tool_call(uri, arguments) for uri, arguments in calls]
        results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
        parts = [f"{m.name} {'failed' if m.is_error else 'returned'} {_short(m.content)}" for m in results]
        return "Scripted summary: " + ("; ".join(parts) if parts else "no tools were called") + "."

    return reply


def _printer(console: DemoConsole) -> EventHandler:
    def on_event(event: AgentEvent) -> None:
        if isinstance(event, ModelResponded) and event.response.tool_calls:
            asked = ", ".join(f"{c.name}({json.dumps(c.arguments)})" for c in event.response.tool_calls)
            console.line(f"step {event.step}: the model asks for {asked}")
        elif isinstance(event, ToolCallFinished):
            record = event.record
            outcome = json.dumps(record.result) if record.ok else f"error: {record.error}"
            console.line(f"  {record.uri} -> {_short(outcome)}")

    return on_event


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else f"{text[: limit - 3]}..."
