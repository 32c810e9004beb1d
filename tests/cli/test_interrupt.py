"""Ctrl-C on `kavalai run`: the first says what it waits for and stops the run promptly; a second exits at once,
without a traceback. Real subprocesses, real SIGINTs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SLOW = """
import asyncio
from kavalai import pythontool

@pythontool
async def nap(seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds
"""

HOSTILE = Path(__file__).resolve().parents[1] / "servers" / "mcp_hostile.py"

WORKFLOW = """
name: slow
input: object
output: object
python_functions: [slow_tools.nap]
mcp_servers:
  - {name: stubborn, command: "PYTHON", args: ["HOSTILE", stubborn]}
nodes:
  - {id: start, kind: start, next: wait}
  - {id: wait, kind: function, tool: "python://nap", inputs: {seconds: 60}, next: end}
  - {id: end, kind: end}
"""


def _start(tmp_path: Path) -> subprocess.Popen[str]:
    (tmp_path / "slow_tools.py").write_text(SLOW)
    path = tmp_path / "slow.yaml"
    # The MCP server ignores SIGTERM and a closed stdin: closing it takes seconds, so a second Ctrl-C lands then.
    path.write_text(WORKFLOW.replace("PYTHON", sys.executable).replace("HOSTILE", str(HOSTILE)))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    process = subprocess.Popen(
        [sys.executable, "-m", "kavalai.cli.main", "run", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert process.stderr is not None
    deadline = time.monotonic() + 60
    for line in process.stderr:  # wait until the slow node has started
        if "-> wait (function)" in line:
            break
        assert time.monotonic() < deadline
    return process


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_stops_the_run_and_says_what_it_waits_for(tmp_path: Path, presses: int) -> None:
    process = _start(tmp_path)
    for _ in range(presses):
        process.send_signal(signal.SIGINT)
        time.sleep(0.3)
    # The node would sleep 60 s: a run that waited for it would not end within half of that.
    _, rest = process.communicate(timeout=30)
    assert process.returncode == 130
    assert "closing the workflow's servers (Ctrl-C again to exit now)" in rest
    assert "Traceback" not in rest
    assert ("exiting now" in rest) == (presses == 2)
    leftovers = subprocess.run(["pgrep", "-f", f"{HOSTILE} stubborn"], capture_output=True, text=True, check=False)
    assert leftovers.stdout == ""  # even an exit without clean-up leaves no MCP server running
