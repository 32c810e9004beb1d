"""Capture the seventh catalogue of the tool search benchmark: bench/data/tool_catalog_seventh.json.

**Never tuned on**, and never seen by any choice of :mod:`kavalai.agent.search` (the sixth has been read as totals
twice, so this one takes its place): its requests (bench/data/tool_requests_seventh.json) were written in users'
words from the listing and committed before any search ran on them; no setting is chosen on it and its per-request
results are not read: only its totals are reported, once, at the end of the round, after the last ranking change.
Its sources are ones none of the other six used. Run once (needs npm, and the registries):
``.venv/bin/python bench/tool_search_catalog_seventh.py``. Each server is started over stdio with placeholder
credentials (listing tools needs none; nothing is called); a server that does not list without a live account is
left out, said on stderr:

- npm MCP servers (:data:`NPM`): Netlify, BullMQ, Lunch Money, Selenium, Google Tasks, Docker, Azure DevOps,
  Perplexity, Lara Translate (Supabase's, Stripe's, Heroku's, Jenkins' and Redis' were tried and left out: they do not
  list without a live account or backend, or a newer Python, or their own copy of the MCP SDK);
- the oSPARC scientific computing platform's public API, from the OpenAPI document the ``osparc`` client wheel ships
  (``osparc/data/openapi.json``).
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
    "@netlify/mcp": ("1.15.1", "netlify", "dist/netlify-mcp.js", [], {"NETLIFY_PERSONAL_ACCESS_TOKEN": "x"}),
    "@adamhancock/bullmq-mcp": ("1.0.7", "bullmq", "dist/index.js", [], {}),
    "@akutishevsky/lunchmoney-mcp": ("3.0.0", "lunchmoney", "build/index.js", [], {"LUNCHMONEY_API_TOKEN": "x"}),
    "@angiejones/mcp-selenium": ("0.2.3", "selenium", "src/lib/server.js", [], {}),
    "@alvincrave/gtasks-mcp": ("0.2.0", "gtasks", "dist/index.js", [], {}),
    "@0xshariq/docker-mcp-server": ("2.0.4", "docker", "dist/index.js", [], {}),
    "@tiberriver256/mcp-server-azure-devops": (
        "0.1.48",
        "azuredevops",
        "dist/index.js",
        [],
        {
            "AZURE_DEVOPS_ORG_URL": "https://dev.azure.com/x",
            "AZURE_DEVOPS_AUTH_METHOD": "pat",
            "AZURE_DEVOPS_PAT": "x",
        },
    ),
    "@perplexity-ai/mcp-server": ("1.2.1", "perplexity", "dist/index.js", [], {"PERPLEXITY_API_KEY": "x"}),
    "@translated/lara-mcp": (
        "1.0.6",
        "lara",
        "dist/index.js",
        [],
        {"LARA_ACCESS_KEY_ID": "x", "LARA_ACCESS_KEY_SECRET": "x"},
    ),
}
OSPARC = ("osparc", "0.8.5", "osparc/data/openapi.json")
OUT = Path(__file__).resolve().parent / "data" / "tool_catalog_seventh.json"
SCRATCH = Path(tempfile.gettempdir()) / "kavalai-tool-catalog-seventh"


def _osparc_spec() -> Path:
    wheel = next(SCRATCH.glob("osparc-*.whl"))
    target = SCRATCH / "osparc-openapi.json"
    with zipfile.ZipFile(wheel) as archive:
        target.write_bytes(archive.read(OSPARC[2]))
    return target


async def main() -> None:
    _catalog_capture.install(SCRATCH, NPM, f"{OSPARC[0]}=={OSPARC[1]}", "osparc-*.whl")
    found, listed = await _catalog_capture.list_npm(SCRATCH, NPM)
    kernel = FunctionKernel()
    kernel.register_rest_server(RestServer(name="osparc", url="http://127.0.0.1:8006"))
    kernel.register_openapi("osparc", str(_osparc_spec()))
    osparc = await kernel.describe_tools()
    print(f"osparc: {len(osparc)} tools")
    found.extend(osparc)
    await kernel.close()
    tools = [{key: d[key] for key in ("name", "description", "inputSchema") if key in d} for d in found]
    sources = {"npm": listed, "openapi": {OSPARC[0]: OSPARC[1]}}
    OUT.write_text(json.dumps({"sources": sources, "tools": tools}, indent=1, sort_keys=True) + "\n")
    print(f"{len(tools)} tools -> {OUT}")


if __name__ == "__main__":
    asyncio.run(main())
