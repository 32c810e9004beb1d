"""A hand-written stdio MCP server of the 2026-07-28 era whose one tool, ``work``, always comes back as a task
(``io.modelcontextprotocol/tasks``) that then misbehaves as MODE says (no SDK, so it starts in milliseconds):

- ``forever``: the task stays ``working`` for ever (its ``pollIntervalMs`` is 0, to tempt a client to spin).
- ``garbage``: ``tasks/get`` answers with a status no task has.
- ``asks``: the task asks for input (elicitation) again after every answer.
- ``floods``: ``tools/call`` itself answers with an ``InputRequiredResult`` of 1,000 requests.
- ``late``: ``tools/call`` starts the task's work (a line in the file named by ``STARTED_LOG``) a second before
  answering with the task, so a client may give up while the task's id is still on its way.

Every ``tasks/cancel`` it receives is appended to the file named by ``CANCEL_LOG``, and every ``tasks/get`` counted
in ``GET_LOG`` (one line each). Run as ``python -m tests.servers.mcp_tasks_hostile MODE``.
"""

from __future__ import annotations

import json
import os
import sys
import time

VERSION = "2026-07-28"
TOOL = {"name": "work", "description": "Work as a task.", "inputSchema": {"type": "object", "properties": {}}}
ASK = {
    "method": "elicitation/create",
    "params": {"mode": "form", "message": "Again?", "requestedSchema": {"type": "object", "properties": {}}},
}


def task(status: str, **extra: object) -> dict[str, object]:
    fields = {"taskId": "t-1", "status": status, "createdAt": "2026-12-03T00:00:00Z"}
    return {**fields, "lastUpdatedAt": "2026-12-03T00:00:00Z", "ttlMs": 60000, "pollIntervalMs": 0, **extra}


def log(variable: str, line: str) -> None:
    with open(os.environ[variable], "a") as file:
        file.write(line + "\n")


def answer(mode: str, method: str, params: dict[str, object]) -> dict[str, object]:
    if method == "server/discover":
        info = {"name": "tasks-hostile", "version": "1"}
        capabilities = {"tools": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}
        return {"supportedVersions": [VERSION], "capabilities": capabilities, "serverInfo": info}
    if method == "tools/list":
        return {"tools": [TOOL], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
    if method == "tools/call":
        if mode == "floods":
            return {"resultType": "input_required", "inputRequests": {f"k{i}": ASK for i in range(1000)}}
        if mode == "late":
            log("STARTED_LOG", "started")
            time.sleep(1.0)
        return {**task("working"), "resultType": "task"}
    if method == "tasks/get":
        log("GET_LOG", "get")
        if mode == "garbage":
            return {**task("exploded"), "resultType": "complete"}
        if mode == "asks":
            return {**task("input_required", inputRequests={"again": ASK}), "resultType": "complete"}
        return {**task("working"), "resultType": "complete"}
    if method == "tasks/cancel":
        log("CANCEL_LOG", str(params.get("taskId")))
        return {"resultType": "complete"}
    if method == "tasks/update":
        return {"resultType": "complete"}
    raise KeyError(method)


def main() -> None:
    mode = sys.argv[1]
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue
        try:
            reply = {"result": answer(mode, message["method"], message.get("params") or {})}
        except KeyError:
            reply = {"error": {"code": -32601, "message": f"Method not found: {message['method']}"}}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], **reply}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
