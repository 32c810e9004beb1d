"""What a command prints on stdout is valid UTF-8 whatever a tool or a run returns (issue 34, 34l part 5): a lone
surrogate (``os.listdir`` gives one for a file name that is not UTF-8; a JSON text may spell ``"\\udcff"``) was
written as a raw 0xFF byte by ``kavalai run`` and ended ``kavalai tools call`` with ``UnicodeEncodeError``. Every
value a command prints crosses ``json_text`` (or ``terminal_text`` for a line of text), which writes it as its JSON
escape: the same value for a program reading it."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kavalai.cli._boundary import json_text, terminal_text
from kavalai.cli.main import main

HELPER = '''
def lone(n: int) -> dict[str, str]:
    """A result holding lone surrogates."""
    return {"name": "a\\udcffb", "high": "\\ud800" * n}
'''

WORKFLOW = """name: lone
input: object
output: any
nodes:
  - {id: start, kind: start, next: end}
  - {id: end, kind: end, outputs: {s: {expr: 'input.s'}}}
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("output_utf8")
    (path / "kt_lone_helpers.py").write_text(HELPER)
    (path / "tools.yaml").write_text("python_functions: [kt_lone_helpers.lone]\n")
    (path / "lone.yaml").write_text(WORKFLOW)
    return path


def stdout_of(*args: str, cwd: Path) -> object:
    """What the command printed on stdout, read as a program reads it: strict UTF-8, then JSON."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONIOENCODING", "KAVALAI_TRACEBACK")}
    env["PYTHONPATH"] = str(cwd)
    command = [sys.executable, "-m", "kavalai.cli.main", *args]
    done = subprocess.run(command, capture_output=True, timeout=120, cwd=cwd, env=env, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return json.loads(done.stdout.decode("utf-8"))  # strict: a raw 0xFF byte or a lone surrogate fails here


def test_tools_call_prints_a_lone_surrogate_as_its_escape(folder: Path) -> None:
    printed = stdout_of("tools", "call", "-c", "tools.yaml", "python://lone", "n=2", cwd=folder)
    assert printed == {"result": {"name": "a\udcffb", "high": "\ud800\ud800"}}


def test_run_prints_a_lone_surrogate_as_its_escape(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """In this process (a second interpreter's start-up and imports cost seconds): what ``kavalai run`` printed must
    encode as UTF-8, which a lone surrogate does not."""
    status = main(["run", "-q", str(folder / "lone.yaml"), "--input", '{"s": "x\\udcff"}'])
    out = capsys.readouterr().out
    assert status == 0
    assert json.loads(out.encode("utf-8")) == {"s": "x\udcff"}  # strict: raised UnicodeEncodeError on main


@pytest.mark.parametrize("point", [0xD800, 0xDBFF, 0xDC80, 0xDCFF, 0xDFFF], ids=hex)
def test_the_printers_write_every_lone_surrogate_as_valid_utf8(point: int) -> None:
    lone = chr(point)
    value = {f"k{lone}": [f"v{lone}", "ok é"]}
    text = json_text(value)
    text.encode("utf-8")  # raised UnicodeEncodeError on main
    assert json.loads(text) == value
    assert f"\\u{point:04x}" in terminal_text(f"name {lone}")
    terminal_text(f"name {lone}").encode("utf-8")


def test_every_value_a_command_prints_crosses_the_printers() -> None:
    """The enumeration: every ``print(..., file=out)`` of a command module prints ``json_text(...)`` or
    ``terminal_text(...)``; the table of ``kavalai tools list`` (``_print_table``) prints names and descriptions
    it passed through ``terminal_text`` first."""
    source = Path(__file__).resolve().parents[2] / "src" / "kavalai" / "cli"
    printers = {"json_text", "terminal_text"}
    allowed = {"_tools_cmd.py:_print_table"}  # its texts crossed terminal_text at its first line
    bypassing: list[str] = []
    printing = 0
    for path in sorted(source.glob("*.py")):
        if path.name.startswith("_demo") or path.name in ("_boundary.py", "_console.py"):
            continue  # the demo prints its own fixed texts; the boundary is the printers
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if not (isinstance(node, ast.Call) and ast.unparse(node.func) == "print"):
                    continue
                target = next((ast.unparse(k.value) for k in node.keywords if k.arg == "file"), "sys.stdout")
                if target in ("err", "sys.stderr", "self.stream", "self._err"):
                    continue  # stderr: the secret gate's redacting_stderr and terminal_text, kavalai.cli.main
                printing += 1
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Call) and ast.unparse(first.func) in printers:
                    continue
                if f"{path.name}:{function.name}" not in allowed:
                    bypassing.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
    assert bypassing == []
    assert printing >= 9  # the scan sees tools call/list, run, runs show/list and answer
