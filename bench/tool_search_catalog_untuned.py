"""Capture the second, never-tuned catalogue of the tool search benchmark: bench/data/tool_catalog_untuned.json.

Nothing in it was used to choose a setting of :mod:`kavalai.agent.search`: the settings are chosen on
bench/data/tool_catalog.json (its ``tune`` half), and this catalogue, with the requests of
bench/data/tool_requests_untuned.json (written and committed before any search ran on it), only measures how they
carry over. Run once (needs npm, and the registries): ``.venv/bin/python bench/tool_search_catalog_untuned.py``.
What goes in, as ``kernel.describe_tools()`` gives it, each server started over stdio with placeholder credentials
(listing tools needs none; nothing is called; Redis, Heroku, SQLite and Docker servers were tried and left out:
they do not list tools without a live backend):

- npm MCP servers (:data:`NPM`): GitHub, GitLab, Slack, Google Maps, Brave Search, the knowledge-graph memory,
  Puppeteer, Playwright, Postgres, Notion, Sentry, CircleCI, Kubernetes;
- PyPI's fetch MCP server (:data:`PYPI`);
- Apache Airflow's REST API, from the OpenAPI document the ``apache-airflow-core`` wheel ships.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

# Run as a script, this file's directory comes first on sys.path, and bench/mcp.py would shadow the mcp package.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

from kavalai import FunctionKernel, McpServer, RestServer  # noqa: E402

# package -> (version, server name, script under the package, extra arguments, environment)
NPM: dict[str, tuple[str, str, str, list[str], dict[str, str]]] = {
    "@modelcontextprotocol/server-github": (
        "2025.4.8",
        "github",
        "dist/index.js",
        [],
        {"GITHUB_PERSONAL_ACCESS_TOKEN": "x"},
    ),
    "@modelcontextprotocol/server-gitlab": (
        "2025.4.25",
        "gitlab",
        "dist/index.js",
        [],
        {"GITLAB_PERSONAL_ACCESS_TOKEN": "x"},
    ),
    "@modelcontextprotocol/server-slack": (
        "2025.4.25",
        "slack",
        "dist/index.js",
        [],
        {"SLACK_BOT_TOKEN": "x", "SLACK_TEAM_ID": "T1"},
    ),
    "@modelcontextprotocol/server-google-maps": ("0.6.2", "maps", "dist/index.js", [], {"GOOGLE_MAPS_API_KEY": "x"}),
    "@modelcontextprotocol/server-brave-search": ("0.6.2", "brave", "dist/index.js", [], {"BRAVE_API_KEY": "x"}),
    "@modelcontextprotocol/server-memory": ("2026.8.31", "memory", "dist/index.js", [], {}),
    "@modelcontextprotocol/server-puppeteer": ("2025.5.12", "puppeteer", "dist/index.js", [], {}),
    "@playwright/mcp": ("0.0.83", "playwright", "cli.js", [], {}),
    "@modelcontextprotocol/server-postgres": ("0.6.2", "postgres", "dist/index.js", ["postgresql://127.0.0.1:1/x"], {}),
    "@notionhq/notion-mcp-server": ("2.5.2", "notion", "bin/cli.mjs", [], {"NOTION_TOKEN": "x"}),
    "@sentry/mcp-server": ("0.39.0", "sentry", "dist/index.js", ["--access-token=x"], {}),
    "@circleci/mcp-server-circleci": ("0.20.0", "circleci", "dist/index.js", [], {"CIRCLECI_TOKEN": "x"}),
    "mcp-server-kubernetes": ("4.1.7", "kubernetes", "dist/index.js", [], {}),
}
# package -> (version, server name, console script, arguments)
PYPI: dict[str, tuple[str, str, str, list[str]]] = {
    "mcp-server-fetch": ("2026.10.24", "fetch", "mcp-server-fetch", []),
}
AIRFLOW = ("apache-airflow-core", "3.3.2", "airflow/api_fastapi/core_api/openapi/v2-rest-api-generated.yaml")
OUT = Path(__file__).resolve().parent / "data" / "tool_catalog_untuned.json"
SCRATCH = Path(tempfile.gettempdir()) / "kavalai-tool-catalog-untuned"


def _install() -> None:
    """npm packages, a venv per PyPI server (their pins conflict), and Airflow's wheel, once."""
    SCRATCH.mkdir(parents=True, exist_ok=True)
    if not (SCRATCH / "node_modules").exists():
        packages = [f"{name}@{spec[0]}" for name, spec in NPM.items()]
        env = {"PUPPETEER_SKIP_DOWNLOAD": "1", "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1"}
        subprocess.run(
            ["npm", "install", "--silent", "--no-audit", "--no-fund", *packages],
            cwd=SCRATCH,
            check=True,
            env={**_environ(), **env},
        )
    for name, (version, server, _, _) in PYPI.items():
        venv = SCRATCH / f"venv-{server}"
        if not venv.exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"{name}=={version}"], check=True)
    wheel_dir = SCRATCH / "wheels"
    if not list(wheel_dir.glob("*.whl")):
        pin = f"{AIRFLOW[0]}=={AIRFLOW[1]}"
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", pin, "-d", str(wheel_dir)], check=True
        )


