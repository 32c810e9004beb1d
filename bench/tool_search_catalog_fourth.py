"""Capture the fourth catalogue of the tool search benchmark: bench/data/tool_catalog_fourth.json.

Like the untuned and third catalogues, this one is never tuned on: its requests (bench/data/tool_requests_fourth.json)
were written in users' words from the listing and committed before any search ran on them, and no setting of
:mod:`kavalai.agent.search` was chosen on it. Its sources are ones none of the other catalogues used. Run once (needs
npm, and the registries): ``.venv/bin/python bench/tool_search_catalog_fourth.py``. Each server is started over stdio
with placeholder credentials (listing tools needs none; nothing is called); a server that does not list without a
live account is left out, said on stderr:

- npm MCP servers (:data:`NPM`): Datadog, Jira, Bitbucket, monday.com, Neon, Shortcut, a task manager, Airbnb,
  Tavily, LaunchDarkly, Currents, Pinecone, sequential thinking, Context7, Resend, Trello (Heroku's was tried and left
  out: it exits at start without a live account);
- the Jupyter Server REST API, from the Swagger 2.0 document the ``jupyter_server`` wheel ships
  (``services/api/api.yaml``), turned into OpenAPI 3 here (its body parameters become request bodies).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import yaml

import _catalog_capture  # bench/, the script's own folder: imported before it leaves sys.path

# Run as a script, this file's directory comes first on sys.path, and bench/mcp.py would shadow the mcp package.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

from kavalai import FunctionKernel, RestServer  # noqa: E402

# package -> (version, server name, script under the package, extra arguments, environment)
NPM: dict[str, tuple[str, str, str, list[str], dict[str, str]]] = {
    "@winor30/mcp-server-datadog": (
        "1.8.0",
        "datadog",
        "build/index.js",
        [],
        {"DATADOG_API_KEY": "x", "DATADOG_APP_KEY": "x", "DATADOG_SITE": "datadoghq.com"},
    ),
    "@aashari/mcp-server-atlassian-jira": (
        "3.3.0",
        "jira",
        "dist/index.js",
        [],
        {"ATLASSIAN_SITE_NAME": "x", "ATLASSIAN_USER_EMAIL": "x@example.com", "ATLASSIAN_API_TOKEN": "x"},
    ),
    "@aashari/mcp-server-atlassian-bitbucket": (
        "3.1.0",
        "bitbucket",
        "dist/index.js",
        [],
        {"ATLASSIAN_BITBUCKET_USERNAME": "x", "ATLASSIAN_BITBUCKET_APP_PASSWORD": "x"},
    ),
    "@mondaydotcomorg/monday-api-mcp": ("3.3.0", "monday", "dist/index.js", ["-t", "x"], {}),
    "@neondatabase/mcp-server-neon": ("0.3.7", "neon", "dist/index.js", ["start", "napi_x"], {}),
    "@shortcut/mcp": ("0.25.0", "shortcut", "dist/index.js", [], {"SHORTCUT_API_TOKEN": "x"}),
    "@kazuph/mcp-taskmanager": ("1.1.1", "taskmanager", "dist/index.js", [], {}),
    "@openbnb/mcp-server-airbnb": ("0.3.0", "airbnb", "dist/index.js", [], {}),
    "tavily-mcp": ("0.2.22", "tavily", "build/index.js", [], {"TAVILY_API_KEY": "tvly-x"}),
    "@launchdarkly/mcp-server": ("0.6.2", "launchdarkly", "bin/mcp-server.js", ["start", "--api-key", "x"], {}),
    "@currents/mcp": ("2.1.1", "currents", "build/index.js", [], {"CURRENTS_API_KEY": "x"}),
    "@pinecone-database/mcp": ("0.3.0", "pinecone", "dist/index.js", [], {"PINECONE_API_KEY": "x"}),
    "@modelcontextprotocol/server-sequential-thinking": ("2026.8.31", "thinking", "dist/index.js", [], {}),
    "@upstash/context7-mcp": ("4.1.1", "context7", "dist/index.js", [], {}),
    "resend-mcp": ("2.6.0", "resend", "dist/index.js", [], {"RESEND_API_KEY": "re_x"}),
    "@delorenj/mcp-server-trello": (
        "1.8.1",
        "trello",
        "build/index.js",
        [],
        {"TRELLO_API_KEY": "x", "TRELLO_TOKEN": "x", "TRELLO_BOARD_ID": "x"},
    ),
}
JUPYTER = ("jupyter_server", "2.21.1", "jupyter_server/services/api/api.yaml")
OUT = Path(__file__).resolve().parent / "data" / "tool_catalog_fourth.json"
SCRATCH = Path(tempfile.gettempdir()) / "kavalai-tool-catalog-fourth"


def _install() -> None:
    """The npm packages and the wheel, once."""
    _catalog_capture.install(SCRATCH, NPM, f"{JUPYTER[0]}=={JUPYTER[1]}", "jupyter_server-*.whl")


def _openapi3(swagger: dict[str, Any]) -> dict[str, Any]:
    """A Swagger 2.0 document as OpenAPI 3.0: ``in: body`` parameters become request bodies, definitions schemas."""
    text = json.dumps(swagger).replace("#/definitions/", "#/components/schemas/")
    document = json.loads(text)
    shared = document.get("parameters", {})
    paths: dict[str, Any] = {}
    for path, item in document.get("paths", {}).items():
        common = item.get("parameters", [])
        paths[path] = {}
        for method, operation in item.items():
            if method == "parameters":
                continue
            parameters, body = [], None
            for parameter in [*common, *operation.get("parameters", [])]:
                if "$ref" in parameter:
                    parameter = shared[parameter["$ref"].rsplit("/", 1)[1]]
                if parameter.get("in") == "body":
                    body = {"content": {"application/json": {"schema": parameter.get("schema", {})}}}
                    continue
                kept = {key: parameter[key] for key in ("name", "in", "required", "description") if key in parameter}
                kept["schema"] = {key: parameter[key] for key in ("type", "enum", "default") if key in parameter}
                parameters.append(kept)
            converted = {key: operation[key] for key in ("operationId", "summary", "description") if key in operation}
            converted["parameters"] = parameters
            converted["responses"] = {"200": {"description": "OK"}}
            if body is not None:
                converted["requestBody"] = body
            paths[path][method] = converted
    return {
        "openapi": "3.0.3",
        "info": document["info"],
        "paths": paths,
        "components": {"schemas": document.get("definitions", {})},
    }


def _jupyter_spec() -> Path:
    wheel = next(SCRATCH.glob("jupyter_server-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        swagger = yaml.safe_load(archive.read(JUPYTER[2]))
    target = SCRATCH / "jupyter_server_openapi.json"
    target.write_text(json.dumps(_openapi3(swagger)))
    return target


async def main() -> None:
    _install()
    found, listed = await _catalog_capture.list_npm(SCRATCH, NPM)
    kernel = FunctionKernel()
    kernel.register_rest_server(RestServer(name="jupyter", url="http://127.0.0.1:8888"))
    kernel.register_openapi("jupyter", str(_jupyter_spec()))
    jupyter = await kernel.describe_tools()
    print(f"jupyter: {len(jupyter)} tools")
    found.extend(jupyter)
    await kernel.close()
    tools = [{key: d[key] for key in ("name", "description", "inputSchema") if key in d} for d in found]
    sources = {"npm": listed, "openapi": {JUPYTER[0]: JUPYTER[1]}}
    OUT.write_text(json.dumps({"sources": sources, "tools": tools}, indent=1, sort_keys=True) + "\n")
    print(f"{len(tools)} tools -> {OUT}")


if __name__ == "__main__":
    asyncio.run(main())
