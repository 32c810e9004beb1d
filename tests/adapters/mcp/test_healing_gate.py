"""The healing gate, enumerated: every MCP session is opened by a generation's owner (``McpConnection._own``), which
sets up again what the caller had set up (``Healing``), and every way of setting something up on a server is one
the owner restores. Found in the source, so a new session, change stream or subscription that bypasses the owner
fails here."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src" / "kavalai"


def _change_stream(node: ast.Call) -> bool:
    """Whether a ``listen(...)`` call opens a change stream: the SDK's (with a filter) or ``era.listen``."""
    func = node.func
    by_era = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "era"
    return by_era or any(k.arg == "resource_subscriptions" for k in node.keywords)


def _calls() -> dict[str, set[tuple[str, str]]]:
    """Each watched constructor or call -> the (module, enclosing function) pairs that make it."""
    watched = {"Generation", "Client", "ChangeStream", "SubscribeRequest", "SetLevelRequest", "listen"}
    found: dict[str, set[tuple[str, str]]] = {name: set() for name in watched}
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        module = path.relative_to(SRC).as_posix()
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if name == "listen" and not _change_stream(node):
                    continue  # a socket's listen(backlog), not a change stream
                if name in watched:
                    found[name].add((module, function.name))
    return found


def test_every_session_and_change_stream_is_opened_by_the_generation_owner() -> None:
    calls = _calls()
    assert calls["Generation"] == {("adapters/mcp/_connection.py", "_start")}  # _start spawns _own for it
    assert calls["Client"] == {("adapters/mcp/_connection.py", "_session_on")}  # reached only from _own
    assert calls["ChangeStream"] == {("adapters/mcp/_connection.py", "_own")}
    assert calls["listen"] == {("adapters/mcp/_era.py", "listen"), ("adapters/mcp/_listening.py", "_hold")}


def test_every_subscription_and_logging_level_is_one_the_owner_sets_up_again() -> None:
    calls = _calls()
    # The caller's subscribe (recorded in Healing.subscribed) and the owner's restoring one.
    assert calls["SubscribeRequest"] == {
        ("adapters/mcp/_features.py", "subscribe_resource"),
        ("adapters/mcp/_healing.py", "resubscribe"),
    }
    # Asked at every session's opening, so a new session asks it again.
    assert calls["SetLevelRequest"] == {("adapters/mcp/_era.py", "ask_log_level")}


def test_the_owner_restores_before_it_reports_connected() -> None:
    source = (SRC / "adapters" / "mcp" / "_connection.py").read_text()
    own = next(
        node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.AsyncFunctionDef) and node.name == "_own"
    )
    body = ast.unparse(own)
    order = [body.index(step) for step in ("ChangeStream(", "resubscribe(", "_relist(", "Phase.CONNECTED")]
    assert order == sorted(order)


def _functions(name: str) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Each function (module, node) of the package that calls ``name``."""
    found = []
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for function in ast.walk(tree):
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(function):
                    func = node.func if isinstance(node, ast.Call) else None
                    called = (
                        func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                    )
                    if called == name:
                        found.append((path.relative_to(SRC).as_posix(), function))
                        break
    return found


def test_every_streamable_http_session_has_its_event_stream_watched() -> None:
    # The SDK's client gives up its GET event stream after two failures; only the watch keeps it open (_watch.py).
    makers = _functions("streamable_http_client")
    assert [(module, f.name) for module, f in makers] == [("adapters/mcp/_transports.py", "_open_http")]
    ((_, open_http),) = makers
    transports = [
        node.args[1]
        for node in ast.walk(open_http)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "httpx_client"
    ]
    # The streamable HTTP client's transport is `watched` (the SSE client, a session per stream, needs none).
    assert sorted(ast.unparse(t) for t in transports) == ["bounded", "watched"]
    watched = next(n for n in ast.walk(open_http) if isinstance(n, ast.FunctionDef) and n.name == "watched")
    assert "watched_transport(watch" in ast.unparse(watched)
