"""``kavalai run`` answering an MCP server's request for user input (``elicitation: caller``) on the terminal.

On a terminal, the user is shown the server's message and asked for each field of the form (its description,
type and choices shown; booleans as y/n, numbers parsed; an empty answer leaves an optional field out), or shown
the URL to open and asked whether it is done. Without a terminal (stdin redirected, a CI job) nobody can answer,
so the request is declined and the run is told so on stderr.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from kavalai.workflow import InputRequested

__all__ = ["answer_on_terminal"]

_TRUE, _FALSE = ("y", "yes", "true", "1"), ("n", "no", "false", "0")


async def answer_on_terminal(
    event: InputRequested, err: TextIO, *, stdin: TextIO | None = None, ask: Callable[[str], str] | None = None
) -> None:
    """Answer ``event`` from the user at the terminal, or decline it when there is no terminal."""
    stdin = stdin or sys.stdin
    request = event.request
    if ask is None and not stdin.isatty():
        print(f"  {request.server} asks: {request.message} -- declined: no terminal to ask", file=err)
        event.decline()
        return
    read = ask or _reader(err)
    print(f"  {request.server} asks: {request.message}", file=err)
    try:
        if request.mode == "url":
            done = await asyncio.to_thread(read, f"  open {request.url} -- done? [y/N] ")
            event.answer({}) if done.strip().lower() in _TRUE else event.decline()
            return
        event.answer(await _form(request.schema, read, err))
    except (EOFError, KeyboardInterrupt):
        event.decline()


def _reader(err: TextIO) -> Callable[[str], str]:
    def read(prompt: str) -> str:
        print(prompt, end="", file=err, flush=True)
        line = sys.stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\n")

    return read


async def _form(schema: Mapping[str, Any], read: Callable[[str], str], err: TextIO) -> dict[str, Any]:
    values: dict[str, Any] = {}
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    for name, spec in properties.items():
        spec = spec if isinstance(spec, Mapping) else {}
        while True:
            text = (await asyncio.to_thread(read, f"  {_label(name, spec, name in required)}: ")).strip()
            if not text and name not in required:
                break
            try:
                values[name] = _parse(text, spec)
                break
            except ValueError as exc:
                print(f"  {exc}; try again", file=err)
    return values


def _label(name: str, spec: Mapping[str, Any], required: bool) -> str:
    kind = spec.get("type", "string")
    choices = spec.get("enum")
    hint = "/".join(map(str, choices)) if choices else ("y/n" if kind == "boolean" else kind)
    about = f" - {spec['description']}" if spec.get("description") else ""
    return f"{spec.get('title') or name}{about} ({hint}{'' if required else ', optional'})"


def _parse(text: str, spec: Mapping[str, Any]) -> Any:
    kind = spec.get("type", "string")
    value: Any = text
    if kind == "boolean":
        if text.lower() not in _TRUE + _FALSE:
            raise ValueError("answer y or n")
        value = text.lower() in _TRUE
    elif kind == "integer":
        value = int(text)
    elif kind == "number":
        value = float(text)
    elif not text:
        raise ValueError("an answer is needed")
    choices = spec.get("enum")
    if choices and value not in choices:
        raise ValueError(f"choose one of {', '.join(map(str, choices))}")
    return value
