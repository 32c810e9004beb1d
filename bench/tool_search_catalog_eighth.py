"""Capture the eighth catalogue of the tool search benchmark: bench/data/tool_catalog_eighth.json.

**Never tuned on, never seen** (the seventh's totals have been read, so this one takes its place): its requests
(bench/data/tool_requests_eighth.json) were written in users' words from the listing and committed before any
search ran on them; no setting is chosen on it and its per-request results are not read: only its totals are
reported, once, at the end of the round, after the last ranking change. Its sources are ones none of the other
seven used. Run once (needs npm, and the registry): ``.venv/bin/python bench/tool_search_catalog_eighth.py``. Each
server is started over stdio with placeholder credentials (listing tools needs none; nothing is called); a server
that does not list without a live account is left out, said on stderr.

npm MCP servers (:data:`NPM`): Google Calendar, Reddit, SonarQube, Vercel, Plane, Miro, a weather server,
Contentful, PDF reading, arXiv/OpenAlex papers (obsidian-mcp-server 3.2.12 does not install; Redis's, MySQL's and
@codefuturist/email-mcp's do not list without a live backend or a configuration: all left out).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

import _catalog_capture  # bench/, the script's own folder: imported before it leaves sys.path

# Run as a script, this file's directory comes first on sys.path, and bench/mcp.py would shadow the mcp package.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

# package -> (version, server name, script under the package, extra arguments, environment)
NPM: dict[str, tuple[str, str, str, list[str], dict[str, str]]] = {
    "@cocal/google-calendar-mcp": (
        "2.6.3",
        "gcal",
        "build/index.js",
        [],
        {"GOOGLE_OAUTH_CREDENTIALS": str(Path(tempfile.gettempdir()) / "kavalai-tool-catalog-eighth" / "oauth.json")},
    ),
    "reddit-mcp-buddy": ("1.1.14", "reddit", "dist/cli.js", [], {}),
    "sonarqube-mcp-server": (
        "1.10.21",
        "sonarqube",
        "dist/index.js",
        [],
        {"SONARQUBE_TOKEN": "x", "SONARQUBE_URL": "http://127.0.0.1:9000"},
    ),
    "@mistertk/vercel-mcp": ("0.1.1", "vercel", "build/index.js", [], {"VERCEL_API_KEY": "x" * 24}),
    "@makeplane/plane-mcp-server": (
        "0.1.5",
        "plane",
        "build/index.js",
        [],
        {"PLANE_API_KEY": "x", "PLANE_WORKSPACE_SLUG": "x", "PLANE_API_HOST_URL": "http://127.0.0.1:8000"},
    ),
    "@k-jarzyna/mcp-miro": ("1.0.11", "miro", "build/index.js", [], {"MIRO_ACCESS_TOKEN": "x"}),
    "@dangahagan/weather-mcp": ("1.23.0", "weather", "dist/index.js", [], {}),
    "@ivotoby/contentful-management-mcp-server": (
        "1.21.0",
        "contentful",
        "bin/mcp-server.js",
        [],
        {"CONTENTFUL_MANAGEMENT_ACCESS_TOKEN": "x"},
    ),
    "@modelcontextprotocol/server-pdf": ("2.0.4", "pdf", "dist/index.js", ["--stdio"], {}),
    "@futurelab-studio/latest-science-mcp": ("0.1.40", "science", "dist/server.js", [], {}),
}
#: A placeholder OAuth client for the calendar server, which reads one before it starts.
PLACEHOLDER_CLIENT = {"client_id": "x", "client_secret": "x", "redirect_uris": ["http://localhost"]}
OUT = Path(__file__).resolve().parent / "data" / "tool_catalog_eighth.json"
SCRATCH = Path(tempfile.gettempdir()) / "kavalai-tool-catalog-eighth"


async def main() -> None:
    _catalog_capture.install(SCRATCH, NPM)
    (SCRATCH / "oauth.json").write_text(json.dumps({"installed": PLACEHOLDER_CLIENT}))
    found, listed = await _catalog_capture.list_npm(SCRATCH, NPM)
    tools = [{key: d[key] for key in ("name", "description", "inputSchema") if key in d} for d in found]
    OUT.write_text(json.dumps({"sources": {"npm": listed}, "tools": tools}, indent=1, sort_keys=True) + "\n")
    print(f"{len(tools)} tools -> {OUT}")


if __name__ == "__main__":
    asyncio.run(main())
