"""Capture the tenth catalogue of the tool search benchmark: bench/data/tool_catalog_tenth.json.

**Never tuned on, never seen** (the ninth's totals have been read, so this one takes its place): its requests
(bench/data/tool_requests_tenth.json) were written in users' words from the listing and committed before any search
ran on them; no setting is chosen on it and its per-request results are not read: only its totals are reported,
once, at the end of the round, after the last ranking change. Its sources are ones none of the other nine used.
Run once (needs npm, and the registries): ``.venv/bin/python bench/tool_search_catalog_tenth.py``. Each server is
started over stdio with placeholder credentials (listing tools needs none; nothing is called); a server that does
not list without a live account is left out, said on stderr (the listing in the catalogue's ``sources`` names those
that listed).

- npm MCP servers (:data:`NPM`), tried: Supabase, Stripe, Chrome DevTools, mobile devices (mobile-mcp), Heroku,
  Redis, Cloudflare, Upstash, MySQL, Bright Data, Google Cloud Run, Google Drive;
- the GA4GH Workflow Execution Service's API, from the OpenAPI (Swagger 2) document the ``wes-service`` wheel ships
  (``wes_service/openapi/workflow_execution_service.swagger.yaml``).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import zipfile
from pathlib import Path

import yaml

import _catalog_capture  # bench/, the script's own folder: imported before it leaves sys.path

# Run as a script, this file's directory comes first on sys.path, and bench/mcp.py would shadow the mcp package.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

from kavalai import FunctionKernel, RestServer  # noqa: E402

SCRATCH = Path(tempfile.gettempdir()) / "kavalai-tool-catalog-tenth"
_DB = {"MYSQL_HOST": "127.0.0.1", "MYSQL_PORT": "3306", "MYSQL_USER": "x", "MYSQL_PASS": "x", "MYSQL_DB": "x"}
# package -> (version, server name, script under the package, extra arguments, environment)
NPM: dict[str, tuple[str, str, str, list[str], dict[str, str]]] = {
    "@supabase/mcp-server-supabase": ("0.13.0", "supabase", "dist/cli.js", ["--access-token", "x"], {}),
    "@stripe/mcp": ("0.3.3", "stripe", "dist/index.js", ["--tools=all", "--api-key=sk_test_x"], {}),
    "chrome-devtools-mcp": ("1.11.0", "chrome", "build/src/bin/chrome-devtools-mcp.js", [], {}),
    "@mobilenext/mobile-mcp": ("1.0.4", "mobile", "lib/index.js", [], {}),
    "@heroku/mcp-server": ("1.2.8", "heroku", "bin/heroku-mcp-server.mjs", [], {"HEROKU_API_KEY": "x"}),
    "@modelcontextprotocol/server-redis": ("2025.4.25", "redis", "dist/index.js", ["redis://127.0.0.1:6379"], {}),
    "@cloudflare/mcp-server-cloudflare": ("0.2.0", "cloudflare", "dist/index.js", ["run", "x"], {}),
    "@upstash/mcp-server": ("0.3.0", "upstash", "dist/index.js", ["--email", "x@example.org", "--api-key", "x"], {}),
    "@benborla29/mcp-server-mysql": ("2.0.9", "mysql", "dist/index.js", [], _DB),
    "@brightdata/mcp": ("2.11.3", "brightdata", "server.js", [], {"API_TOKEN": "x"}),
    "@google-cloud/cloud-run-mcp": ("1.10.0", "cloudrun", "mcp-server.js", [], {"GOOGLE_CLOUD_PROJECT": "x"}),
    "@modelcontextprotocol/server-gdrive": ("2025.1.14", "gdrive", "dist/index.js", [], {}),
    "@softeria/ms-365-mcp-server": ("0.155.0", "ms365", "dist/index.js", [], {}),
    "hostinger-api-mcp": ("1.63.2", "hostinger", "src/servers/vps.js", [], {"API_TOKEN": "x"}),
    "backlog-mcp-server": (
        "0.20.4",
        "backlog",
        "build/index.js",
        [],
        {"BACKLOG_DOMAIN": "x.backlog.com", "BACKLOG_API_KEY": "x"},
    ),
    "@smartbear/mcp": ("0.41.0", "smartbear", "dist/index.js", [], {"BUGSNAG_AUTH_TOKEN": "x"}),
    "@instantdb/mcp": ("1.0.67", "instantdb", "dist/index.js", ["--token", "x"], {}),
    "mcpcosmosdb": (
        "2.0.0",
        "cosmosdb",
        "dist/server.js",
        [],
        {"COSMOSDB_URI": "https://x.documents.azure.com:443/", "COSMOSDB_KEY": "eA=="},
    ),
    "flightradar-mcp-server": ("0.1.2", "flights", "build/index.js", [], {"FR24_API_KEY": "x"}),
    "@larksuiteoapi/lark-mcp": ("0.5.1", "lark", "dist/cli.js", ["mcp", "-a", "x", "-s", "x"], {}),
}
WES = ("wes-service", "5.0", "wes_service/openapi/workflow_execution_service.swagger.yaml")
OUT = Path(__file__).resolve().parent / "data" / "tool_catalog_tenth.json"


def _wes_spec() -> Path:
    """The WES document as OpenAPI 3.0 (kavalai imports 3.x), converted as the fourth catalogue's Jupyter one was."""
    wheel = next(SCRATCH.glob("wes_service-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        swagger = yaml.safe_load(archive.read(WES[2]))
    target = SCRATCH / "wes-openapi.json"
    target.write_text(json.dumps(_catalog_capture.capture_script("fourth")._openapi3(swagger)))
    return target


async def main() -> None:
    _catalog_capture.install(SCRATCH, NPM, f"{WES[0]}=={WES[1]}", "wes_service-*.whl")
    found, listed = await _catalog_capture.list_npm(SCRATCH, NPM)
    kernel = FunctionKernel()
    kernel.register_rest_server(RestServer(name="wes", url="http://127.0.0.1:8007"))
    kernel.register_openapi("wes", str(_wes_spec()))
    wes = await kernel.describe_tools()
    print(f"wes: {len(wes)} tools")
    found.extend(wes)
    await kernel.close()
    tools = [{key: d[key] for key in ("name", "description", "inputSchema") if key in d} for d in found]
    sources = {"npm": listed, "openapi": {WES[0]: WES[1]}}
    OUT.write_text(json.dumps({"sources": sources, "tools": tools}, indent=1, sort_keys=True) + "\n")
    print(f"{len(tools)} tools -> {OUT}")


if __name__ == "__main__":
    asyncio.run(main())
