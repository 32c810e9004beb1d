"""The CLI's error boundary: every command of the parser, run into a failure, ends with one line on stderr naming
what was wrong and what to do, and its documented exit status, never a traceback, an abort or a segfault; a reader
that goes away ends the output quietly; a command that reads runs never creates a database. Each case runs the real
command in a subprocess."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kavalai.cli.main import build_parser
from kavalai.config import KernelConfig
from kavalai.errors import ConfigurationError
from kavalai.workflow import WorkflowDefinitionError, WorkflowEngine

NOT_UTF8 = b"name: x\n\xff\xfe bad\n"
WORKFLOW = """name: ok
input: object
output: any
nodes:
  - {id: start, kind: start, next: end}
  - {id: end, kind: end}
"""
TEMPORAL_DOWN = "127.0.0.1:1"  # nothing listens on port 1
TOOLS = "python_functions: [kt_boundary_tools.double]\n"
HELPER = 'def double(n: int) -> int:\n    """Double a number."""\n    return n * 2\n'


def kavalai(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "kavalai.cli.main", *args]
    env = {key: value for key, value in os.environ.items() if key != "KAVALAI_TRACEBACK"}
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=cwd, env=env, check=False)


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    subparsers = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not subparsers:
        yield path
        return
    for name, child in subparsers[0].choices.items():
        yield from _commands(child, (*path, name))


#: Each command of the parser, with arguments that make it fail, and the exit status it must end with.
FAILING: dict[tuple[str, ...], tuple[list[str], int]] = {
    ("demo",): (["demo", "--model", "nosuch/model"], 2),
    ("run",): (["run", "bad.yaml"], 2),
    ("tools", "list"): (["tools", "list", "-c", "bad.yaml"], 2),
    ("tools", "describe"): (["tools", "describe", "-c", "bad.yaml", "python://x.y"], 2),
    ("tools", "call"): (["tools", "call", "-c", "bad.yaml", "python://x.y"], 2),
    ("serve",): (["serve", "bad.yaml"], 2),
    ("worker",): (["worker", "ok.yaml", "--address", TEMPORAL_DOWN], 1),
    ("runs", "show"): (["runs", "show", "r1", "--address", TEMPORAL_DOWN], 1),
    ("runs", "list"): (["runs", "list", "--db", "pay.yaml.runs.sqlite"], 2),
    ("runs", "cancel"): (["runs", "cancel", "r1", "--db", "sqlite:///notes.txt"], 1),
    ("runs", "resolve"): (["runs", "resolve", "r1", "2", "--done", "--db", "sqlite:///nosuch.sqlite"], 1),
    ("answer",): (["answer", "--db", "sqlite:///nosuch.sqlite", "r1"], 1),
}


def write_files(path: Path) -> Path:
    """The files the cases name, written in ``path``."""
    (path / "bad.yaml").write_bytes(NOT_UTF8)
    (path / "ok.yaml").write_text(WORKFLOW)
    (path / "notes.txt").write_text("not a database\n")
    (path / "tools.yaml").write_text(TOOLS)
    (path / "kt_boundary_tools.py").write_text(HELPER)
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_files(tmp_path_factory.mktemp("boundary"))


def _one_line(result: subprocess.CompletedProcess[str], command: str) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("kavalai ")]
    assert "Traceback" not in result.stderr, result.stderr
    assert "Fatal Python error" not in result.stderr, result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"kavalai {command}: "), lines
    return lines[0]


def test_every_command_of_the_parser_has_a_failing_case() -> None:
    """The enumeration: a new command fails here until it is added to FAILING and proven to end in one line."""
    assert sorted(_commands(build_parser())) == sorted(FAILING)


@pytest.mark.parametrize("command", sorted(FAILING), ids=" ".join)
def test_every_command_ends_a_failure_with_one_line_and_its_status(command: tuple[str, ...], folder: Path) -> None:
    argv, status = FAILING[command]
    result = kavalai(*argv, cwd=folder)
    assert result.returncode == status, result.stderr
    _one_line(result, command[0])


def test_an_unreachable_temporal_server_never_aborts_the_process(folder: Path) -> None:
    # On main: a traceback every time, and in about 1 run in 3 `Fatal Python error: PyGILState_Release` (status
    # 134) or a segfault (139) as the interpreter finalized with the failed connect's objects still held.
    for _ in range(6):
        result = kavalai("runs", "list", "--address", TEMPORAL_DOWN, cwd=folder)
        assert result.returncode == 1, result.stderr
        line = _one_line(result, "runs")
        assert f"cannot reach the Temporal server at {TEMPORAL_DOWN}" in line
        assert "give its --address" in line


def test_a_command_that_reads_runs_never_creates_a_database(folder: Path) -> None:
    # On main: nothing printed, status 0, and an empty nosuch.sqlite created.
    result = kavalai("runs", "list", "--db", "sqlite:///nosuch.sqlite", cwd=folder)
    assert result.returncode == 1
    assert "there is no journal at 'nosuch.sqlite'" in _one_line(result, "runs")
    assert not (folder / "nosuch.sqlite").exists()


def test_a_command_that_reads_runs_never_makes_a_journal_of_a_file_holding_none(folder: Path) -> None:
    # On base: `runs list` on an empty file (or another program's SQLite database) printed nothing, exited 0 and
    # wrote the journal's tables into it (an empty file grew to 270 KB).
    import sqlite3

    (folder / "empty.sqlite").write_bytes(b"")
    other = sqlite3.connect(folder / "other.sqlite")
    other.execute("CREATE TABLE notes (text TEXT)")
    other.commit()
    other.close()
    for name in ("empty.sqlite", "other.sqlite"):
        before = (folder / name).read_bytes()
        for argv in (["runs", "list", "--db", f"sqlite:///{name}"], ["answer", "--db", f"sqlite:///{name}", "r1"]):
            result = kavalai(*argv, cwd=folder)
            assert result.returncode == 1, result.stderr
            assert f"there is no journal at '{name}'" in _one_line(result, argv[0])
        assert (folder / name).read_bytes() == before


def test_a_command_that_reads_runs_never_creates_a_postgres_database(folder: Path) -> None:
    # On main: `runs list` printed nothing, exited 0 and created the database `nosuchdb` on the server.
    import sqlalchemy as sa
    from tests.servers.postgres_server import postgres

    with postgres() as url:
        missing = url.rsplit("/", 1)[0] + "/nosuchdb"
        for argv in (["runs", "list", "--db", missing], ["answer", "--db", missing, "r1"]):
            result = kavalai(*argv, cwd=folder)
            assert result.returncode == 1, result.stderr
            assert "there is no journal database 'nosuchdb'" in _one_line(result, argv[0])
        engine = sa.create_engine("postgresql+psycopg://" + url.split("://", 1)[1])
        try:
            with engine.connect() as connection:
                names = {row[0] for row in connection.execute(sa.text("SELECT datname FROM pg_database"))}
        finally:
            engine.dispose()
    assert "nosuchdb" not in names


def test_an_unreachable_postgres_journal_is_one_line(folder: Path) -> None:
    # On main: 48 frames of traceback (and DBOS's own "Could not connect ... Continuing..." line before them).
    result = kavalai("runs", "show", "r1", "--db", "postgresql://u@127.0.0.1:1/journal", cwd=folder)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr  # that one line, nothing else
    assert "the database could not be used" in _one_line(result, "runs")


def test_a_path_given_as_db_is_a_usage_error_naming_the_url_to_write(folder: Path) -> None:
    result = kavalai("runs", "list", "--db", "pay.yaml.runs.sqlite", cwd=folder)
    assert result.returncode == 2
    assert "write sqlite:///pay.yaml.runs.sqlite" in _one_line(result, "runs")


def test_a_file_that_is_not_a_database_says_so(folder: Path) -> None:
    result = kavalai("runs", "cancel", "r1", "--db", "sqlite:///notes.txt", cwd=folder)
    assert "the database could not be used" in _one_line(result, "runs")


def test_a_reader_that_goes_away_ends_the_output_quietly(folder: Path) -> None:
    # `kavalai tools list ... | head -1`: on main a BrokenPipeError traceback; the status is 141, 128 + SIGPIPE, as
    # a shell shows for `yes | head -1` (every command: tests/cli/test_boundary_pipes.py).
    command = [sys.executable, "-m", "kavalai.cli.main", "tools", "list", "-c", "tools.yaml"]
    process = subprocess.Popen(command, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None
    assert process.stderr is not None
    process.stdout.close()  # the reader is gone before the first line
    with process.stderr:
        stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 141
    assert stderr == ""


def test_a_file_that_is_not_utf8_is_the_documented_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(NOT_UTF8)
    with pytest.raises(ConfigurationError, match="is not UTF-8 text"):
        KernelConfig.from_file(bad)
    with pytest.raises(WorkflowDefinitionError, match="is not UTF-8 text"):
        WorkflowEngine.from_yaml(bad)


def test_a_missing_postgres_database_is_told_by_the_catalogue_not_the_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A localised server says 'database does not exist' in its own language: the check asks ``pg_database``."""
    import re

    from tests.servers.postgres_server import postgres

    from kavalai.cli import _boundary

    monkeypatch.setattr(_boundary, "_NO_SUCH_DATABASE", re.compile(r"(?!)"))  # a message no pattern recognises
    with postgres() as url:
        base = url.rsplit("/", 1)[0]
        _boundary._check_postgres_journal(url)  # the database exists: nothing to say
        with pytest.raises(_boundary.UsageError, match="there is no journal database 'nosuchdb'") as caught:
            _boundary._check_postgres_journal(f"{base}/nosuchdb")
        assert caught.value.status == 1
        server = base.split("@", 1)[1]
        with pytest.raises(_boundary.UsageError, match="the database could not be used") as caught:
            _boundary._check_postgres_journal(f"postgresql://nosuchrole@{server}/postgres")  # another failure
        assert "no journal database" not in str(caught.value)


