"""Capture the third catalogue of the tool search benchmark: bench/data/tool_catalog_third.json.

Like bench/tool_search_catalog_untuned.py's, this catalogue is never tuned on: its requests
(bench/data/tool_requests_third.json) were written in users' words from the listing and committed before any search
ran on it, and no setting of :mod:`kavalai.agent.search` was chosen on it. Its sources are ones the project had not
used (neither in the tuning catalogue nor in the untuned one). Run once (needs npm, and the registries):
``.venv/bin/python bench/tool_search_catalog_third.py``. Each server is started over stdio with placeholder
credentials (listing tools needs none; nothing is called; the Stripe, Supabase and Azure DevOps servers were tried
and left out: they do not list tools without a live account):

- npm MCP servers (:data:`NPM`): MongoDB, Firecrawl, Airtable, Linear, Mapbox, HubSpot, LINE, Elasticsearch, Figma,
  Desktop Commander, YouTube transcripts;
- Seldon MLServer's REST API (the V2 inference protocol and its model repository), from the OpenAPI documents the
  ``mlserver`` wheel ships.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import _catalog_capture  # bench/, the script's own folder: imported before it leaves sys.path

# Run as a script, this file's directory comes first on sys.path, and bench/mcp.py would shadow the mcp package.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

from kavalai import FunctionKernel, McpServer, RestServer  # noqa: E402

# package -> (version, server name, script under the package, extra arguments, environment)
NPM: dict[str, tuple[str, str, str, list[str], dict[str, str]]] = {
    "mongodb-mcp-server": ("3.0.4", "mongodb", "dist/esm/index.js", [], {}),
    "firecrawl-mcp": ("3.26.0", "firecrawl", "dist/index.js", [], {"FIRECRAWL_API_KEY": "fc-x"}),
    "airtable-mcp-server": ("1.14.0", "airtable", "dist/main.js", [], {"AIRTABLE_API_KEY": "x"}),
    "mcp-server-linear": ("1.6.0", "linear", "build/index.js", [], {"LINEAR_API_KEY": "x"}),
    "@mapbox/mcp-server": ("0.14.0", "mapbox", "dist/esm/index.js", [], {"MAPBOX_ACCESS_TOKEN": "pk.x"}),
    "@hubspot/mcp-server": ("0.4.0", "hubspot", "dist/index.js", [], {"PRIVATE_APP_ACCESS_TOKEN": "x"}),
    "@line/line-bot-mcp-server": (
        "0.5.0",
        "line",
        "dist/index.js",
        [],
        {"CHANNEL_ACCESS_TOKEN": "x", "DESTINATION_USER_ID": "U1"},
    ),
    "@elastic/mcp-server-elasticsearch": (
        "0.3.1",
        "elasticsearch",
        "dist/index.js",
        [],
        {"ES_URL": "http://127.0.0.1:1", "ES_API_KEY": "x"},
    ),
    "figma-developer-mcp": ("0.13.2", "figma", "dist/bin.js", ["--stdio"], {"FIGMA_API_KEY": "x"}),
    "@wonderwhy-er/desktop-commander": ("0.2.52", "desktop", "dist/index.js", [], {}),
    "@kimtaeyoon83/mcp-server-youtube-transcript": ("0.1.1", "youtube", "dist/index.js", [], {}),
}
MLSERVER = (
    "mlserver",
    "1.7.1",
    ("mlserver/rest/openapi/dataplane.json", "mlserver/rest/openapi/model_repository.json"),
)
OUT = Path(__file__).resolve().parent / "data" / "tool_catalog_third.json"
SCRATCH = Path(tempfile.gettempdir()) / "kavalai-tool-catalog-third"


def _install() -> None:
    """The npm packages and the wheel, once."""
    _catalog_capture.install(SCRATCH, NPM, f"{MLSERVER[0]}=={MLSERVER[1]}", "*.whl")


def _mlserver_specs() -> list[Path]:
    wheel = next(SCRATCH.glob("*.whl"))
    found = []
    with zipfile.ZipFile(wheel) as archive:
        for member in MLSERVER[2]:
            target = SCRATCH / Path(member).name
            target.write_bytes(archive.read(member))
            found.append(target)
    return found


async def main() -> None:
    _install()
    home = Path(tempfile.mkdtemp())  # a server that writes its settings under HOME writes them here
    modules = SCRATCH / "node_modules"
    found: list[dict[str, Any]] = []
    for name, (_, server, script, args, env) in NPM.items():
        config = McpServer(
            name=server, command="node", args=[str(modules / name / script), *args], env={"HOME": str(home), **env}
        )
        tools = await _catalog_capture.untuned()._list(config)
        print(f"{server}: {len(tools)} tools")
        found.extend(tools)
    kernel = FunctionKernel()
    kernel.register_rest_server(RestServer(name="mlserver", url="http://127.0.0.1:8080"))
    for spec in _mlserver_specs():
        kernel.register_openapi("mlserver", str(spec))
    found.extend(await kernel.describe_tools())
    await kernel.close()
    tools = [{key: d[key] for key in ("name", "description", "inputSchema") if key in d} for d in found]
    sources = {"npm": {name: spec[0] for name, spec in NPM.items()}, "openapi": {MLSERVER[0]: MLSERVER[1]}}
    OUT.write_text(json.dumps({"sources": sources, "tools": tools}, indent=1, sort_keys=True) + "\n")
    print(f"{len(tools)} tools -> {OUT}")


if __name__ == "__main__":
    asyncio.run(main())
