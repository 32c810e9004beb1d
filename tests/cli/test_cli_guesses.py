"""The command line guesses as a user expects: ``key=value`` values typed by the tool's schema, a server named by
its package folder when its script is a generic ``index.js``, suggestions in the form the user typed, and a missing
API key said before the demo runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kavalai.cli._engines import lookup_failed
from kavalai.cli._tools_cmd import command_name, typed_arguments
from kavalai.durable import UnknownRunError

TOOLS = '''
from typing import Literal


def echo(message: str) -> str:
    """Echo the message."""
    return message


def pick(colour: Literal["red", "green"], count: int, note: str | None = None, value: int | str = 0) -> dict:
    """Pick a colour."""
    return {"colour": colour, "count": count, "note": note, "value": value}
'''


def kavalai(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "kavalai.cli.main", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=cwd, env=env)


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("guesses")
    (folder / "kt_guess_tools.py").write_text(TOOLS, encoding="utf-8")
    path = folder / "tools.yaml"
    path.write_text(
        "python_functions:\n"
        "  - {function: kt_guess_tools.echo, name: everything.echo}\n"
        "  - {function: kt_guess_tools.pick, name: pick}\n",
        encoding="utf-8",
    )
    return str(path)


def test_a_text_field_keeps_what_was_typed(config: str) -> None:
    done = kavalai("tools", "call", "--config", config, "python://everything.echo", "message=42")
    assert (done.returncode, json.loads(done.stdout)) == (0, {"result": "42"}), done.stderr
    other = kavalai("tools", "call", "--config", config, "python://everything.echo", "message=true")
    assert json.loads(other.stdout) == {"result": "true"}, other.stderr


def test_other_fields_are_read_as_json(config: str) -> None:
    done = kavalai("tools", "call", "--config", config, "python://pick", "colour=red", "count=3", "note=7", "value=7")
    assert json.loads(done.stdout) == {"result": {"colour": "red", "count": 3, "note": "7", "value": 7}}, done.stderr


def test_a_value_that_still_fails_says_how_to_quote(config: str) -> None:
    done = kavalai("tools", "call", "--config", config, "python://pick", "colour=blue", "count=1")
    assert done.returncode == 2
    assert "Invalid arguments for python://pick" in done.stderr
    assert "give the arguments as one JSON object" in done.stderr
    assert "Traceback" not in done.stderr


def test_typing_follows_refs_enums_and_unions() -> None:
    schema = {
        "properties": {
            "mode": {"$ref": "#/$defs/Mode"},
            "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "fixed": {"const": "x"},
        },
        "$defs": {"Mode": {"enum": ["1", "2"], "type": "string"}},
    }
    pairs = [("mode", "1"), ("maybe", "null"), ("either", "5"), ("tags", '["a"]'), ("fixed", "x"), ("free", "{")]
    assert typed_arguments(pairs, schema) == {
        "mode": "1",
        "maybe": "null",
        "either": 5,
        "tags": ["a"],
        "fixed": "x",
        "free": "{",
    }


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("node /x/node_modules/@modelcontextprotocol/server-everything/dist/index.js", "everything"),
        ("python /srv/mcp-server-weather/main.py", "weather"),
        ("node /opt/tools/notes-mcp/build/index.js", "notes"),
        ("uvx mcp-server-time", "time"),
        ("node dist/index.js", "server"),  # nothing says: the server's own name is asked for once connected
    ],
)
def test_a_generic_script_is_named_by_its_folder(command: str, name: str) -> None:
    assert command_name(command.split()) == name


def test_a_generic_script_with_no_telling_folder_takes_the_servers_own_name(tmp_path: Path) -> None:
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "index.py").write_text(
        "from kavalai.demo.mcp_server import build_demo_server\nbuild_demo_server().run()\n", encoding="utf-8"
    )
    done = kavalai("tools", "list", "--command", f"{sys.executable} dist/index.py", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    names = [tool["name"] for tool in json.loads(done.stdout)]
    assert names
    assert all(name.startswith("mcp://kavalai-demo.") for name in names), names  # its serverInfo.name


def test_a_uri_without_its_scheme_is_suggested_with_it(config: str) -> None:
    done = kavalai("tools", "describe", "--config", config, "everything.echo")
    assert done.returncode == 2
    assert "Did you mean 'python://everything.echo'?" in done.stderr


def test_a_missing_run_is_suggested_as_a_command() -> None:
    # The whole command on a real journal: tests/durable/test_cli_runs.py (`kavalai runs cancel nobody`).
    message = lookup_failed(UnknownRunError("pay-9", "dbos (sqlite:///runs.sqlite)"))
    assert "`kavalai run WORKFLOW --run-id pay-9`" in message
    assert "run_id=" not in message
    assert lookup_failed(LookupError("something else")) == "something else"


def test_the_demo_says_a_missing_key_before_it_runs() -> None:
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    done = kavalai("demo", "--model", "openai/gpt-4.1-mini", env=env)
    assert done.returncode == 2
    assert "OPENAI_API_KEY" in done.stderr
    assert "python:// tools" not in done.stdout  # no section ran
