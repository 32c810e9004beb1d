"""The examples of the MCP docs section run, and print what their comments say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.adapters.mcp.conftest import ROOT


def _mcp_section() -> str:
    """The MCP section of ``docs/tools.md``."""
    guide = (ROOT / "docs" / "tools.md").read_text()
    start = guide.index("## MCP tools")
    end = guide.find("\n## ", start + 1)
    return guide[start:] if end == -1 else guide[start:end]


BLOCKS = re.findall(r"```python\n(.*?)```", _mcp_section(), re.DOTALL)


def _run(code: str, tmp_path: Path) -> str:
    script = tmp_path / "example.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_there_are_examples() -> None:
    assert len(BLOCKS) == 2


def test_first_example(tmp_path: Path) -> None:
    lines = _run(BLOCKS[0], tmp_path).splitlines()
    assert lines[0] == "['mcp://demo.slugify', 'mcp://demo.text_stats', 'mcp://demo.to_fahrenheit']"
    assert lines[1:4] == ["6 not", "hello-mcp-world", "212.0"]
    assert lines[4].startswith("Tool mcp://demo.to_fahrenheit reported an error: ")
    assert "below absolute zero" in lines[4]
    assert lines[5] == "connected stdio 1"


def test_failure_example(tmp_path: Path) -> None:
    assert _run(BLOCKS[1], tmp_path).splitlines() == ["broken 1", "failed"]
