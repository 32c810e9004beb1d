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
import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any, Final, TextIO

from kavalai.cli._boundary import json_argument, json_text, seconds_option, terminal_text
from kavalai.cli._run import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, _interruptible

__all__ = ["add_tools_parser", "command_name", "first_sentence", "tools_command", "typed_arguments"]

_COMMAND = "kavalai tools"
_PROVISIONAL: Final = "server"  # the name of a --url server until it names itself
_NOT_NAME: Final = re.compile(r"[^A-Za-z0-9_-]+")
_LAUNCHER: Final = re.compile(r"uvx|uv|run|npx|pnpm|dlx|bunx|bun|node|deno|pipx|docker|python[0-9.]*|py")
_AFFIXES: Final = (r"^mcp[-_]server[-_]", r"^server[-_]", r"[-_]mcp[-_]server$", r"[-_]mcp$", r"^mcp[-_]")
#: Launchers' options that take a value (``uvx --from PKG``, ``docker run -e KEY=VALUE``).
_VALUE_OPTIONS: Final = frozenset(
    {"--from", "--with", "--python", "-p", "--directory", "--package", "-e", "--env", "-v"}
)
#: Script names that say nothing of the server (``node dist/index.js``): its folder names it instead.
_GENERIC: Final = frozenset({"index", "main", "server", "cli", "app", "__main__", "start", "run"})
_BUILD_FOLDERS: Final = frozenset({"dist", "build", "lib", "src", "bin", "out", "cjs", "esm", "dist-cjs", "dist-esm"})
_QUOTING: Final = (
    " (key=value values are typed by the tool's input schema, and read as JSON where it allows other types than "
    'text; to pass a value exactly, give the arguments as one JSON object: \'{"key": "42"}\')'
)
#: Arguments as given: one JSON object, or ``key=value`` texts not yet typed.
_Given = dict[str, Any] | list[tuple[str, str]]
_SENTENCE_END: Final = re.compile(r"[.!?](\s|$)")
_MIN_ROOM: Final = 20  # the least room a cut description gets, however narrow the terminal
# The command's help, as plain text (the module docstring is reStructuredText for the API docs).
_DESCRIPTION = (
    "List, describe and call tools from the command line. The tools come from a configuration file given as "
    "--config FILE (our YAML's tool sections, or the mcpServers JSON that Claude Desktop, Cursor and VS Code write), "
    'or from one MCP server given as --command "uvx mcp-server-time" or --url URL. Results are printed as JSON on '
    "stdout, errors as one line on stderr. Exit status: 0 done, 1 the tool or a server failed, 2 the command line, "
    "the configuration or the arguments are invalid (an unknown URI included), 130 interrupted."
)


