"""The CLI's error boundary and a reader that goes away (issue 34): every command of the parser that writes output,
run as a real ``kavalai`` process whose stdout (``| head -0``) or stdout and stderr (``2>&1 | head -0``) is a pipe
with no reader. It ends quietly (no traceback, no "Broken pipe" line) with its own status for a failure, and 141
(128 + SIGPIPE) for a success whose output was cut.

The cases, written before any was run (``stdout`` = only stdout cut, stderr read; ``both`` = ``2>&1 | head -0``):

1. ``demo`` (success, stdout) -> 141;                2. ``demo --model nosuch/model`` (both) -> 2
3. ``run ok.yaml`` (success, stdout) -> 141;         4. ``run bad.yaml`` (both) -> 2
5. ``tools list`` (stdout) -> 141;                   6. ``tools list -c bad.yaml`` (both) -> 2
7. ``tools describe python://double`` (both) -> 141; 8. ``tools describe X`` unknown (both) -> 2 (base: 0)
9. ``tools call python://double n=21`` (stdout) -> 141; 10. ``tools call`` unknown tool (both) -> 2
11. ``serve`` stdio, a host that sends ``initialize`` then has gone (both) -> 0 (a host leaving ends serving)
12. ``serve bad.yaml`` (both) -> 2
13. ``worker --address 127.0.0.1:1`` (both) -> 1
14. ``runs list`` of a journal with a run (stdout) -> 141; 15. ``runs show r1`` (stdout) -> 141
16. ``runs cancel r1`` of a finished run (both) -> its own status; 17. ``runs resolve`` no journal (both) -> 1
18. ``answer`` no journal (both) -> 1
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.cli.test_boundary import FAILING, TEMPORAL_DOWN, _commands, write_files

from kavalai.cli.main import build_parser

pytestmark = pytest.mark.timeout(300)

JOURNAL = "sqlite:///journal.sqlite"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "gone", "version": "1"}},
}

#: Each command of the parser: its cases as (argv, which streams are cut, the status it must end with).
CUT: dict[tuple[str, ...], list[tuple[list[str], str, int]]] = {
    ("demo",): [(["demo"], "stdout", 141), (["demo", "--model", "nosuch/model"], "both", 2)],
    ("run",): [(["run", "ok.yaml", "--input", "{}"], "stdout", 141), (["run", "bad.yaml"], "both", 2)],
    ("tools", "list"): [
        (["tools", "list", "-c", "tools.yaml"], "stdout", 141),
        (["tools", "list", "-c", "bad.yaml"], "both", 2),
    ],
    ("tools", "describe"): [
        (["tools", "describe", "-c", "tools.yaml", "python://double"], "both", 141),
        (["tools", "describe", "-c", "tools.yaml", "python://nosuch"], "both", 2),
    ],
    ("tools", "call"): [
        (["tools", "call", "-c", "tools.yaml", "python://double", "n=21"], "stdout", 141),
        (["tools", "call", "-c", "tools.yaml", "python://nosuch"], "both", 2),
    ],
    ("serve",): [(["serve", "tools.yaml"], "both", 0), (["serve", "bad.yaml"], "both", 2)],
    ("worker",): [(["worker", "ok.yaml", "--address", TEMPORAL_DOWN], "both", 1)],
    ("runs", "list"): [(["runs", "list", "--db", JOURNAL], "stdout", 141)],
    ("runs", "show"): [(["runs", "show", "r1", "--db", JOURNAL], "stdout", 141)],
    ("runs", "cancel"): [(["runs", "cancel", "r1", "--db", "sqlite:///notes.txt"], "both", 1)],
    ("runs", "resolve"): [(["runs", "resolve", "r1", "2", "--done", "--db", "sqlite:///nosuch.sqlite"], "both", 1)],
    ("answer",): [(["answer", "--db", "sqlite:///nosuch.sqlite", "r1"], "both", 1)],
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = write_files(tmp_path_factory.mktemp("pipes"))
    made = subprocess.run(
        [sys.executable, "-m", "kavalai.cli.main", "run", "ok.yaml", "--input", "{}", "--db", JOURNAL, "--run-id=r1"],
        cwd=path,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    return path


def kavalai_cut(argv: list[str], cut: str, cwd: Path) -> tuple[int, str]:
    """Run ``kavalai argv`` with stdout (and, for ``both``, stderr) the write end of a pipe whose read end is closed
    before the process starts: every write finds the reader gone. Returns the status and what stderr said."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    stdin = subprocess.PIPE if argv[0] == "serve" else subprocess.DEVNULL
    env = {key: value for key, value in os.environ.items() if key != "KAVALAI_TRACEBACK"}
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "kavalai.cli.main", *argv],
            cwd=cwd,
            env=env,
            stdin=stdin,
            stdout=write_end,
            stderr=write_end if cut == "both" else subprocess.PIPE,
        )
    finally:
        os.close(write_end)
    request = (json.dumps(INITIALIZE) + "\n").encode() if argv[0] == "serve" else None
    _, stderr = process.communicate(request, timeout=240)
    return process.returncode, (stderr or b"").decode(errors="replace")


def test_every_command_of_the_parser_has_a_cut_pipe_case() -> None:
    """The enumeration: a new command fails here until it is run with a reader gone away."""
    assert sorted(_commands(build_parser())) == sorted(CUT) == sorted(FAILING)


@pytest.mark.parametrize(
    ("argv", "cut", "status"),
    [case for command in sorted(CUT) for case in CUT[command]],
    ids=lambda value: " ".join(value) if isinstance(value, list) else str(value),
)
def test_a_reader_gone_away_ends_quietly_with_the_commands_status(
    argv: list[str], cut: str, status: int, folder: Path
) -> None:
    returncode, stderr = kavalai_cut(argv, cut, folder)
    assert returncode == status, stderr
    assert "Traceback" not in stderr, stderr
    assert "Broken pipe" not in stderr, stderr
    assert "BrokenPipeError" not in stderr, stderr
