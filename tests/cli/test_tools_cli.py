"""``kavalai tools list|describe|call`` and ``kavalai --version``, run as the real command in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

DEMO = f"{sys.executable} -m kavalai.cli.demo_mcp_server"

HELPERS = '''
def double(n: int) -> int:
    """Double a number."""
    return n * 2


def boom(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(reason)
'''


def kavalai(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kavalai.cli.main", *args], capture_output=True, text=True, timeout=60, cwd=cwd
    )


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Our YAML: two Python tools from a module next to the file, and the demo MCP server."""
    folder = tmp_path_factory.mktemp("tools_cli")
    (folder / "kt_cli_helpers.py").write_text(HELPERS)
    path = folder / "tools.yaml"
    path.write_text(
        "python_functions: [kt_cli_helpers.double, kt_cli_helpers.boom]\n"
        f"mcp_servers:\n  - {{name: demo, command: {sys.executable}, args: [-m, kavalai.cli.demo_mcp_server]}}\n"
    )
    return path


@pytest.fixture(scope="module")
def host_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mcpServers JSON that Claude Desktop writes."""
    path = tmp_path_factory.mktemp("host") / "claude_desktop_config.json"
    server = {"command": sys.executable, "args": ["-m", "kavalai.cli.demo_mcp_server"]}
    path.write_text(json.dumps({"mcpServers": {"demo": server, "off": {**server, "disabled": True}}}))
    return path


def test_version() -> None:
    done = kavalai("--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"kavalai {version('kavalai')}")


def test_list_shows_every_tool_with_its_first_line(config: Path) -> None:
    done = kavalai("tools", "list", "--config", str(config))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [  # sorted, as list_tools gives them
        "mcp://demo.slugify",
        "mcp://demo.text_stats",
        "mcp://demo.to_fahrenheit",
        "python://boom",
        "python://double",
    ]
    assert lines[-1].split(None, 1)[1] == "Double a number."
    only = kavalai("tools", "list", "--config", str(config), "--pattern", "mcp://*.to_*", "--json")
    assert json.loads(only.stdout) == [
        {"name": "mcp://demo.to_fahrenheit", "description": "Convert degrees Celsius to degrees Fahrenheit."}
    ]


def test_a_host_config_and_a_single_command_work_too(host_config: Path) -> None:
    done = kavalai("tools", "list", "--config", str(host_config), "--json")
    assert [t["name"] for t in json.loads(done.stdout)] == [
        "mcp://demo.slugify",
        "mcp://demo.text_stats",
        "mcp://demo.to_fahrenheit",
    ]  # the disabled server is left out
    one = kavalai("tools", "call", "--command", DEMO, "--name", "d", "mcp://d.slugify", "text=Hello World")
    assert (one.returncode, json.loads(one.stdout)) == (0, {"result": "hello-world"})


def test_describe_prints_the_schemas(config: Path) -> None:
    done = kavalai("tools", "describe", "--config", str(config), "mcp://demo.text_stats")
    described = json.loads(done.stdout)
    assert described["name"] == "mcp://demo.text_stats"
    assert described["inputSchema"]["required"] == ["text"]
    assert set(described["outputSchema"]["properties"]) == {"words", "characters", "longest_word"}


def test_call_prints_the_typed_result(config: Path) -> None:
    as_json = kavalai("tools", "call", "--config", str(config), "python://double", '{"n": 21}')
    assert (as_json.returncode, json.loads(as_json.stdout)) == (0, {"result": 42})
    as_pairs = kavalai("tools", "call", "--config", str(config), "python://double", "n=4")
    assert json.loads(as_pairs.stdout) == {"result": 8}
    stats = kavalai("tools", "call", "--config", str(config), "mcp://demo.text_stats", "text=to be or not")
    assert json.loads(stats.stdout) == {"words": 4, "characters": 12, "longest_word": "not"}


@pytest.mark.parametrize(
    ("arguments", "status", "message"),
    [
        (["python://doubel", "n=1"], 2, "Did you mean 'python://double'"),
        (["python://double", '{"n": '], 2, "the arguments are not valid JSON"),
        (["python://double", "n"], 2, "'n' is not key=value"),
        (["python://double", "n=many"], 2, "Invalid arguments for python://double"),
        (["python://boom", "reason=kaput"], 1, "python://boom failed: RuntimeError: kaput"),
        (["mcp://demo.to_fahrenheit", "celsius=-500"], 1, "below absolute zero"),
    ],
)
def test_failures_exit_as_kavalai_run_does(config: Path, arguments: list[str], status: int, message: str) -> None:
    done = kavalai("tools", "call", "--config", str(config), *arguments)
    assert done.returncode == status
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_the_source_must_be_given_once_and_be_readable(tmp_path: Path) -> None:
    none = kavalai("tools", "list")
    assert (none.returncode, none.stderr.strip()) == (
        2,
        "kavalai tools: give one of: --config FILE, --command CMD, or --url URL",
    )
    missing = kavalai("tools", "list", "--config", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2
    assert "Cannot read the configuration file" in missing.stderr
    unreachable = kavalai("tools", "list", "--url", "http://127.0.0.1:9/mcp")
    assert unreachable.returncode == 1
    assert "MCP server 'server'" in unreachable.stderr