_EVIL = '''
from kavalai import pythontool


@pythontool
def boom(x: str = "") -> str:
    """Looks fine\\x1b[2J\\x1b]0;retitled\\x07 really."""
    raise RuntimeError("bad \\x1b]52;c;SGVsbG8=\\x07 \\x1b[2J\\x1b[31mRED\\x1b[0m \\r\\rfaked line\\x08 \\u202egnp.exe")


@pythontool
def c1(x: str = "") -> str:
    """Return what JSON does not escape but a terminal may act on."""
    return "\\x9b2J \\x9d0;retitled\\x9c \\u202egnp.exe \\x7f é"
'''


def test_a_tools_words_never_drive_the_terminal(tmp_path: Path) -> None:
    """Hostile round 8, case 36: a tool's (or an MCP server's) error text and description reached the terminal
    raw: ``kavalai tools call`` wrote ``ESC ] 52`` (a clipboard write), ``ESC [ 2J`` (clear the screen) and carriage
    returns on stderr, and ``kavalai tools list`` the description's. Everything the CLI writes on stderr crosses
    ``terminal_text`` (``kavalai.cli._boundary``, applied by ``kavalai.cli.main``), the listing's table too."""
    (tmp_path / "evil.py").write_text(_EVIL, encoding="utf-8")
    (tmp_path / "c.yaml").write_text("python_functions:\n  - evil.boom\n", encoding="utf-8")
    called = kavalai("tools", "call", "-c", "c.yaml", "python://boom", cwd=tmp_path)
    listed = kavalai("tools", "list", "-c", "c.yaml", cwd=tmp_path)
    assert called.returncode == 1, called.stderr
    assert listed.returncode == 0, listed.stderr
    for shown in (called.stderr, listed.stdout):
        assert not any(char in shown for char in "\x1b\x07\r\x08\u202e"), shown
    assert "\\x1b]52;c;SGVsbG8=\\x07" in called.stderr
    assert "\\u202egnp.exe" in called.stderr
    assert len(called.stderr.splitlines()) == 1
    assert "Looks fine\\x1b[2J\\x1b]0;retitled\\x07 really." in listed.stdout


