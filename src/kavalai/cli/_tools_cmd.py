"""``kavalai tools list|describe|call``: the tools of a configuration, from the command line.

The tools come from a configuration file given as ``--config FILE`` (our YAML's tool sections, or the ``mcpServers``
JSON that Claude Desktop, Cursor and VS Code write), or from one MCP server given as
``--command "uvx mcp-server-time"`` or ``--url URL``;
either way :func:`kavalai.config.build_kernel` makes the kernel. Results are printed as JSON on stdout, errors as
one line on stderr. Exit status as ``kavalai run``: 0 done, 1 the tool or a server failed, 2 the command line, the
configuration or the arguments are invalid (an unknown URI included), 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
from pathlib import Path
from typing import Any, TextIO

from kavalai.cli._run import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, _interruptible

__all__ = ["add_tools_parser", "tools_command"]

_COMMAND = "kavalai tools"


def add_tools_parser(subparsers: Any) -> None:
    """Add the ``tools`` command (``list``, ``describe``, ``call``) to the ``kavalai`` command's subparsers."""
    source = argparse.ArgumentParser(add_help=False)
    source.add_argument("-c", "--config", metavar="FILE", help="a configuration file: our YAML, or an mcpServers JSON")
    source.add_argument(
        "--command", dest="server_command", metavar="CMD", help='one stdio MCP server, e.g. "uvx mcp-server-time"'
    )
    source.add_argument("--url", metavar="URL", help="one HTTP MCP server")
    source.add_argument("--name", default="server", help="the server's name in URIs with --command/--url")
    parser = subparsers.add_parser(
        "tools", help="list, describe and call the tools of a configuration", description=__doc__.split("\n\n")[1]
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", parents=[source], help="the tools' URIs and one-line descriptions")
    listing.add_argument("--pattern", default=None, help='only URIs matching this glob, e.g. "mcp://time.*"')
    listing.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    describe = actions.add_parser("describe", parents=[source], help="a tool's description and schemas (JSON)")
    describe.add_argument("uri", help="the tool's URI")
    call = actions.add_parser("call", parents=[source], help="call a tool and print its typed result (JSON)")
    call.add_argument("uri", help="the tool's URI")
    call.add_argument("arguments", nargs="*", help="one JSON object, or key=value pairs (values parsed as JSON)")
    call.add_argument("--timeout", type=float, default=None, metavar="SECONDS", help="the call's timeout")


def tools_command(args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Run ``kavalai tools`` with parsed ``args``; return the exit status."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    try:
        config = _config(args)
        arguments = _arguments(args.arguments) if args.action == "call" else {}
    except ValueError as exc:
        print(f"{_COMMAND}: {exc}", file=err)
        return EXIT_USAGE
    try:
        return asyncio.run(_interruptible(_run(args, config, arguments, out, err), err, command=_COMMAND, what="the"))
    except KeyboardInterrupt:
        print(f"{_COMMAND}: interrupted", file=err)
        return EXIT_INTERRUPTED


def _config(args: argparse.Namespace) -> Any:
    """The configuration the command line names (a ``KernelConfig``)."""
    from kavalai.config import KernelConfig
    from kavalai.errors import ConfigurationError

    given = [name for name in ("config", "server_command", "url") if getattr(args, name)]
    if len(given) != 1:
        raise ValueError("give one of: --config FILE, --command CMD, or --url URL")
    try:
        if args.config:
            return KernelConfig.from_file(Path(args.config))
        if args.server_command:
            command, *rest = shlex.split(args.server_command) or [""]
            server: dict[str, Any] = {"name": args.name, "command": command, "args": rest}
        else:
            server = {"name": args.name, "url": args.url}
        return KernelConfig.from_dict({"mcp_servers": [server]})
    except ConfigurationError as exc:
        raise ValueError(str(exc)) from None


def _arguments(items: list[str]) -> dict[str, Any]:
    """``['{"a": 1}']`` or ``['a=1', 'name=x']`` as a dict (a ``key=value`` value is JSON when it parses)."""
    if len(items) == 1 and items[0].lstrip().startswith("{"):
        try:
            value = json.loads(items[0])
        except ValueError as exc:
            raise ValueError(f"the arguments are not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ValueError("the arguments must be one JSON object")
        return value
    arguments: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{item!r} is not key=value (or give the arguments as one JSON object)")
        try:
            arguments[key] = json.loads(text)
        except ValueError:
            arguments[key] = text
    return arguments


async def _run(args: argparse.Namespace, config: Any, arguments: dict[str, Any], out: TextIO, err: TextIO) -> int:
    from kavalai.config import build_kernel
    from kavalai.errors import (
        ConfigurationError,
        FunctionKernelException,
        InvalidToolURIError,
        ToolInputError,
        ToolNotFoundError,
    )

    try:
        kernel = build_kernel(config)
    except ConfigurationError as exc:
        print(f"{_COMMAND}: {exc}", file=err)
        return EXIT_USAGE
    try:
        await _act(kernel, args, arguments, out)
    except (ToolNotFoundError, InvalidToolURIError, ToolInputError, ConfigurationError) as exc:
        print(f"{_COMMAND}: {exc}", file=err)
        return EXIT_USAGE
    except FunctionKernelException as exc:
        print(f"{_COMMAND}: {exc}", file=err)
        return EXIT_FAILED
    finally:
        await kernel.close()
    return EXIT_OK


async def _act(kernel: Any, args: argparse.Namespace, arguments: dict[str, Any], out: TextIO) -> None:
    if args.action == "list":
        await kernel.connect()
        names = kernel.list_tools(args.pattern)
        rows = [(name, _first_line(kernel.get_tool_definition(name).description)) for name in names]
        if args.json:
            _print_json([{"name": name, "description": text} for name, text in rows], out)
        else:
            width = max((len(name) for name, _ in rows), default=0)
            for name, text in rows:
                print(f"{name:<{width}}  {text}".rstrip(), file=out)
        return
    definition = await kernel.resolve_tool(args.uri)
    if args.action == "describe":
        _print_json(definition.describe(), out)
        return
    timeout = {} if args.timeout is None else {"timeout": args.timeout}
    result = await kernel.call_tool(definition.name, arguments, **timeout)
    _print_json(result.model_dump(mode="json", by_alias=True), out)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _print_json(value: Any, out: TextIO) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False), file=out)
