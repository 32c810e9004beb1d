"""A hand-written stdio MCP server of the handshake era that speaks only some protocol versions, and tells what the
client offered in ``initialize``.

Run as ``python mcp_versions.py VERSION...`` (the versions it speaks, newest last). It answers ``initialize`` with
the version offered when it speaks it, else with its newest, as the MCP specification says; ``server/discover`` is
"method not found". Its one tool, ``offered``, answers the ``protocolVersion`` the client's ``initialize`` carried.
"""

from __future__ import annotations

import json
import sys

TOOL = {"name": "offered", "description": "What the client offered.", "inputSchema": {"type": "object"}}


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    speaks = sys.argv[1:]
    offered = ""
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue  # a notification
        if method == "initialize":
            offered = message["params"]["protocolVersion"]
            version = offered if offered in speaks else speaks[-1]
            info = {"name": "versions", "version": "1"}
            result: dict[str, object] = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
        elif method == "tools/list":
            result = {"tools": [TOOL]}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": offered}]}
        elif method == "server/discover":
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}})
            continue
        else:
            result = {}
        send({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    main()