def add_tools_parser(subparsers: Any) -> None:
    """Add the ``tools`` command (``list``, ``describe``, ``call``) to the ``kavalai`` command's subparsers."""
    source = argparse.ArgumentParser(add_help=False)
    source.add_argument("-c", "--config", metavar="FILE", help="a configuration file: our YAML, or an mcpServers JSON")
    source.add_argument(
        "--command", dest="server_command", metavar="CMD", help='one stdio MCP server, e.g. "uvx mcp-server-time"'
    )
    source.add_argument("--url", metavar="URL", help="one HTTP MCP server")
    source.add_argument(
        "--name",
        default=None,
        help="the server's name in URIs with --command/--url (default: from the command, e.g. 'time' for "
        "'uvx mcp-server-time'; with --url, the name the server gives itself)",
    )
    parser = subparsers.add_parser(
        "tools", help="list, describe and call the tools of a configuration", description=_DESCRIPTION
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", parents=[source], help="the tools' URIs and one-line descriptions")
    listing.add_argument("--pattern", default=None, help='only URIs matching this glob, e.g. "mcp://time.*"')
    listing.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    listing.add_argument(
        "--long", action="store_true", help="whole descriptions, not their first sentence cut to the terminal's width"
    )
    describe = actions.add_parser("describe", parents=[source], help="a tool's description and schemas (JSON)")
    describe.add_argument("uri", help="the tool's URI")
    call = actions.add_parser("call", parents=[source], help="call a tool and print its typed result (JSON)")
    call.add_argument("uri", help="the tool's URI")
    call.add_argument("arguments", nargs="*", help="one JSON object, or key=value pairs (values parsed as JSON)")
    call.add_argument("--timeout", type=seconds_option, default=None, metavar="SECONDS", help="the call's timeout")


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
            name = args.name or command_name([command, *rest])
            server: dict[str, Any] = {"name": name, "command": command, "args": rest}
        else:
            server = {"name": args.name or _PROVISIONAL, "url": args.url}
        return KernelConfig.from_dict({"mcp_servers": [server]})
    except ConfigurationError as exc:
        raise ValueError(str(exc)) from None


def _arguments(items: list[str]) -> dict[str, Any] | list[tuple[str, str]]:
    """``['{"a": 1}']`` as a dict, or ``['a=1', 'name=x']`` as ``(key, text)`` pairs, typed once the tool's input
    schema is known (:func:`typed_arguments`)."""
    if len(items) == 1 and items[0].lstrip().startswith("{"):
        try:
            value = json_argument(items[0], what="the arguments")
        except ValueError as exc:
            raise ValueError(f"the arguments are not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ValueError("the arguments must be one JSON object")
        return value
    pairs: list[tuple[str, str]] = []
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{item!r} is not key=value (or give the arguments as one JSON object)")
        pairs.append((key, text))
    return pairs


def typed_arguments(pairs: list[tuple[str, str]], schema: dict[str, Any]) -> dict[str, Any]:
    """``key=value`` texts typed by the tool's input ``schema``: a field that takes only text keeps the text as
    typed (``message=42`` is ``"42"``); any other value is read as JSON when it parses (``count=3`` is ``3``,
    ``tags=["a"]`` a list), else kept as text."""
    properties = schema.get("properties")
    fields: dict[str, Any] = properties if isinstance(properties, dict) else {}
    arguments: dict[str, Any] = {}
    for key, text in pairs:
        if _text_only(fields.get(key), schema.get("$defs")):
            arguments[key] = text
            continue
        try:
            arguments[key] = json_argument(text, what=f"the argument {key!r}")
        except ValueError:
            arguments[key] = text
    return arguments


def _text_only(field: Any, definitions: Any, depth: int = 0) -> bool:
    """Whether a JSON schema admits strings and nothing else but ``null`` (a ``$ref`` to ``$defs`` followed)."""
    if not isinstance(field, dict) or depth > 8:
        return False
    reference = field.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/$defs/") and isinstance(definitions, dict):
        return _text_only(definitions.get(reference.removeprefix("#/$defs/")), definitions, depth + 1)
    if "const" in field:
        return isinstance(field["const"], str)
    if isinstance(field.get("enum"), list) and field["enum"]:
        return all(isinstance(choice, str) or choice is None for choice in field["enum"])
    kinds = field.get("type")
    if isinstance(kinds, str):
        return kinds == "string"
    if isinstance(kinds, list) and kinds:
        return "string" in kinds and set(kinds) <= {"string", "null"}
    options = field.get("anyOf") or field.get("oneOf")
    if isinstance(options, list) and options:
        typed = [option for option in options if not (isinstance(option, dict) and option.get("type") == "null")]
        return bool(typed) and all(_text_only(option, definitions, depth + 1) for option in typed)
    return False


async def _run(args: argparse.Namespace, config: Any, arguments: _Given, out: TextIO, err: TextIO) -> int:
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
        if _unnamed(args, config):
            kernel = await _named_by_server(kernel, config)
        await _act(kernel, args, arguments, out)
    except (ToolNotFoundError, InvalidToolURIError, ToolInputError, ConfigurationError) as exc:
        hint = _QUOTING if isinstance(exc, ToolInputError) and isinstance(arguments, list) else ""
        print(f"{_COMMAND}: {exc}{hint}", file=err)
        return EXIT_USAGE
    except FunctionKernelException as exc:
        print(f"{_COMMAND}: {exc}", file=err)
        return EXIT_FAILED
    finally:
        await kernel.close()
    return EXIT_OK


def _unnamed(args: argparse.Namespace, config: Any) -> bool:
    """Whether the one server of ``--url`` or ``--command`` still has the provisional name (no ``--name``, and a
    command that says nothing of the server): the server's own name is taken once connected."""
    given = args.url or args.server_command
    return bool(given) and not args.name and config.mcp_servers[0].get("name") == _PROVISIONAL


async def _named_by_server(kernel: Any, config: Any) -> Any:
    """The kernel of ``--url``, or of a ``--command`` whose program says nothing of the server (``node index.js``),
    without ``--name``: its server named as it names itself (``serverInfo.name``), which is known once connected; a
    name that cannot be a server name keeps the provisional one."""
    from kavalai.config import build_kernel

    await kernel.connect()
    given = kernel.get_mcp_server_state(_PROVISIONAL).server_info_name or ""
    name = _NOT_NAME.sub("-", given).strip("-")
    if not name or name == _PROVISIONAL:
        return kernel
    await kernel.close()
    server = {**config.mcp_servers[0], "name": name}
    return build_kernel(config.model_copy(update={"mcp_servers": [server]}))


def command_name(argv: list[str]) -> str:
    """A server's name from the command that starts it: the package or script it runs, without launchers,
    options, scopes, versions, extensions and ``mcp-server-`` affixes (``uvx mcp-server-time`` is ``time``,
    ``npx -y @modelcontextprotocol/server-filesystem /tmp`` is ``filesystem``, ``python -m pkg.demo_mcp_server``
    and ``python -m pkg.demo.mcp_server`` are ``demo``); a script with a generic name is named by its folder
    (``node .../server-everything/dist/index.js`` is ``everything``); ``server`` when nothing is left."""
    words, skip = [], False
    for word in argv:
        if not skip and not word.startswith("-"):
            words.append(word)
        skip = word in _VALUE_OPTIONS  # the option's value is not the program
    while len(words) > 1 and _LAUNCHER.fullmatch(Path(words[0]).name.lower()):
        words = words[1:]
    word = words[0] if words else ""
    if word.startswith("@"):
        word = word.rsplit("/", 1)[-1].split("@", 1)[0]
    else:
        word = _named_part(Path(word)).split("@", 1)[0]
    # A dotted module (`python -m pkg.demo.mcp_server`): its last part that is not generic once unaffixed.
    for part in reversed(re.sub(r"\.(py|js|mjs|cjs|ts|exe)$", "", word).split(".")):
        name = part
        for affix in _AFFIXES:
            name = re.sub(affix, "", name, flags=re.IGNORECASE)
        name = _NOT_NAME.sub("-", name).strip("-_")
        if name and name.lower() not in _GENERIC:
            return name
    return _PROVISIONAL


def _named_part(path: Path) -> str:
    """The file's name, or for a generic one (``index.js``, ``main.py``) the nearest folder that is not a build
    folder (``dist``, ``src``, ...)."""
    stem = re.sub(r"\.(py|js|mjs|cjs|ts|exe)$", "", path.name)
    if stem.lower() not in _GENERIC:
        return path.name
    for folder in path.parents:
        if folder.name and folder.name.lower() not in _BUILD_FOLDERS:
            return folder.name
    return path.name


async def _act(kernel: Any, args: argparse.Namespace, arguments: _Given, out: TextIO) -> None:
    if args.action == "list":
        await kernel.connect()
        names = kernel.list_tools(args.pattern)
        descriptions = [kernel.get_tool_definition(name).description for name in names]
        if args.json:
            shown = descriptions if args.long else [first_sentence(text) for text in descriptions]
            _print_json([{"name": name, "description": text} for name, text in zip(names, shown, strict=True)], out)
        else:
            _print_table(names, descriptions, long=args.long, out=out)
        return
    if "://" not in args.uri:
        await kernel.connect()  # so that an error can name the tool with its scheme: `time.now` is `mcp://time.now`
    definition = await kernel.resolve_tool(args.uri)
    if args.action == "describe":
        _print_json(definition.describe(), out)
        return
    if isinstance(arguments, list):
        arguments = typed_arguments(arguments, definition.get_input_schema())
    timeout = {} if args.timeout is None else {"timeout": args.timeout}
    result = await kernel.call_tool(definition.name, arguments, **timeout)
    _print_json(result.model_dump(mode="json", by_alias=True), out)


def first_sentence(text: str) -> str:
    """The first sentence of a description's first paragraph (its lines joined), or that paragraph when it has no
    sentence end."""
    paragraph = " ".join(text.strip().split("\n\n", 1)[0].split())
    found = _SENTENCE_END.search(paragraph)
    return paragraph[: found.start() + 1] if found else paragraph


def _print_table(names: list[str], descriptions: list[str], *, long: bool, out: TextIO) -> None:
    """A name and a description a line, the descriptions cut to the terminal's width (when printing to one, or
    ``COLUMNS`` is set: output read by a program is not cut); with ``long``, each whole description, its lines
    indented under the first."""
    # a server's names and words, shown as text: no terminal command in them reaches the terminal
    names, descriptions = [terminal_text(name) for name in names], [terminal_text(text) for text in descriptions]
    width = max((len(name) for name in names), default=0)
    cut = "COLUMNS" in os.environ or out.isatty()
    room = max(shutil.get_terminal_size().columns - width - 2, _MIN_ROOM) if cut else sys.maxsize
    for name, text in zip(names, descriptions, strict=True):
        if long:
            lines = text.strip().splitlines() or [""]
            print(f"{name:<{width}}  {lines[0]}".rstrip(), file=out)
            for line in lines[1:]:
                print(f"{'':<{width}}  {line}".rstrip(), file=out)
            continue
        shown = first_sentence(text)
        if len(shown) > room:
            shown = shown[: room - 1].rstrip() + "…"
        print(f"{name:<{width}}  {shown}".rstrip(), file=out)


def _print_json(value: Any, out: TextIO) -> None:
    print(json_text(value), file=out)
