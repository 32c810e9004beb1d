"""A hand-written stdio MCP server whose schemas do not say whether undeclared properties are allowed (no
``additionalProperties``), as most servers' do not.

Run as ``python mcp_open_schemas.py``. Its one tool, ``echo``, declares the argument ``text`` and the output field
``text``; it answers ``{"text": ..., "names": [the argument names it received]}``, so ``names`` is a field its
output schema does not declare.
"""

from __future__ import annotations

import json
import sys

TOOL = {
    "name": "echo",
    "description": "Echo text, and the names of the arguments received.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    "outputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}


def answer(message: dict[str, object]) -> dict[str, object]:
    method, params = message.get("method"), message.get("params")
    if method == "initialize":
        assert isinstance(params, dict)
        info = {"name": "open-schemas", "version": "1"}
        return {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": info}
    if method == "tools/list":
        return {"tools": [TOOL]}
    if method == "tools/call":
        assert isinstance(params, dict)
        arguments = params.get("arguments") or {}
        structured = {"text": arguments.get("text"), "names": sorted(arguments)}
        return {"content": [{"type": "text", "text": json.dumps(structured)}], "structuredContent": structured}
    return {}


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        request_id = message.get("id")
        if request_id is None:
            continue
        if message.get("method") == "server/discover":
            error = {"code": -32601, "message": "Method not found"}
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}) + "\n")
        else:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": answer(message)}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
