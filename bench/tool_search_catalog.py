"""Capture the tool search benchmark's catalogue: real tool definitions, saved to bench/data/tool_catalog.json.

Run once (needs npm and the network to the registries): ``.venv/bin/python bench/tool_search_catalog.py``. The
benchmark (bench/tool_search.py) and the tests read the saved file, so they run offline and give the same figures
every time. What goes in, as ``kernel.describe_tools()`` gives it:

- Temporal's HTTP API: the OpenAPI document the ``temporalio`` wheel ships, imported as ``rest://temporal.*``;
- npm's reference MCP servers ``@modelcontextprotocol/server-everything`` and ``server-filesystem``, run over stdio;
- PyPI's reference MCP servers ``mcp-server-time`` and ``mcp-server-git``, run over stdio from a scratch venv;
- kavalai's bundled tools (fs writable, http, web, time) and its demo MCP server.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path, and bench/mcp.py would shadow the mcp package.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

import temporalio  # noqa: E402

from kavalai import FunctionKernel, McpServer, RestServer  # noqa: E402
from kavalai.demo.mcp_server import demo_server_config  # noqa: E402
from kavalai.tools import fs, http, time, web  # noqa: E402

NPM = {"@modelcontextprotocol/server-everything": "2026.8.31", "@modelcontextprotocol/server-filesystem": "2026.8.31"}
PYPI = {"mcp-server-time": "2026.10.19", "mcp-server-git": "2026.10.19"}
OUT = Path(__file__).resolve().parent / "data" / "tool_catalog.json"
TEMPORAL = "bridge/sdk-core/crates/protos/protos/api_upstream/openapi/openapiv3.yaml"


def _git_repository() -> Path:
    work = Path(tempfile.mkdtemp())
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    return work


def _scratch() -> Path:
    folder = Path(tempfile.gettempdir()) / "kavalai-tool-catalog"
    if not (folder / "node_modules").exists():
        folder.mkdir(parents=True, exist_ok=True)
        packages = [f"{name}@{version}" for name, version in NPM.items()]
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", *packages], cwd=folder, check=True)
    if not (folder / "venv").exists():
        subprocess.run([sys.executable, "-m", "venv", str(folder / "venv")], check=True)
        pins = [f"{name}=={version}" for name, version in PYPI.items()]
        subprocess.run([str(folder / "venv" / "bin" / "pip"), "install", "-q", *pins], check=True)
    return folder


async def main() -> None:
    folder = _scratch()  # once, before the event loop has anything else to do
    modules = folder / "node_modules" / "@modelcontextprotocol"
    work = _git_repository()
    kernel = FunctionKernel()
    spec = Path(temporalio.__file__).parent / TEMPORAL
    kernel.register_rest_server(RestServer(name="temporal", url="http://127.0.0.1:7243"))
    kernel.register_openapi("temporal", str(spec))
    everything = modules / "server-everything" / "dist" / "index.js"
    filesystem = modules / "server-filesystem" / "dist" / "index.js"
    kernel.register_mcp_server(McpServer(name="everything", command="node", args=[str(everything), "stdio"]))
    kernel.register_mcp_server(McpServer(name="files", command="node", args=[str(filesystem), str(work)]))
    bin_dir = folder / "venv" / "bin"
    kernel.register_mcp_server(McpServer(name="time", command=str(bin_dir / "mcp-server-time")))
    kernel.register_mcp_server(McpServer(name="git", command=str(bin_dir / "mcp-server-git"), args=["-r", str(work)]))
    kernel.register_mcp_server(demo_server_config("demo"))
    fs.register(kernel, work, writable=True)
    http.register(kernel)
    web.register(kernel)
    time.register(kernel)
    try:
        await kernel.connect_mcp_servers()
        tools = [
            {key: d[key] for key in ("name", "description", "inputSchema") if key in d}
            for d in await kernel.describe_tools()
        ]
    finally:
        await kernel.close()
    sources = {
        "npm": NPM,
        "pypi": PYPI,
        "temporalio": temporalio.__version__ if hasattr(temporalio, "__version__") else "",
    }
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps({"sources": sources, "tools": tools}, indent=1, sort_keys=True) + "\n")
    print(f"{len(tools)} tools -> {OUT}")


if __name__ == "__main__":
    asyncio.run(main())
