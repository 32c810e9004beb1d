"""A hand-written stdio MCP server of the handshake era (2025-11-25): it knows ``initialize``, ``tools/list`` and
``tools/call`` (one tool, ``add``) and answers every other request, ``server/discover`` included, with JSON-RPC's
"method not found", as servers written before the 2026-07-28 revision do.

Run it with ``python -m tests.servers.mcp_handshake_only``.
"""

from __future__ import annotations

import json
import sys

ADD = {
    "name": "add",
    "description": "Add two integers.",
    "inputSchema": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
    "outputSchema": {"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]},
}


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request_id: object, method: str, params: dict[str, object]) -> dict[str, object]:
    if method == "initialize":
        info = {"name": "handshake-only", "version": "1"}
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": info}
        return {"jsonrpc": "2.0", "id": request_id, "result": result}
    if method == "tools/list":
        return {"jsonrpc": "2.0", "id": request_id, "result": {"tools": [ADD]}}
    if method == "tools/call" and params.get("name") == "add":
        arguments = params.get("arguments") or {}
        total = int(arguments["a"]) + int(arguments["b"])  # type: ignore[index, call-overload]
        content = [{"type": "text", "text": str(total)}]
        return {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {"content": content, "structuredContent": {"result": total}},
        }
    if method == "ping":
        return {"jsonrpc": "2.0", "id": request_id, "result": {}}
    error = {"code": -32601, "message": f"Method not found: {method}"}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" in message and "method" in message:
            send(answer(message["id"], message["method"], message.get("params") or {}))


if __name__ == "__main__":
    main()
