"""``kavalai run`` and an MCP server asking the user for input (``elicitation: caller``): on a terminal (a real
pseudo-terminal here) the user answers each field; without one the request is declined, saying so."""

from __future__ import annotations

import asyncio
import io
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kavalai.adapters.mcp import McpElicitation
from kavalai.cli._ask import answer_on_terminal
from kavalai.workflow import InputRequested

ROOT = Path(__file__).resolve().parents[2]


def _workflow(tmp_path: Path) -> Path:
    path = tmp_path / "greet.yaml"
    path.write_text(
        "name: greeting\ninput: object\noutput: object\n"
        f"mcp_servers:\n  - {{name: feat, command: {sys.executable}, args: [-m, tests.servers.mcp_features], "
        f"cwd: {ROOT}, elicitation: caller}}\n"
        "nodes:\n"
        "  - {id: start, kind: start, next: greet}\n"
        "  - {id: greet, kind: function, tool: 'mcp://feat.greet', next: end}\n"
        "  - {id: end, kind: end, outputs: {greeting: greet.result}}\n",
        encoding="utf-8",
    )
    return path


def test_without_a_terminal_the_request_is_declined(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kavalai.cli.main", "run", str(_workflow(tmp_path))],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 1, done.stderr
    assert "feat asks: Who are you? -- declined: no terminal to ask" in done.stderr
    assert "greet" in done.stderr.splitlines()[-1]


@pytest.mark.parametrize("durable", [[], ["--durable"]], ids=["plain", "durable"])
def test_on_a_terminal_the_user_answers(tmp_path: Path, durable: list[str]) -> None:
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "kavalai.cli.main", "run", str(_workflow(tmp_path)), *durable],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    os.close(terminal)
    try:
        os.write(controller, b"Ada\n")  # buffered by the terminal until the prompt reads it
        out, err = process.communicate(timeout=120)
    finally:
        os.close(controller)
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err
    assert '"greeting": "hello Ada"' in out
    assert "feat asks: Who are you?" in err


def _event(schema: dict[str, Any], mode: str = "form", url: str | None = None) -> InputRequested:
    request = McpElicitation(server="s", message="Tell me", mode=mode, schema=schema, url=url)  # type: ignore[arg-type]
    return InputRequested(request=request, _reply=asyncio.get_running_loop().create_future())


async def test_fields_are_parsed_and_checked_and_asked_again() -> None:
    schema = {
        "properties": {
            "name": {"type": "string", "description": "Your name"},
            "age": {"type": "integer"},
            "member": {"type": "boolean"},
            "plan": {"type": "string", "enum": ["free", "pro"]},
            "note": {"type": "string"},
        },
        "required": ["name", "age", "member", "plan"],
    }
    answers = iter(["Ada", "forty", "40", "maybe", "y", "gold", "pro", ""])
    prompts: list[str] = []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        return next(answers)

    err = io.StringIO()
    event = _event(schema)
    await answer_on_terminal(event, err, ask=ask)
    assert await event._reply == {"name": "Ada", "age": 40, "member": True, "plan": "pro"}  # note left out
    assert prompts[0] == "  name - Your name (string): "
    assert prompts[-1] == "  note (string, optional): "
    assert "invalid literal" in err.getvalue()
    assert "answer y or n; try again" in err.getvalue()
    assert "choose one of free, pro; try again" in err.getvalue()


@pytest.mark.parametrize(("reply", "expected"), [("y", {}), ("", None)])
async def test_a_url_is_shown_and_confirmed(reply: str, expected: dict[str, Any] | None) -> None:
    event = _event({}, mode="url", url="https://example.org/consent")
    prompts: list[str] = []
    await answer_on_terminal(event, io.StringIO(), ask=lambda p: prompts.append(p) or reply)
    assert await event._reply == expected
    assert prompts == ["  open https://example.org/consent -- done? [y/N] "]
