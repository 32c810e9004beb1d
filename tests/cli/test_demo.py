"""``kavalai demo`` runs offline and shows the kernel at work."""

from __future__ import annotations

import io
import subprocess
import sys

from kavalai.cli._console import DemoConsole
from kavalai.cli._demo import run_demo
from kavalai.cli.main import build_parser


async def test_demo_shows_every_tool_kind_and_an_agent() -> None:
    buffer = io.StringIO()
    assert await run_demo(out=DemoConsole(buffer)) == 0
    text = buffer.getvalue()
    sections = ["== python:// tools ==", "== rest:// tools ==", "== mcp:// tools", "== agent (ScriptedLLM"]
    positions = [text.index(heading) for heading in sections]
    assert positions == sorted(positions)
    assert "imported from /openapi.json: rest://bookshop." in text
    assert "caught HTTPStatusError (status_code=404)" in text
    assert "server 'demo': connected over stdio" in text
    assert "caught ToolExecutionError: Tool mcp://demo.to_fahrenheit reported an error" in text
    assert "3 tool calls (0 failed)" in text
    assert "python://math.add(a, b): Add two integers." in text
    assert "math.add(2, '40'): Result[int]({\"result\":42})" in text
    assert "math.percent returned '50', coerced to: 50 (int)" in text
    assert "caught ToolInputError: Invalid arguments for python://math.add" in text


def test_parser_knows_demo_and_model_flag() -> None:
    args = build_parser().parse_args(["demo", "--model", "openai/gpt-4.1-mini"])
    assert (args.command, args.model) == ("demo", "openai/gpt-4.1-mini")


def test_console_script_runs_the_demo() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kavalai.cli.main", "demo"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "Demo finished" in result.stdout


def test_demo_with_an_unreachable_model_exits_non_zero() -> None:
    # A local port nothing listens on: the OpenAI-compatible client cannot connect, fast and offline.
    env = {"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    done = subprocess.run(
        [sys.executable, "-m", "kavalai.cli.main", "demo", "--model", "openai/gpt-4.1-mini"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "the agent could not run on the model" in done.stdout