def test_a_json_result_carries_no_terminal_command_and_reads_back_the_same(tmp_path: Path) -> None:
    """Hostile round 8, case 37: JSON escapes the C0 controls, but a command's JSON (``ensure_ascii=False``) wrote
    the C1 controls (U+009B is CSI), DEL and the bidirectional overrides raw. Every JSON a command prints is
    ``json_text``: the same value for a program, its escape (``\\u009b``) for the terminal."""
    import json

    (tmp_path / "evil.py").write_text(_EVIL, encoding="utf-8")
    (tmp_path / "c.yaml").write_text("python_functions:\n  - evil.c1\n", encoding="utf-8")
    called = kavalai("tools", "call", "-c", "c.yaml", "python://c1", cwd=tmp_path)
    assert called.returncode == 0, called.stderr
    assert not any(char in called.stdout for char in "\x9b\x9d\x9c\u202e\x7f"), called.stdout
    assert "\\u009b2J" in called.stdout
    assert "é" in called.stdout  # text stays text
    assert json.loads(called.stdout)["result"] == "\x9b2J \x9d0;retitled\x9c \u202egnp.exe \x7f é"


def test_every_json_a_command_prints_crosses_json_text() -> None:
    """The enumeration: no module of the CLI writes JSON but through ``json_text`` (``kavalai.cli._boundary``);
    the demo's console prints what the demo itself made."""
    import ast

    source = Path(__file__).resolve().parents[2] / "src" / "kavalai" / "cli"
    found = []
    for path in sorted(source.glob("*.py")):
        if path.name in ("_boundary.py", "_console.py") or path.name.startswith("_demo"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("dumps", "dump") and ast.unparse(node.value) == "json":
                found.append(f"{path.name}:{node.lineno}")
    assert found == [], "print a command's JSON with kavalai.cli._boundary.json_text"
