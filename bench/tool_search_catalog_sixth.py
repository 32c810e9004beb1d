"""Capture the sixth catalogue of the tool search benchmark: bench/data/tool_catalog_sixth.json.

**Never tuned on**, like the untuned, third and fourth catalogues (the fourth has been read as totals twice, so this
one takes its place): its requests (bench/data/tool_requests_sixth.json) were written in users' words from the listing
and committed before any search ran on them, no setting of :mod:`kavalai.agent.search` is chosen on it, and its
per-request results are not read: only its totals are reported, once, at the end of the round. Its sources are ones
none of the other five used. Run once (needs npm, and the registries):
``.venv/bin/python bench/tool_search_catalog_sixth.py``. Each server is started over stdio with placeholder
credentials (listing tools needs none; nothing is called); a server that does not list without a live account is
left out, said on stderr:

- npm MCP servers (:data:`NPM`): a git server, Xero, DigitalOcean (seven of its services: apps, accounts, droplets,
  networking, container registry, Spaces, insights), Exa, Microsoft Clarity, Vapi, EverArt, AWS knowledge-base
  retrieval, a code runner (Gmail's, Cloudflare's, Upstash's, Obsidian's, Google Drive's, MySQL's and Apify's were
  tried and left out: they exit at start without a live account, database or vault);
- LocalStack's internal REST API, from the OpenAPI document the ``localstack-core`` wheel ships
  (``localstack/openapi.yaml``).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import zipfile
from pathlib import Path

import _catalog_capture  # bench/, the script's own folder: imported before it leaves sys.path

# Run as a script, this file's directory comes first on sys.path, and bench/mcp.py would shadow the mcp package.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

from kavalai import FunctionKernel, RestServer  # noqa: E402

# package -> (version, server name, script under the package, extra arguments, environment)
NPM: dict[str, tuple[str, str, str, list[str], dict[str, str]]] = {
    "@cyanheads/git-mcp-server": ("2.15.3", "git", "dist/index.js", [], {"MCP_TRANSPORT_TYPE": "stdio"}),
    "@xeroapi/xero-mcp-server": (
        "0.0.17",
        "xero",
        "dist/index.js",
        [],
        {"XERO_CLIENT_ID": "x", "XERO_CLIENT_SECRET": "x"},
    ),
    "@digitalocean/mcp": (
        "1.0.70",
        "digitalocean",
        "index.js",
        ["--services", "apps,accounts,droplets,networking,docr,spaces,insights"],
        {"DIGITALOCEAN_API_TOKEN": "x"},
    ),
    "exa-mcp-server": ("3.4.1", "exa", "dist/stdio.cjs", [], {"EXA_API_KEY": "x"}),
    "@microsoft/clarity-mcp-server": ("2.0.1", "clarity", "dist/cli.js", ["--clarity_api_token=x"], {}),
    "@vapi-ai/mcp-server": ("0.0.11", "vapi", "dist/index.js", [], {"VAPI_TOKEN": "x"}),
    "@modelcontextprotocol/server-everart": ("0.6.2", "everart", "dist/index.js", [], {"EVERART_API_KEY": "x"}),
    "@modelcontextprotocol/server-aws-kb-retrieval": (
        "0.6.2",
        "awskb",
        "dist/index.js",
        [],
        {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_REGION": "us-east-1"},
    ),
    "mcp-server-code-runner": ("0.1.8", "coderunner", "dist/cli.js", [], {}),
}
LOCALSTACK = ("localstack-core", "2026.3.0", "localstack/openapi.yaml")
OUT = Path(__file__).resolve().parent / "data" / "tool_catalog_sixth.json"
SCRATCH = Path(tempfile.gettempdir()) / "kavalai-tool-catalog-sixth"


def _localstack_spec() -> Path:
    wheel = next(SCRATCH.glob("localstack_core-*.whl"))
    target = SCRATCH / "localstack-openapi.yaml"
    with zipfile.ZipFile(wheel) as archive:
        target.write_bytes(archive.read(LOCALSTACK[2]))
    return target


async def main() -> None:
    _catalog_capture.install(SCRATCH, NPM, f"{LOCALSTACK[0]}=={LOCALSTACK[1]}", "localstack_core-*.whl")
    found, listed = await _catalog_capture.list_npm(SCRATCH, NPM)
    kernel = FunctionKernel()
    kernel.register_rest_server(RestServer(name="localstack", url="http://127.0.0.1:4566"))
    kernel.register_openapi("localstack", str(_localstack_spec()))
    localstack = await kernel.describe_tools()
    print(f"localstack: {len(localstack)} tools")
    found.extend(localstack)
    await kernel.close()
    tools = [{key: d[key] for key in ("name", "description", "inputSchema") if key in d} for d in found]
    sources = {"npm": listed, "openapi": {LOCALSTACK[0]: LOCALSTACK[1]}}
    OUT.write_text(json.dumps({"sources": sources, "tools": tools}, indent=1, sort_keys=True) + "\n")
    print(f"{len(tools)} tools -> {OUT}")


if __name__ == "__main__":
    asyncio.run(main())
