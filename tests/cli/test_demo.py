"""``kavalai demo`` runs offline and shows the kernel at work."""

from __future__ import annotations

import io
import subprocess
import sys

from kavalai.cli._console import DemoConsole
from kavalai.cli._demo import run_demo
from kavalai.cli.main import build_parser


async def test_demo_python_section_output() -> None:
    buffer = io.StringIO()
    assert await run_demo(out=DemoConsole(buffer)) == 0
    text = buffer.getvalue()
    assert "== python:// tools ==" in text
    assert "python://math.add(a, b): Add two integers." in text
    assert "math.add(2, '40'): MathAddOutput({\"result\":42})" in text
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
