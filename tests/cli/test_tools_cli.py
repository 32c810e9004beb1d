"""``kavalai tools list|describe|call`` and ``kavalai --version``, run as the real command in a subprocess.

Starting an MCP server (and importing the MCP SDK) costs about a second a run, so only the cases about MCP servers
use a configuration with one; the others use the Python-only configuration.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest
from tests.servers.mcp_http import streamable_http_app
from tests.servers.uvicorn_server import serve

DEMO = f"{sys.executable} -m kavalai.demo.mcp_server"

HELPERS = '''
import asyncio
from pathlib import Path


def double(n: int) -> int:
    """Double a number."""
    return n * 2


def boom(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(reason)


async def nap(seconds: float, marker: str) -> float:
    """Sleep, once the marker file is written."""
    Path(marker).write_text("started")
    await asyncio.sleep(seconds)
    return seconds
'''


def kavalai(*args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "COLUMNS"}  # pytest sets it: no cut listings
    command = [sys.executable, "-m", "kavalai.cli.main", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the Python tools' module, our YAML with and without an MCP server, and an mcpServers JSON."""
    path = tmp_path_factory.mktemp("tools_cli")
    (path / "kt_cli_helpers.py").write_text(HELPERS)
    python = "python_functions: [kt_cli_helpers.double, kt_cli_helpers.boom, kt_cli_helpers.nap]\n"
    (path / "python.yaml").write_text(python)
    demo = f"mcp_servers:\n  - {{name: demo, command: {sys.executable}, args: [-m, kavalai.demo.mcp_server]}}\n"
    (path / "tools.yaml").write_text(python + demo)
    server = {"command": sys.executable, "args": ["-m", "kavalai.demo.mcp_server"]}
    host = {"mcpServers": {"demo": server, "off": {**server, "disabled": True}}}
    (path / "claude_desktop_config.json").write_text(json.dumps(host))
    return path


@pytest.fixture(scope="module")
def config(folder: Path) -> str:
    """Our YAML: three Python tools from a module next to the file, and the demo MCP server."""
    return str(folder / "tools.yaml")


@pytest.fixture(scope="module")
def python_config(folder: Path) -> str:
    """Our YAML with the Python tools only."""
    return str(folder / "python.yaml")


