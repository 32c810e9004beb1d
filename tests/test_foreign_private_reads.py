"""The project's rule, no reads of another package's private attributes (issue 34, 34l part 3), as an enumeration:
every ``x._name`` read or write (and ``getattr(x, "_name")``, ``setattr``, ``hasattr``) in ``src/`` whose ``_name``
kavalai's own source never defines (a method, a class, an attribute it assigns to ``self``, a slot, a module-level
name) is a reach into another package's object. A new one fails here; the ones still in the source are listed with
their reasons, to be replaced by a public way (owning the object ourselves) and taken off the list."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "kavalai"

#: The reads still in the source, each with its reason. Keyed by file and the read's text (not its line number, so
#: an edit elsewhere in the file does not move it), with how many times it occurs.
ALLOWED: dict[tuple[str, str], tuple[int, str]] = {
    ("http/_outbound.py", "connection._dns_host"): (
        3,
        "urllib3 resolves _dns_host at connect: the OTLP/HTTP exporter's connection dials the address judged",
    ),
    ("adapters/mcp/_stdio.py", "getattr(process, '_process', None)"): (
        1,
        "anyio's process wraps asyncio's, whose transport stays open until closed (to replace: spawn with "
        "loop.subprocess_exec and own the transport)",
    ),
    ("adapters/mcp/_stdio.py", "getattr(getattr(process, '_process', None), '_transport', None)"): (
        1,
        "asyncio's subprocess transport, closed so it does not outlive the server (as above)",
    ),
    ("adapters/python.py", "sys._getframe"): (
        1,
        "documented in the sys module (a CPython detail): the caller's frame, for the types a tool's hints name",
    ),
    ("kernel/_cancel.py", "asyncio._get_running_loop"): (
        1,
        "the running loop or None without raising, on every call's path (the public get_running_loop raises)",
    ),
    ("tracing.py", "getattr(trace, '_TRACER_PROVIDER', _NOT_KNOWN)"): (
        1,
        "2.4 µs a call on the hot path (tests/test_foreign_tracer_provider.py)",
    ),
}

#: Reads the AST rule cannot tell from our own (kavalai defines a ``_connection`` and a ``_new_conn`` of its own, so the
#: name alone does not say the object is foreign), kept visible by their text: each must occur exactly so often.
KNOWN: dict[tuple[str, str], tuple[int, str]] = {
    ("serve/_hosts.py", "ctx.session._connection"): (
        1,
        "the MCP SDK's per-client Connection, until its ServerRequestContext carries ctx.connection "
        "(to replace: keep our own record of the connection when the session is made)",
    ),
    ("http/_outbound.py", "super()._new_conn"): (
        2,
        "urllib3's connect hook, overridden in our subclass of its connection to pin the address judged",
    ),
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


_ATTRIBUTE_CALLS = ("getattr", "setattr", "hasattr")


def _ours(value: ast.expr) -> bool:
    return isinstance(value, ast.Name) and value.id in ("self", "cls")


def _defined(node: ast.AST) -> str | None:
    """The private name ``node`` defines in kavalai's source, if any: a function, a class, an assigned name, an
    attribute assigned on ``self``, an argument, an import alias, a string (``__slots__``, a field named in text)."""
    name: str | None = None
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        name = node.name
    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        name = node.id
    elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _ours(node.value):
        name = node.attr  # what we assign to our own objects; another object's private name is not ours
    elif isinstance(node, ast.arg):
        name = node.arg
    elif isinstance(node, ast.alias):
        name = node.asname or node.name.split(".")[0]
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):
        name = node.value
    return name if name is not None and _private(name) else None


def _candidate(node: ast.AST) -> tuple[str, ast.AST] | None:
    """``(the private name, the node)`` when ``node`` reaches a private name of an object not ``self``/``cls`` (the
    name ``""`` for a ``getattr``: listed whatever kavalai defines)."""
    if isinstance(node, ast.Attribute) and _private(node.attr) and not _ours(node.value):  # a read or a write
        return node.attr, node
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _ATTRIBUTE_CALLS:
        name = node.args[1] if len(node.args) > 1 else None
        if isinstance(name, ast.Constant) and isinstance(name.value, str) and _private(name.value):
            return "", node  # by its name in a string: always a reach (its own string would count it as defined)
    return None


def test_no_private_attribute_of_a_foreign_object_is_read_but_those_listed() -> None:
    own: set[str] = set()
    candidates: list[tuple[str, str, ast.AST]] = []
    for path in sorted(SRC.rglob("*.py")):
        where = path.relative_to(SRC).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):  # one walk: what is defined, what reached
            defined = _defined(node)
            if defined is not None:
                own.add(defined)
            reached = _candidate(node)
            if reached is not None:
                candidates.append((where, *reached))
    found = Counter((where, ast.unparse(node)) for where, name, node in candidates if name not in own)
    assert dict(found) == {key: count for key, (count, _reason) in ALLOWED.items()}


def test_the_reads_the_rule_cannot_tell_are_where_they_are_listed() -> None:
    counted = {(where, text): (SRC / where).read_text(encoding="utf-8").count(text) for where, text in KNOWN}
    assert counted == {key: count for key, (count, _reason) in KNOWN.items()}
