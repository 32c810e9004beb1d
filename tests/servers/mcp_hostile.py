"""A hand-written stdio MCP server that misbehaves on purpose (no SDK, so it starts in milliseconds).

Run as ``python mcp_hostile.py MODE``. It answers initialize and tools/list properly; ``tools/call`` then does
what MODE says:

- ``huge``: writes ``HUGE_BYTES`` (env, default 1.5 GiB) of JSON without a newline, in chunks.
- ``badutf8``: answers with invalid UTF-8 inside the result (the id is readable).
- ``deep``: answers with JSON nested far past any parser's depth (the id is readable).
- ``noid``: answers with a broken line that names no request.
- ``ok``: answers ``{"result": "fine"}`` as text.
- ``twice``: answers each call twice, ``fine`` then ``again`` under the same id.
- ``many``: like ``ok``, but tools/list offers ``MANY_TOOLS`` (env, default 10,000) tools.
- ``paging``: like ``ok``, but tools/list pages for ever, 2,000 new tools a page, and counts the pages it served
  in the file named by ``PAGES_FILE``.
- ``pages-later``: like ``ok``, but a call says the tool list changed, and every listing after that pages for ever
  as ``paging`` does (counting its pages in ``PAGES_FILE``).
- ``extras-later``: like ``ok``, with one resource and one prompt, until a call; after it, ``resources/list`` and
  ``prompts/list`` page for ever, 2,000 new items a page (counting their pages in ``PAGES_FILE``, by listing).
- ``extras-paging``: like ``extras-later``, but its resources and prompts page for ever from the start.
- ``completions``: like ``ok``, with one prompt ``p`` (argument ``a``) whose completion holds ``COMPLETIONS`` (env,
  default 1,000,000) values, past the protocol's 100.
- ``hang``: never answers ``initialize``; writes its pid to the file named by ``STARTS_FILE`` as it starts.
- ``stubborn``: like ``ok``, but ignores SIGTERM and keeps running after its stdin closes (only SIGKILL ends it).
- ``leaky-log``: like ``ok``, but a call first logs (``notifications/message``) a structure holding the value of
  ``LEAK_TOKEN`` (env) as a dict key, a nested value and a list item: what a gateway must mask in keys too.
- ``daemon``: like ``ok``, but first double-forks a grandchild into a session of its own (``setsid``), which
  sleeps and writes its pid to the file named by ``DAEMON_PID_FILE``.
"""

from __future__ import annotations

import json
import os
import sys


def send(message: dict[str, object]) -> None:
    sys.stdout.buffer.write(json.dumps(message).encode() + b"\n")
    sys.stdout.buffer.flush()


def tools(mode: str) -> list[dict[str, object]]:
    count = int(os.environ.get("MANY_TOOLS", "10000")) if mode == "many" else 1
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": "^[a-z]*$"}}}
    return [{"name": f"t{i}", "description": f"tool {i}", "inputSchema": schema} for i in range(count)]


def send_page(request_id: object, params: dict[str, object], field: str = "tools") -> None:
    page = int(str(params.get("cursor") or "0"))
    with open(os.environ["PAGES_FILE"], "a") as log:
        log.write(f"{field} {page}\n" if field != "tools" else f"{page}\n")
    listed = [item(field, f"p{page}_{i}") for i in range(2000)]
    send({"jsonrpc": "2.0", "id": request_id, "result": {field: listed, "nextCursor": str(page + 1)}})


def item(field: str, name: str) -> dict[str, object]:
    if field == "resources":
        return {"uri": f"file:///{name}", "name": name}
    if field == "prompts":
        return {"name": name, "description": f"prompt {name}"}
    return {"name": name, "description": f"tool {name}", "inputSchema": {"type": "object", "properties": {}}}


