"""Round 9 of the hostile review (issue 34, tests/hostile/CASES_round9.md cases 17-20, 26): what a user types on the
command line crosses the CLI error boundary's one reader of each kind (``json_argument``, ``count_option``), so a
JSON nested past the parser's depth or a count past the journal's integers ends with one line and exit status 2."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from tests.cli.test_boundary import _one_line, kavalai, write_files

DEEP = "[" * 60_000 + "]" * 60_000  # past the json module's recursion, under the kernel's 128 KiB argument limit


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The boundary's files and a real journal (``j.sqlite``) holding one finished run, ``r1``."""
    path = write_files(tmp_path_factory.mktemp("arguments"))
    ran = kavalai("run", "ok.yaml", "--input", "{}", "--run-id", "r1", "--db", "sqlite:///j.sqlite", cwd=path)
    assert ran.returncode == 0, ran.stderr
    return path


@pytest.mark.parametrize(
    ("argv", "command", "what"),
    [
        (["run", "ok.yaml", "--input", DEEP], "run", "--input"),
        (["tools", "call", "-c", "tools.yaml", "python://double", '{"n": ' + DEEP + "}"], "tools", "the arguments"),
        (["tools", "call", "-c", "tools.yaml", "python://double", "n=" + DEEP], "tools", "the argument 'n'"),
        (["runs", "resolve", "r1", "0", "--done", "--result", DEEP, "--db", "sqlite:///j.sqlite"], "runs", "--result"),
        (["answer", "r1", "k", DEEP, "--db", "sqlite:///j.sqlite"], "answer", "the answer"),
    ],
)
def test_json_nested_past_the_parser_is_a_usage_error(argv: list[str], command: str, what: str, folder: Path) -> None:
    """Each raised ``RecursionError`` out of ``json.loads``: "kavalai runs: RecursionError: maximum recursion depth
    exceeded while decoding a JSON array" with exit status 1, as if the command had failed, not its input."""
    result = kavalai(*argv, cwd=folder)
    line = _one_line(result, command)
    assert result.returncode == 2, result.stderr
    assert f"{what} is nested too deeply to read as JSON" in line
    assert "RecursionError" not in line


def test_a_count_past_the_journals_integers_is_all_the_runs(folder: Path) -> None:
    """``--limit 99999999999999999999`` reached SQLite: "OverflowError: Python int too large to convert to SQLite
    INTEGER", exit status 1."""
    result = kavalai("runs", "list", "--limit", "9" * 20, "--db", "sqlite:///j.sqlite", cwd=folder)
    assert "OverflowError" not in result.stderr
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == "r1"


def test_every_json_argument_a_command_reads_crosses_json_argument() -> None:
    """The enumeration: no module of the CLI reads JSON but through ``json_argument`` (``kavalai.cli._boundary``)."""
    source = Path(__file__).resolve().parents[2] / "src" / "kavalai" / "cli"
    found = []
    for path in sorted(source.glob("*.py")):
        if path.name == "_boundary.py" or path.name.startswith("_demo"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("loads", "load") and ast.unparse(node.value) == "json":
                found.append(f"{path.name}:{node.lineno}")
    assert found == [], "read a command's JSON argument with kavalai.cli._boundary.json_argument"
