"""Capture the fifth catalogue of the tool search benchmark: bench/data/tool_catalog_fifth.json.

A **tuning** catalogue from sources none of the other four used, made because the first tuning catalogue was
saturated (every idea tied on it): settings of :mod:`kavalai.agent.search` may be chosen on it, and the fourth
catalogue stays never tuned on. Its requests (bench/data/tool_requests_fifth.json) were written in users' words from
the listing and committed before any search ran on them. Run once (needs npm, and the registry):
``.venv/bin/python bench/tool_search_catalog_fifth.py``. Each server is started over stdio with placeholder
credentials (listing tools needs none; nothing is called); a server that does not list without a live account is
left out, said on stderr: npm MCP servers (:data:`NPM`) for Asana, Todoist, Discord, Grafana, AntV charts,
Paperless-ngx and Bitwarden (Supabase's, Redis's, Lunch Money's, Google Calendar's and MySQL's were tried and left out:
they exit at start without a live account or database).
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
    "@roychri/mcp-server-asana": ("1.8.0", "asana", "dist/index.js", [], {"ASANA_ACCESS_TOKEN": "x"}),
    "todoist-mcp": ("1.3.4", "todoist", "dist/index.js", [], {"API_KEY": "x", "TODOIST_API_TOKEN": "x"}),
    "mcp-discord": ("1.3.4", "discord", "build/index.js", [], {"DISCORD_TOKEN": "x"}),
    "@leval/mcp-grafana": (
        "1.1.7",
        "grafana",
        "dist/cli.js",
        [],
        {"GRAFANA_URL": "http://127.0.0.1:3000", "GRAFANA_API_KEY": "x", "GRAFANA_SERVICE_ACCOUNT_TOKEN": "x"},
    ),
    "@antv/mcp-server-chart": ("0.9.10", "chart", "build/index.js", [], {}),
    "@baruchiro/paperless-mcp": (
        "2.2.1",
        "paperless",
        "build/index.js",
        ["http://127.0.0.1:8000", "x"],
        {"PAPERLESS_URL": "http://127.0.0.1:8000", "PAPERLESS_API_KEY": "x"},
    ),
    "@bitwarden/mcp-server": ("2026.7.0", "bitwarden", "dist/index.js", [], {"BW_SESSION": "x"}),
}
OUT = Path(__file__).resolve().parent / "data" / "tool_catalog_fifth.json"
SCRATCH = Path(tempfile.gettempdir()) / "kavalai-tool-catalog-fifth"


async def main() -> None:
    _catalog_capture.install(SCRATCH, NPM)
    found, listed = await _catalog_capture.list_npm(SCRATCH, NPM)
    tools = [{key: d[key] for key in ("name", "description", "inputSchema") if key in d} for d in found]
    OUT.write_text(json.dumps({"sources": {"npm": listed}, "tools": tools}, indent=1, sort_keys=True) + "\n")
    print(f"{len(tools)} tools -> {OUT}")


if __name__ == "__main__":
    asyncio.run(main())