def test_version() -> None:
    done = kavalai("--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"kavalai {version('kavalai')}")


def test_list_shows_every_tool_with_its_first_line(config: str) -> None:
    done = kavalai("tools", "list", "--config", config)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [  # sorted, as list_tools gives them
        "mcp://demo.slugify",
        "mcp://demo.text_stats",
        "mcp://demo.to_fahrenheit",
        "python://boom",
        "python://double",
        "python://nap",
    ]
    assert lines[0].split(None, 1)[1] == "Turn a title into a URL slug: lower case, words joined by the separator."
    assert lines[-2].split(None, 1)[1] == "Double a number."


def test_list_filters_by_pattern_and_prints_json(python_config: str) -> None:
    done = kavalai("tools", "list", "--config", python_config, "--pattern", "python://*o*", "--json")
    assert json.loads(done.stdout) == [
        {"name": "python://boom", "description": "Always fails."},
        {"name": "python://double", "description": "Double a number."},
    ]


def test_a_host_config_and_a_single_command_work_too(folder: Path) -> None:
    done = kavalai("tools", "list", "--config", str(folder / "claude_desktop_config.json"), "--json")
    assert [t["name"] for t in json.loads(done.stdout)] == [
        "mcp://demo.slugify",
        "mcp://demo.text_stats",
        "mcp://demo.to_fahrenheit",
    ]  # the disabled server is left out
    one = kavalai("tools", "call", "--command", DEMO, "--name", "d", "mcp://d.text_stats", "text=to be or not")
    assert (one.returncode, json.loads(one.stdout)) == (0, {"words": 4, "characters": 12, "longest_word": "not"})


def test_a_single_url_works_too() -> None:
    with serve(streamable_http_app()) as base_url:
        done = kavalai("tools", "call", "--url", f"{base_url}/mcp", "--name", "web", "mcp://web.add", "a=2", "b=40")
    assert (done.returncode, json.loads(done.stdout)) == (0, {"result": 42}), done.stderr


def test_describe_prints_the_schemas(config: str, python_config: str) -> None:
    done = kavalai("tools", "describe", "--config", config, "mcp://demo.text_stats")
    described = json.loads(done.stdout)
    assert described["name"] == "mcp://demo.text_stats"
    assert described["inputSchema"]["required"] == ["text"]
    assert set(described["outputSchema"]["properties"]) == {"words", "characters", "longest_word"}
    python = json.loads(kavalai("tools", "describe", "--config", python_config, "python://double").stdout)
    assert python["description"] == "Double a number."
    assert python["inputSchema"]["properties"]["n"]["type"] == "integer"


def test_call_prints_the_typed_result(python_config: str) -> None:
    as_json = kavalai("tools", "call", "--config", python_config, "python://double", '{"n": 21}')
    assert (as_json.returncode, json.loads(as_json.stdout)) == (0, {"result": 42})
    as_pairs = kavalai("tools", "call", "--config", python_config, "python://double", "n=4")
    assert json.loads(as_pairs.stdout) == {"result": 8}


@pytest.mark.parametrize(
    ("file", "arguments", "status", "message"),
    [
        ("python.yaml", ["python://doubel", "n=1"], 2, "Did you mean 'python://double'"),
        ("python.yaml", ["python://double", '{"n": '], 2, "the arguments are not valid JSON"),
        ("python.yaml", ["python://double", "n"], 2, "'n' is not key=value"),
        ("python.yaml", ["python://double", "n=many"], 2, "Invalid arguments for python://double"),
        ("python.yaml", ["python://boom", "reason=kaput"], 1, "python://boom failed: RuntimeError: kaput"),
        ("tools.yaml", ["mcp://demo.to_fahrenheit", "celsius=-500"], 1, "below absolute zero"),
        # hostile review 36e: a timeout the rule refuses is a usage error of the option, not the call's ValueError
        ("python.yaml", ["--timeout", "nan", "python://double", "n=1"], 2, "'nan': give a positive number of seconds"),
        ("python.yaml", ["--timeout", "-0", "python://double", "n=1"], 2, "'-0': give a positive number of seconds"),
        # hostile round 8, case 10: negative zero written as a float; the smallest subnormal runs and is cut
        ("python.yaml", ["--timeout", "-0.0", "python://double", "n=1"], 2, "'-0.0': give a positive number of"),
        ("python.yaml", ["--timeout", "5e-324", "python://nap", "seconds=5", "marker=/dev/null"], 1, "timed out after"),
    ],
)
def test_failures_exit_as_kavalai_run_does(
    folder: Path, file: str, arguments: list[str], status: int, message: str
) -> None:
    done = kavalai("tools", "call", "--config", str(folder / file), *arguments)
    assert done.returncode == status
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_the_source_must_be_given_once_and_be_readable(tmp_path: Path, python_config: str) -> None:
    none = kavalai("tools", "list")
    assert (none.returncode, none.stderr.strip()) == (
        2,
        "kavalai tools: give one of: --config FILE, --command CMD, or --url URL",
    )
    both = kavalai("tools", "list", "--config", python_config, "--url", "http://127.0.0.1:9/mcp")
    assert (both.returncode, both.stderr) == (2, none.stderr)
    missing = kavalai("tools", "list", "--config", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2
    assert "Cannot read the configuration file" in missing.stderr
    unreachable = kavalai("tools", "list", "--url", "http://127.0.0.1:9/mcp")
    assert unreachable.returncode == 1
    assert "MCP server 'server'" in unreachable.stderr


def test_ctrl_c_stops_the_call(tmp_path: Path, python_config: str) -> None:
    marker = tmp_path / "started"
    command = [sys.executable, "-m", "kavalai.cli.main", "tools", "call", "--config", python_config]
    process = subprocess.Popen(
        [*command, "python://nap", "seconds=60", f"marker={marker}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not marker.exists():  # the tool is running: the command's Ctrl-C handling is in place
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)  # the tool would sleep 60 s: a command waiting for it fails here
    assert process.returncode == 130
    assert "kavalai tools: interrupted; closing the servers (Ctrl-C again to exit now)" in err
    assert "Traceback" not in err
    assert out == ""  # the tool never returned its result
