"""Entry point of the ``kavalai`` command."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from kavalai.secrets import redacting_stderr

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``kavalai`` command: ``demo``, ``run``, ``tools``, ``serve``, ``worker``,
    ``runs`` and ``answer``."""
    parser = argparse.ArgumentParser(prog="kavalai", description="Typed tools for LLM agents and workflows.")
    parser.add_argument("--version", action="version", version=f"kavalai {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo = commands.add_parser("demo", help="show the FunctionKernel at work (offline, no API key needed)")
    demo.add_argument(
        "--model",
        default=None,
        help="run the demo agent on a real model, e.g. openai/gpt-4.1-mini (needs its API key)",
    )
    from kavalai.cli._answer import add_answer_parser
    from kavalai.cli._run import add_run_parser
    from kavalai.cli._runs import add_runs_parser
    from kavalai.cli._serve import add_serve_parser
    from kavalai.cli._tools_cmd import add_tools_parser
    from kavalai.cli._worker import add_worker_parser

    add_run_parser(commands)
    add_tools_parser(commands)
    add_serve_parser(commands)
    add_worker_parser(commands)
    add_runs_parser(commands)
    add_answer_parser(commands)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kavalai")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree that was never installed
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``kavalai`` command and return its exit status; every failure ends inside the error boundary
    (:mod:`kavalai.cli._boundary`) with one line on stderr, and every line written to stderr passes the secret
    gate and shows no terminal command (an escape sequence in a server's message is written as ``\\x1b``)."""
    from kavalai.cli._boundary import terminal_text

    with redacting_stderr(also=terminal_text):
        return _command(argv)


def _command(argv: Sequence[str] | None) -> int:
    from kavalai.cli._boundary import check_options, guarded

    args = build_parser().parse_args(argv)

    def run() -> int:
        check_options(args)
        return _dispatch(args)

    return guarded(args.command, run)


def _dispatch(args: argparse.Namespace) -> int:
    """Run the parsed command (inside the boundary)."""
    if args.command == "demo":
        from kavalai.cli._demo import run_demo

        return asyncio.run(run_demo(model=args.model))
    if args.command == "run":
        from kavalai.cli._run import run_command

        return run_command(args)
    if args.command == "serve":
        from kavalai.cli._serve import serve_command

        return serve_command(args)
    if args.command == "worker":
        from kavalai.cli._worker import worker_command

        return worker_command(args)
    if args.command == "runs":
        from kavalai.cli._runs import runs_command

        return runs_command(args)
    if args.command == "answer":
        from kavalai.cli._answer import answer_command

        return answer_command(args)
    if args.command == "tools":
        from kavalai.cli._tools_cmd import tools_command

        return tools_command(args)
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
