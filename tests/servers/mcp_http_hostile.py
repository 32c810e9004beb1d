"""A hostile streamable-HTTP MCP server: a small ASGI app speaking just enough of the protocol by hand.

Tools: ``small`` answers ``{"ok": true}``; ``big_json`` answers with a JSON body of ``size`` bytes, streamed (so
the server itself holds little); ``gzipped`` answers with a gzip-compressed JSON body although the client asked for
none; ``big_event`` answers with an event stream whose one event is ``size`` bytes.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

__all__ = ["hostile_http_app"]

_TOOL_NAMES = ("small", "big_json", "gzipped", "big_event")
_SCHEMA = {"type": "object", "properties": {"size": {"type": "integer"}}}
_CHUNK = 1024 * 1024


def _result(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


async def _json_chunks(request_id: Any, size: int) -> AsyncIterator[bytes]:
    head = json.dumps(_result(request_id, {"content": [{"type": "text", "text": "@"}]})).encode()
    before, after = head.split(b"@")
    yield before
    sent = 0
    while sent < size:
        part = min(_CHUNK, size - sent)
        sent += part
        yield b"x" * part
    yield after


async def _event_chunks(request_id: Any, size: int) -> AsyncIterator[bytes]:
    yield b"event: message\ndata: "
    async for chunk in _json_chunks(request_id, size):
        yield chunk
    yield b"\n\n"


async def _call(request_id: Any, name: str, size: int) -> Response:
    if name == "small":
        return JSONResponse(_result(request_id, {"content": [{"type": "text", "text": '{"ok": true}'}]}))
    if name == "big_json":
        return StreamingResponse(_json_chunks(request_id, size), media_type="application/json")
    if name == "gzipped":
        body = gzip.compress(
            json.dumps(_result(request_id, {"content": [{"type": "text", "text": "z" * size}]})).encode()
        )
        return Response(body, media_type="application/json", headers={"Content-Encoding": "gzip"})
    return StreamingResponse(_event_chunks(request_id, size), media_type="text/event-stream")


async def _endpoint(request: Request) -> Response:
    if request.method != "POST":
        return Response(status_code=405)  # no server-initiated stream
    message = await request.json()
    method, request_id = message.get("method"), message.get("id")
    headers = {"mcp-session-id": "hostile-1"}
    if request_id is None:  # a notification
        return Response(status_code=202, headers=headers)
    if method == "initialize":
        result = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile-http", "version": "1"},
        }
        return JSONResponse(_result(request_id, result), headers=headers)
    if method == "tools/list":
        tools = [{"name": name, "inputSchema": _SCHEMA} for name in _TOOL_NAMES]
        return JSONResponse(_result(request_id, {"tools": tools}), headers=headers)
    if method == "tools/call":
        params = message["params"]
        return await _call(request_id, params["name"], int(params.get("arguments", {}).get("size", 0)))
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": method}})


def hostile_http_app() -> Starlette:
    """The app; the MCP endpoint is ``/mcp``."""
    return Starlette(routes=[Route("/mcp", _endpoint, methods=["GET", "POST", "DELETE"])])
