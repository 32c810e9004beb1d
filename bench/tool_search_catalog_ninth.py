"""Capture the ninth catalogue of the tool search benchmark: bench/data/tool_catalog_ninth.json.

**Never tuned on, never seen** (the eighth's totals have been read, so this one takes its place): its requests
(bench/data/tool_requests_ninth.json) were written in users' words from the listing and committed before any search
ran on them; no setting is chosen on it and its per-request results are not read: only its totals are reported,
once, at the end of the round, after the last ranking change. Its sources are ones none of the other eight used.
Run once (needs npm, and the registry): ``.venv/bin/python bench/tool_search_catalog_ninth.py``. Each server is
started over stdio with placeholder credentials (listing tools needs none; nothing is called); a server that does
not list without a live account is left out, said on stderr.

npm MCP servers (:data:`NPM`): Argo CD, Gmail, Postman (its default tool set, not ``--full``'s 204 tools, which
would be half the catalogue), Replicate, Obsidian, Dokploy, Chatwork, Codacy, BrowserStack
(``@atlassian-dc-mcp/confluence`` 0.34.0 and ``@shopify/dev-mcp`` 1.16.0 do not install; n8n's, Firebase's,
``mcp-sqlite``'s and ``@executeautomation/database-server``'s servers do not list without a live backend, a service
account or a native module: all left out). No OpenAPI
document from a wheel this time: none shipped in a wheel that none of the others used was found in the time the
round had.
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

SCRATCH = Path(tempfile.gettempdir()) / "kavalai-tool-catalog-ninth"
# package -> (version, server name, script under the package, extra arguments, environment)
NPM: dict[str, tuple[str, str, str, list[str], dict[str, str]]] = {
    "argocd-mcp": (
        "0.9.0",
        "argocd",
        "dist/index.js",
        ["stdio"],
        {"ARGOCD_BASE_URL": "http://127.0.0.1:8080", "ARGOCD_API_TOKEN": "x"},
    ),
    "@gongrzhe/server-gmail-autoauth-mcp": (
        "1.1.11",
        "gmail",
        "dist/index.js",
        [],
        {
            "GMAIL_OAUTH_PATH": str(SCRATCH / "gcp-oauth.keys.json"),
            "GMAIL_CREDENTIALS_PATH": str(SCRATCH / "credentials.json"),
        },
    ),
    "@postman/postman-mcp-server": ("2.13.0", "postman", "dist/src/index.js", [], {"POSTMAN_API_KEY": "x"}),
    "replicate-mcp": ("0.9.0", "replicate", "index.js", [], {"REPLICATE_API_TOKEN": "x"}),
    "mcp-obsidian": ("1.0.0", "obsidian", "dist/index.js", [str(SCRATCH / "vault")], {}),
    "@ahdev/dokploy-mcp": (
        "1.6.0",
        "dokploy",
        "build/index.js",
        [],
        {"DOKPLOY_URL": "http://127.0.0.1:3000/api", "DOKPLOY_API_KEY": "x"},
    ),
    "@chatwork/mcp-server": ("0.0.4", "chatwork", "dist/index.js", [], {"CHATWORK_API_TOKEN": "x"}),
    "@codacy/codacy-mcp": ("0.5.9", "codacy", "dist/index.js", [], {"CODACY_ACCOUNT_TOKEN": "x"}),
    "@browserstack/mcp-server": (
        "1.4.2",
        "browserstack",
        "dist/index.js",
        [],
        {"BROWSERSTACK_USERNAME": "x", "BROWSERSTACK_ACCESS_KEY": "x"},
    ),
}
#: A placeholder OAuth client and token for the Gmail server, which reads both before it lists.
PLACEHOLDER_CLIENT = {"installed": {"client_id": "x", "client_secret": "x", "redirect_uris": ["http://localhost"]}}
PLACEHOLDER_TOKEN = {"access_token": "x", "refresh_token": "x", "token_type": "Bearer", "expiry_date": 1}
OUT = Path(__file__).resolve().parent / "data" / "tool_catalog_ninth.json"


async def main() -> None:
    _catalog_capture.install(SCRATCH, NPM)
    (SCRATCH / "vault").mkdir(exist_ok=True)
    (SCRATCH / "gcp-oauth.keys.json").write_text(json.dumps(PLACEHOLDER_CLIENT))
    (SCRATCH / "credentials.json").write_text(json.dumps(PLACEHOLDER_TOKEN))
    found, listed = await _catalog_capture.list_npm(SCRATCH, NPM)
    tools = [{key: d[key] for key in ("name", "description", "inputSchema") if key in d} for d in found]
    OUT.write_text(json.dumps({"sources": {"npm": listed}, "tools": tools}, indent=1, sort_keys=True) + "\n")
    print(f"{len(tools)} tools -> {OUT}")


if __name__ == "__main__":
    asyncio.run(main())
