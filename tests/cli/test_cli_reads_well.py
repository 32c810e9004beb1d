"""The ``kavalai`` command reads well: help as plain text, servers named after what they are, one-line listings
(``--long`` for all), and ``serve --allow/--deny`` starting only the servers it needs. Each case runs the real
command in a subprocess."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from tests.servers.mcp_http import streamable_http_app
from tests.servers.uvicorn_server import serve

KAVALAI = str(Path(sys.executable).parent / "kavalai")
DEMO = f"{sys.executable} -m kavalai.demo.mcp_server"
WORDY = '''
def wordy(text: str) -> str:
    """Say a lot about a text. This second sentence is not shown in a listing.

    Nor is this paragraph, which goes on and on.
    """
    return text


def terse(n: int) -> int:
    """No sentence end here"""
    return n
'''
REST_MARKUP = re.compile(r"``|:(func|class|meth|attr|mod):`")


def kavalai(*args: str, columns: int = 200) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run([KAVALAI, *args], capture_output=True, text=True, timeout=60, env=env, check=False)


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["tools"],
        ["tools", "list"],
        ["tools", "describe"],
        ["tools", "call"],
        ["serve"],
        ["run"],
        ["worker"],
        ["answer"],
        ["demo"],
    ],
    ids=lambda command: " ".join(command) or "kavalai",
)
def test_help_is_plain_text(command: list[str]) -> None:
    done = kavalai(*command, "--help")
    assert done.returncode == 0, done.stderr
    assert "usage: kavalai" in done.stdout
    assert REST_MARKUP.search(done.stdout) is None, done.stdout


def test_a_command_names_its_server_and_name_overrides_it() -> None:
    named = kavalai("tools", "list", "--command", DEMO, "--json")
    assert named.returncode == 0, named.stderr
    assert [tool["name"] for tool in json.loads(named.stdout)] == [
        "mcp://demo.slugify",
        "mcp://demo.text_stats",
        "mcp://demo.to_fahrenheit",
    ]  # `python -m kavalai.demo.mcp_server` is "demo", not "server"
    overridden = kavalai("tools", "list", "--command", DEMO, "--name", "d", "--pattern", "mcp://d.slug*")
    assert overridden.stdout.split()[0] == "mcp://d.slugify"


def test_a_url_server_is_named_as_it_names_itself() -> None:
    with serve(streamable_http_app()) as base_url:
        done = kavalai("tools", "list", "--url", f"{base_url}/mcp", "--json")
        assert done.returncode == 0, done.stderr
        called = kavalai("tools", "call", "--url", f"{base_url}/mcp", "mcp://web.add", "a=1", "b=2")
    names = [tool["name"] for tool in json.loads(done.stdout)]
    assert names
    assert all(name.startswith("mcp://web.") for name in names), names  # its serverInfo.name
    assert (called.returncode, json.loads(called.stdout)) == (0, {"result": 3}), called.stderr


def test_listings_show_the_first_sentence_cut_to_the_terminal_and_long_shows_all(tmp_path: Path) -> None:
    (tmp_path / "wordy_tools.py").write_text(WORDY)
    config = tmp_path / "tools.yaml"
    config.write_text("python_functions: [wordy_tools.wordy, wordy_tools.terse]\n")
    wide = kavalai("tools", "list", "--config", str(config))
    assert wide.stdout.splitlines() == [
        "python://terse  No sentence end here",
        "python://wordy  Say a lot about a text.",
    ]
    narrow = kavalai("tools", "list", "--config", str(config), columns=36)
    assert narrow.stdout.splitlines()[1] == "python://wordy  Say a lot about a t…"  # 36 columns in all
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 36
    long = kavalai("tools", "list", "--config", str(config), "--long", columns=36)
    lines = long.stdout.splitlines()
    assert lines[1] == "python://wordy  Say a lot about a text. This second sentence is not shown in a listing."
    assert "                Nor is this paragraph, which goes on and on." in lines
    as_json = kavalai("tools", "list", "--config", str(config), "--json", columns=20)
    assert json.loads(as_json.stdout)[1]["description"] == "Say a lot about a text."  # JSON is never cut
    long_json = kavalai("tools", "list", "--config", str(config), "--json", "--long")
    assert "Nor is this paragraph" in json.loads(long_json.stdout)[1]["description"]


async def test_serve_starts_only_the_servers_allow_and_deny_need(tmp_path: Path) -> None:
    (tmp_path / "wordy_tools.py").write_text(WORDY)
    started = tmp_path / "started"
    marked = ["-c", f'touch "{started}/$0"; exec {DEMO}']  # each server leaves its name in started/ as it starts
    started.mkdir()
    document = {
        "python_functions": ["wordy_tools.terse"],
        "mcp_servers": [
            {"name": "demo", "command": "sh", "args": [*marked[:1], marked[1], "demo"]},
            {"name": "other", "command": "sh", "args": [*marked[:1], marked[1], "other"]},
        ],
    }
    config = tmp_path / "tools.yaml"
    config.write_text(json.dumps(document))

    async def served(*options: str) -> tuple[set[str], str]:
        params = StdioServerParameters(command=KAVALAI, args=["serve", str(config), *options], cwd=str(tmp_path))
        with (tmp_path / "serve.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                if "python_terse" in names:
                    called = await client.call_tool("python_terse", {"n": 7})
                    assert called.structured_content == {"result": 7}
        return names, (tmp_path / "serve.log").read_text()

    with anyio.fail_after(40):
        names, log = await served("--allow", "python://*")
        assert names == {"python_terse"}
        assert sorted(path.name for path in started.iterdir()) == []  # no MCP server was started
        assert "not starting mcp://demo, mcp://other" in log
        names, log = await served("--allow", "mcp://demo.text_*", "--allow", "python://*", "--deny", "mcp://other.*")
        assert names == {"python_terse", "mcp_demo_text_stats"}
        assert sorted(path.name for path in started.iterdir()) == ["demo"]
        assert "not starting mcp://other" in log
        names, _ = await served("--deny", "mcp://demo.slug*")  # might still match demo's other tools: both start
        assert sorted(path.name for path in started.iterdir()) == ["demo", "other"]


async def test_serve_with_allow_starts_the_servers_it_needs_at_the_first_request(tmp_path: Path) -> None:
    started = tmp_path / "started"
    started.mkdir()
    marked = ["-c", f'touch "{started}/$0"; exec {DEMO}']
    document = {"mcp_servers": [{"name": "demo", "command": "sh", "args": [*marked, "demo"]}]}
    config = tmp_path / "tools.yaml"
    config.write_text(json.dumps(document))
    for options, lazy in ((["--allow", "mcp://demo.*"], True), (["--allow", "mcp://demo.*", "--no-lazy"], False)):
        for marker in started.iterdir():
            marker.unlink()
        params = StdioServerParameters(command=KAVALAI, args=["serve", str(config), *options], cwd=str(tmp_path))
        with anyio.fail_after(40), (tmp_path / "serve.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:  # initialized: the handshake is done
                before = sorted(path.name for path in started.iterdir())
                names = {tool.name for tool in (await client.list_tools()).tools}
        assert before == ([] if lazy else ["demo"]), options  # lazily: nothing started until tools are asked for
        assert sorted(path.name for path in started.iterdir()) == ["demo"]
        assert "mcp_demo_text_stats" in names
