"""The demo's agent section: a scripted run over the kernel's tools, clearly labelled."""

from __future__ import annotations

import io
from typing import Any

import pytest
from tests.agent.conftest import ToolBox
from tests.servers.llm_openai import completion, fake_openai
from tests.servers.llm_openai import tool_call as wire_call
from tests.servers.uvicorn_server import serve

from kavalai import FunctionKernel, pythontool
from kavalai.cli._console import DemoConsole
from kavalai.cli._demo_agent import agent_section, demo_calls, example_arguments


async def test_scripted_section_calls_real_tools(kernel: FunctionKernel, toolbox: ToolBox) -> None:
    buffer = io.StringIO()
    await agent_section(kernel, DemoConsole(buffer))
    text = buffer.getvalue()
    assert "== agent (ScriptedLLM: scripted replies, no model is called) ==" in text
    assert "the script calls 1 of them in one step" in text  # one python tool; no rest/mcp tools registered
    assert 'step 1: the model asks for python://fail.explode({"reason": "Oslo"})' in text
    assert "python://fail.explode -> error: Tool python://fail.explode failed: RuntimeError: boom: Oslo" in text
    assert "answer: Scripted summary: python://fail.explode failed" in text
    assert "kavalai demo --model" in text


async def test_explicit_calls_and_unavailable_model(
    kernel: FunctionKernel, toolbox: ToolBox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    buffer = io.StringIO()
    calls: list[tuple[str, dict[str, Any]]] = [
        ("python://math.add", {"a": 2, "b": 40}),
        ("python://weather.forecast", {"city": "Oslo"}),
    ]
    ok = await agent_section(kernel, DemoConsole(buffer), model="openai/gpt-4.1-mini", calls=calls)
    assert ok is False  # the model could not be used: `kavalai demo` exits 1
    text = buffer.getvalue()
    assert 'python://math.add -> {"result": 42}' in text
    assert "python://weather.forecast returned" in text
    assert "2 model calls, 2 tool calls (0 failed)" in text
    assert "== agent on a real model: openai/gpt-4.1-mini ==" in text
    assert (
        "cannot use the model: No API key for 'openai/gpt-4.1-mini': set the OPENAI_API_KEY environment variable"
        in text
    )


def test_demo_calls_pick_one_tool_per_kind() -> None:
    descriptions = [
        {"name": "mcp://files.read", "inputSchema": {"properties": {"path": {"type": "string"}}, "required": ["path"]}},
        {"name": "python://a.nested", "inputSchema": {"properties": {"x": {"$ref": "#/$defs/X"}}, "required": ["x"]}},
        {"name": "python://b.simple", "inputSchema": {"properties": {"n": {"type": "integer"}}, "required": ["n"]}},
        {
            "name": "rest://api.mode",
            "inputSchema": {"properties": {"m": {"enum": ["fast", "slow"]}}, "required": ["m"]},
        },
    ]
    assert demo_calls(descriptions) == [
        ("python://b.simple", {"n": 2}),
        ("rest://api.mode", {"m": "fast"}),
        ("mcp://files.read", {"path": "Oslo"}),
    ]
    assert example_arguments({"properties": {"q": {"type": "string", "examples": ["kavalai"]}}, "required": ["q"]}) == {
        "q": "kavalai"
    }


async def test_section_without_tools(kernel: FunctionKernel) -> None:
    @pythontool
    def needs_model(spec: dict[str, int]) -> int:
        """A tool whose argument cannot be made up."""
        return len(spec)

    kernel.register_python_tool("complex.tool", needs_model)
    buffer = io.StringIO()
    await agent_section(kernel, DemoConsole(buffer))
    assert "answer: Scripted summary: no tools were called." in buffer.getvalue()


async def test_model_option_drives_the_agent_over_the_wire(
    kernel: FunctionKernel, toolbox: ToolBox, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = fake_openai()
    provider.reply_json(completion(tool_calls=[wire_call("c1", "python_math_add", {"a": 20, "b": 22})]))
    provider.reply_json(completion("20 + 22 is 42."))
    with serve(provider.app(), lifespan="off") as url:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-demo-test-key-0123456789")
        monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
        buffer = io.StringIO()
        await agent_section(kernel, DemoConsole(buffer), model="openai/gpt-fake", calls=[])
    text = buffer.getvalue()
    real = text[text.index("== agent on a real model: openai/gpt-fake ==") :]
    assert 'step 1: the model asks for python://math.add({"a": 20, "b": 22})' in real
    assert 'python://math.add -> {"result": 42}' in real
    assert "answer: 20 + 22 is 42." in real
    assert "2 model calls, 1 tool calls (0 failed)" in real
    assert provider.bodies[0]["model"] == "gpt-fake"
    assert "python_math_add" in {tool["function"]["name"] for tool in provider.bodies[0]["tools"]}
