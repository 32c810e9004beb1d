"""A hand-written stdio MCP server that answers every message it reads, notifications too, as the naive test helper of
Kaval.AI 1.0.7 (``tests/helpers/mcp_server_map.py``) does: a notification has no id, so its "answer" carries
``"id": null``, which answers no request.

Run as ``python mcp_null_ids.py [STRAYS]``. Its one tool, ``primitive``, answers ``42`` as text; before the answer it
sends ``STRAYS`` (default 0) more messages that answer no request: by turns an error with ``"id": null``, a result
for an id that was never sent, and a line that looks like JSON-RPC but cannot be read.
"""

from __future__ import annotations

import json
import sys

TOOL = {"name": "primitive", "description": "Answers 42.", "inputSchema": {"type": "object", "properties": {}}}


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def strays(count: int) -> None:
    for i in range(count):
        if i % 3 == 0:
            send({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "no such request"}})
        elif i % 3 == 1:
            send({"jsonrpc": "2.0", "id": 900_000 + i, "result": {}})
        else:
            sys.stdout.write('{"jsonrpc": "2.0", "id": null, "result": \n')
            sys.stdout.flush()


def answer(message: dict[str, object], stray_count: int) -> dict[str, object]:
    method = message.get("method")
    if method == "initialize":
        params = message["params"]
        assert isinstance(params, dict)
        return {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "map", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": [TOOL]}
    if method == "tools/call":
        strays(stray_count)
        return {"content": [{"type": "text", "text": "42"}]}
    return {}  # everything else, notifications included, is "answered" with an empty result


def main() -> None:
    stray_count = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if message.get("method") == "server/discover":
            error = {"code": -32601, "message": "Method not found"}
            send({"jsonrpc": "2.0", "id": message["id"], "error": error})
            continue
        # The id of a notification is missing: sent back as null, like the helper's `request.get("id")`.
        send({"jsonrpc": "2.0", "id": message.get("id"), "result": answer(message, stray_count)})


if __name__ == "__main__":
    main()