def _environ() -> dict[str, str]:
    import os

    return dict(os.environ)


def _airflow_spec() -> Path:
    wheel = next((SCRATCH / "wheels").glob("*.whl"))
    target = SCRATCH / "airflow-openapi.yaml"
    with zipfile.ZipFile(wheel) as archive:
        target.write_bytes(archive.read(AIRFLOW[2]))
    return target


def _servers(tmp: Path) -> list[McpServer]:
    modules = SCRATCH / "node_modules"
    servers = [
        McpServer(name=server, command="node", args=[str(modules / name / script), *args], env=env)
        for name, (_, server, script, args, env) in NPM.items()
    ]
    for _, server, script, args in PYPI.values():
        command = str(SCRATCH / f"venv-{server}" / "bin" / script)
        servers.append(McpServer(name=server, command=command, args=[a.format(tmp=tmp) for a in args]))
    return servers


async def _list(server: McpServer) -> list[dict[str, Any]]:
    """One server's tools, or none (said on stderr) when it will not start without a real backend."""
    kernel = FunctionKernel()
    kernel.register_mcp_server(server)
    try:
        await kernel.connect_mcp_servers()
        return await kernel.describe_tools()
    except Exception as exc:  # a server that needs a live backend to list is left out, said so
        print(f"{server.name}: left out ({type(exc).__name__}: {str(exc)[:200]})", file=sys.stderr)
        return []
    finally:
        await kernel.close()


async def main() -> None:
    _install()
    tmp = Path(tempfile.mkdtemp())
    found: list[dict[str, Any]] = []
    for server in _servers(tmp):
        tools = await _list(server)
        print(f"{server.name}: {len(tools)} tools")
        found.extend(tools)
    kernel = FunctionKernel()
    kernel.register_rest_server(RestServer(name="airflow", url="http://127.0.0.1:8080"))
    kernel.register_openapi("airflow", str(_airflow_spec()))
    found.extend(await kernel.describe_tools())
    await kernel.close()
    tools = [{key: d[key] for key in ("name", "description", "inputSchema") if key in d} for d in found]
    sources = {
        "npm": {name: spec[0] for name, spec in NPM.items()},
        "pypi": {name: spec[0] for name, spec in PYPI.items()},
        "openapi": {AIRFLOW[0]: AIRFLOW[1]},
    }
    OUT.write_text(json.dumps({"sources": sources, "tools": tools}, indent=1, sort_keys=True) + "\n")
    print(f"{len(tools)} tools -> {OUT}")


if __name__ == "__main__":
    asyncio.run(main())