def capabilities(mode: str) -> dict[str, object]:
    if mode in ("extras-later", "extras-paging"):
        return {"tools": {"listChanged": True}, "resources": {}, "prompts": {}}
    if mode == "completions":
        return {"tools": {"listChanged": True}, "prompts": {}, "completions": {}}
    return {"tools": {"listChanged": True}}


def call(mode: str, request_id: object) -> None:
    out = sys.stdout.buffer
    head = json.dumps({"jsonrpc": "2.0", "id": request_id}).encode()[:-1]
    if mode == "huge":
        total, chunk = int(os.environ.get("HUGE_BYTES", str(1536 * 1024 * 1024))), b"x" * (1024 * 1024)
        out.write(head + b', "result": {"content": [{"type": "text", "text": "')
        for _ in range(total // len(chunk)):
            out.write(chunk)
        out.flush()
        return
    if mode == "badutf8":
        out.write(head + b', "result": {"content": [{"type": "text", "text": "\xff\xfe"}]}}\n')
    elif mode == "deep":
        out.write(head + b', "result": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n")
    elif mode == "noid":
        out.write(b'{"jsonrpc": "2.0", "result": \xff}\n')
    else:
        send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": "fine"}]}})
        if mode == "twice":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": "again"}]}})
    out.flush()


def detach_a_grandchild(*, scrub_env: bool = False) -> None:
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open(os.environ["DAEMON_PID_FILE"], "w") as file:
                file.write(str(os.getpid()))
            os.closerange(0, 3)
            if scrub_env:  # the same process, with an empty environment: no marker of the server's left on it
                os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)"], {})
            import time

            time.sleep(300)
        os._exit(0)


def main() -> None:
    mode = sys.argv[1]
    if mode == "hang":
        with open(os.environ["STARTS_FILE"], "a") as starts:
            starts.write(f"{os.getpid()}\n")
    if mode in ("daemon", "daemon-scrubbed"):
        detach_a_grandchild(scrub_env=mode == "daemon-scrubbed")
    if mode == "stubborn":
        import signal
        import time

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    changed = False
    for line in sys.stdin.buffer:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if method == "initialize" and mode == "hang":
            continue
        if method == "initialize":
            version = message["params"]["protocolVersion"]
            info = {"name": "hostile", "version": "1"}
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "result": {
                        "protocolVersion": version,
                        "capabilities": capabilities(mode),
                        "serverInfo": info,
                    },
                }
            )
        elif method == "tools/list" and (mode == "paging" or (mode == "pages-later" and changed)):
            send_page(request_id, message.get("params") or {})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools(mode)}})
        elif method in ("resources/list", "prompts/list") and mode in ("extras-later", "extras-paging"):
            field = method.partition("/")[0]
            if changed or mode == "extras-paging":
                send_page(request_id, message.get("params") or {}, field)
            else:
                send({"jsonrpc": "2.0", "id": request_id, "result": {field: [item(field, "first")]}})
        elif method == "prompts/list" and mode == "completions":
            prompt = {"name": "p", "arguments": [{"name": "a"}]}
            send({"jsonrpc": "2.0", "id": request_id, "result": {"prompts": [prompt]}})
        elif method == "completion/complete" and mode == "completions":
            values = [f"v{i}" for i in range(int(os.environ.get("COMPLETIONS", "1000000")))]
            send({"jsonrpc": "2.0", "id": request_id, "result": {"completion": {"values": values}}})
        elif method == "tools/call":
            if mode == "leaky-log":
                leak = os.environ["LEAK_TOKEN"]
                data = {f"key-{leak}": {"nested": [f"item {leak}", {leak: leak}]}}
                params = {"level": "warning", "logger": "leaky", "data": data}
                send({"jsonrpc": "2.0", "method": "notifications/message", "params": params})
            call(mode, request_id)
            if mode == "extras-later":
                changed = True
            if mode == "pages-later":
                changed = True
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        elif request_id is not None:
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})
    if mode == "stubborn":
        while True:  # stdin closed: stay anyway
            time.sleep(1)


if __name__ == "__main__":
    main()
