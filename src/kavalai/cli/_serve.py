"""``kavalai serve tools.yaml``: the kernel a configuration file describes, served as one MCP server.

Over stdio by default (what an MCP host such as Claude Desktop starts), or as a streamable HTTP endpoint with
``--transport http``. Messages go to stderr; stdout is the protocol stream in stdio mode. Over HTTP, ``--stateless``
drops sessions and ``--workers N`` serves the port from N processes (``kavalai.cli._serve_workers``).

Exit status: 0 when serving ended (the client closed stdin, or SIGINT / SIGTERM), 1 when a server of the kernel
could not be connected or the address could not be listened on, 2 when the command line or the configuration file
is invalid.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from kavalai._listen import KEEP_ALIVE, LIMIT_CONNECTIONS
from kavalai.cli._boundary import seconds_option
from kavalai.cli._run import EXIT_FAILED, EXIT_OK, EXIT_USAGE  # one set of exit codes for every command
from kavalai.cli._serve_filter import needed_servers_only
from kavalai.cli._serve_workers import add_worker_arguments, run_workers, worker_options, workers_usage_error
from kavalai.cli._tracing import add_tracing_arguments, flush_on_close, start_tracing, stop_tracing
from kavalai.secrets import log_lines_to

if TYPE_CHECKING:
    from kavalai._tracing_setup import TracingSetup
    from kavalai.kernel import Kernel

__all__ = ["add_serve_parser", "build_serve_parser", "main", "serve_command"]


def add_serve_parser(subparsers: Any) -> None:
    """Add the ``serve`` command to the ``kavalai`` command's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="serve the tools of a configuration file as one MCP server",
        description="Serve the kernel a configuration file describes (python://, rest:// and mcp:// tools) as one "
        "MCP server, over stdio (for MCP hosts such as Claude Desktop) or streamable HTTP.",
    )
    _add_arguments(parser)


def build_serve_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m kavalai.cli._serve``: the ``serve`` command on its own."""
    parser = argparse.ArgumentParser(prog="kavalai serve", description="Serve a kernel as one MCP server.")
    _add_arguments(parser)
    return parser


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", metavar="CONFIG", help="the YAML or JSON configuration file (tools, servers)")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="default: stdio")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP: the address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=8000, help="HTTP: the port, 0 for a free one (default: 8000)")
    parser.add_argument("--path", default="/mcp", help="HTTP: the endpoint's path (default: /mcp)")
    parser.add_argument(
        "--bearer-token-env",
        metavar="VAR",
        default=None,
        help="HTTP: require 'Authorization: Bearer <token>', the token read from the environment variable VAR",
    )
    parser.add_argument(
        "--allow",
        action="append",
        metavar="GLOB",
        default=None,
        help="offer only tools whose URI matches (repeat); servers none of whose tools can match are not started",
    )
    parser.add_argument(
        "--deny", action="append", metavar="GLOB", default=[], help="never offer tools whose URI matches (repeat)"
    )
    parser.add_argument(
        "--lazy",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="start the configured servers at the first request that needs their tools, not at start (the default "
        "with --allow or --deny)",
    )
    parser.add_argument("--name", default="kavalai", help="the server name shown to clients (default: kavalai)")
    parser.add_argument(
        "--names",
        choices=("prefixed", "own"),
        default="prefixed",
        help="serve tools and prompts under prefixed names (python_fs_ls, mcp_github_search: the default) or their "
        "own (fs.ls, search), refused when two would share one",
    )
    parser.add_argument(
        "--tasks",
        action="append",
        metavar="GLOB",
        default=[],
        help="run calls of tools whose URI matches as tasks for 2026-07-28 hosts that declare the tasks extension "
        "(repeat); the host follows them with tasks/get, answers them with tasks/update, cancels them",
    )
    parser.add_argument(
        "--tasks-required",
        action="append",
        metavar="GLOB",
        default=[],
        help="run calls of tools whose URI matches only as tasks (repeat): a host without the tasks extension is "
        "refused (-32021)",
    )
    parser.add_argument(
        "--stateless",
        action="store_true",
        help="HTTP: every request stands alone (no session id), so replicas can sit behind any load balancer; "
        "server-to-client requests (sampling, elicitation) are refused",
    )
    parser.add_argument(
        "--json-response",
        action="store_true",
        help="HTTP with --stateless: answer each request with one JSON body, not an event stream (no progress or "
        "log messages during a call)",
    )
    parser.add_argument(
        "--keep-alive",
        type=int,
        default=KEEP_ALIVE,
        metavar="SECONDS",
        help=f"HTTP: keep an idle connection open SECONDS (default: {KEEP_ALIVE}, longer than clients' own idle time, "
        "so that the client closes it first); raise it above a load balancer's idle timeout if that is longer",
    )
    parser.add_argument(
        "--session-idle-timeout",
        type=seconds_option,
        default=None,
        metavar="SECONDS",
        help="HTTP: end a session that has had no request in flight for SECONDS, as if its host had deleted it "
        "(its subscriptions are taken back at the servers; default: the MCP SDK's, 30 minutes; more than a year, "
        "inf too, is a year)",
    )
    parser.add_argument(
        "--limit-connections",
        type=int,
        default=LIMIT_CONNECTIONS,
        metavar="N",
        help=f"HTTP: serve at most N connections at once (default: {LIMIT_CONNECTIONS}; with --workers, each worker); "
        "a request on one more, or past N requests in flight, is answered 503",
    )
    parser.add_argument(
        "--loop",
        choices=LOOPS,
        default="asyncio",
        help="the event loop: asyncio's own (default) or uvloop's (pip install 'kavalai[fast]'), which takes "
        "fewer instructions a call over HTTP",
    )
    add_worker_arguments(parser)
    add_tracing_arguments(parser, short=True)


def serve_command(args: argparse.Namespace, *, stderr: TextIO | None = None) -> int:
    """Run the ``serve`` command with parsed ``args``; return the exit status."""
    from kavalai.config import KernelConfig, build_kernel
    from kavalai.errors import ConfigurationError

    err = stderr if stderr is not None else sys.stderr
    for option, given in (("--bearer-token-env", args.bearer_token_env is not None), ("--stateless", args.stateless)):
        if given and args.transport != "http":
            print(f"kavalai serve: {option} needs --transport http", file=err)
            return EXIT_USAGE
    if args.json_response and not args.stateless:
        print("kavalai serve: --json-response needs --stateless", file=err)
        return EXIT_USAGE
    if args.session_idle_timeout is not None and (args.stateless or args.transport != "http"):
        print("kavalai serve: --session-idle-timeout needs --transport http without --stateless", file=err)
        return EXIT_USAGE
    if args.keep_alive < 1:  # before any worker starts (each would stop on it, with a traceback)
        print(f"kavalai serve: --keep-alive {args.keep_alive}: give 1 second or more", file=err)
        return EXIT_USAGE
    if args.limit_connections < 1:
        print(f"kavalai serve: --limit-connections {args.limit_connections}: give 1 or more", file=err)
        return EXIT_USAGE
    if (why := workers_usage_error(args)) is not None:
        print(f"kavalai serve: {why}", file=err)
        return EXIT_USAGE
    try:
        loop_factory = event_loop_factory(args.loop)
    except ImportError as exc:
        print(f"kavalai serve: --loop {args.loop}: {exc}", file=err)
        return EXIT_USAGE
    try:
        token = _bearer_token(args.bearer_token_env)
        config = KernelConfig.from_file(args.config)
        if args.allow is not None or args.deny:
            config, left_out = needed_servers_only(config, args.allow, args.deny)
            if left_out:
                servers = ", ".join(prefix.rstrip(".") for prefix in left_out)
                print(f"kavalai serve: not starting {servers}: --allow/--deny admit none of its tools", file=err)
        if args.workers > 1:  # each worker builds its own kernel
            return _run(run_workers(args, err), loop_factory)
        kernel = build_kernel(config)
        tracing = start_tracing(kernel, args.tracing, config.tracing, command="kavalai serve", err=err)
    except (ConfigurationError, ValueError) as exc:
        print(f"kavalai serve: {exc}", file=err)
        return EXIT_USAGE
    try:
        with log_lines_to(err):  # the kavalai loggers' warnings (an ignored _meta value) as lines on stderr
            return _run(_until_signal(_serve(kernel, args, token, err, tracing), kernel, err), loop_factory)
    finally:
        if args.transport != "http":
            _stdout_to_stderr()
        stop_tracing(tracing)


#: The event loops ``--loop`` offers.
LOOPS = ("asyncio", "uvloop")


def event_loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory of the event loop ``--loop name`` runs the server on (``None``: asyncio's own).

    Raises:
        ImportError: ``uvloop`` is asked for and not installed (saying how to install it).
    """
    if name != "uvloop":
        return None
    try:
        import uvloop
    except ImportError:
        raise ImportError("uvloop is not installed (pip install 'kavalai[fast]')") from None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def _run(main: Coroutine[Any, Any, int], loop_factory: Callable[[], asyncio.AbstractEventLoop] | None) -> int:
    """``asyncio.run(main)``, on a loop of ``loop_factory`` when given."""
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(main)


def _stdout_to_stderr() -> None:
    """Once stdio serving ends, point file descriptor 1 at stderr for the rest of the process: what is written
    after (a tracer provider's last batch flushed at exit, as ``opentelemetry-instrument``'s console exporter does)
    must not reach the client as bytes that are not the protocol."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    with contextlib.suppress(OSError):
        os.dup2(2, 1)  # serving stdio owns the process's stdio, as the MCP SDK's stdio_server does


async def _serve(
    kernel: Kernel, args: argparse.Namespace, token: str | None, err: TextIO, tracing: TracingSetup | None
) -> int:
    from kavalai.errors import FunctionKernelException
    from kavalai.serve import serve_http, serve_stdio

    flush_on_close(kernel, tracing)  # added after _until_signal's callback, so it runs before that one (newest first)

    def ready(where: str) -> None:
        _report_ready(kernel, args, where, err)

    options: dict[str, Any] = {
        "allow": args.allow,
        "deny": args.deny,
        "name": args.name,
        "on_ready": ready,
        "lazy": _lazy(args),
        "names": args.names,
        "tasks": args.tasks,
        "tasks_required": args.tasks_required,
    }
    try:
        if args.transport == "http":
            options.update(stateless=args.stateless, json_response=args.json_response, keep_alive=args.keep_alive)
            options.update(limit_connections=args.limit_connections)
            if args.session_idle_timeout is not None:
                options.update(session_idle_timeout=args.session_idle_timeout)
            options.update(worker_options(args))
            await serve_http(kernel, host=args.host, port=args.port, path=args.path, bearer_token=token, **options)
        else:
            await serve_stdio(kernel, **options)
    except (FunctionKernelException, OSError) as exc:
        print(f"kavalai serve: {exc}", file=err)
        return EXIT_FAILED
    except BaseExceptionGroup as group:  # raised within the stdio server's task group (e.g. by ready())
        failures = group.subgroup(lambda exc: isinstance(exc, FunctionKernelException | OSError))
        if failures is None:
            raise
        print(f"kavalai serve: {_first_leaf(failures)}", file=err)
        return EXIT_FAILED
    return EXIT_OK


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception of ``group`` that is not itself a group."""
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


def _lazy(args: argparse.Namespace) -> bool:
    """Whether servers start at the first request: ``--lazy``, or by default when ``--allow``/``--deny`` narrow
    what is served (the servers left are started only once a client asks for their tools)."""
    if args.lazy is not None:
        return bool(args.lazy)
    return args.allow is not None or bool(args.deny)


def _report_ready(kernel: Kernel, args: argparse.Namespace, where: str, err: TextIO) -> None:
    """Say on stderr how many tools are offered, and where; warn about an ``--allow`` glob that matches none."""
    import fnmatch

    from kavalai.serve import ExposedTools

    place = f"at {where}" if "://" in where else f"over {where}"
    if _lazy(args):
        print(
            f"kavalai serve: serving the tools of {args.config} {place} (its servers start at the first request)",
            file=err,
            flush=True,
        )
        return

    uris = kernel.list_tools()
    for pattern in args.allow or ():
        if not any(fnmatch.fnmatchcase(uri, pattern) for uri in uris):
            print(f"kavalai serve: warning: --allow {pattern!r} matches no tool", file=err)
    exposed = ExposedTools(kernel, allow=args.allow, deny=args.deny, names=args.names)
    count = len(exposed.names())  # with --names own, two tools sharing a name end the serving here
    print(f"kavalai serve: serving {count} of {len(uris)} tools of {args.config} {place}", file=err, flush=True)


async def _until_signal(work: Coroutine[Any, Any, int], kernel: Kernel, err: TextIO) -> int:
    """Run ``work``; SIGINT or SIGTERM cancel it (the server stops and the kernel closes) and the exit is 0.

    Over stdio the SDK reads stdin in a thread that nothing can interrupt, so a signal that comes while the client
    keeps stdin open would leave the process waiting for its next line: once the kernel is closed, the process
    exits at once (``os._exit``) if it has not ended by itself.
    """
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    stopped: list[int] = []
    closed: list[bool] = []

    async def on_close() -> None:
        closed.append(True)

    kernel.on_close(on_close)

    def exit_when_closed() -> None:
        if task.done():
            return
        if not closed:
            loop.call_later(_EXIT_POLL, exit_when_closed)
            return
        print(f"kavalai serve: stopped ({signal.Signals(stopped[0]).name})", file=err, flush=True)
        os._exit(EXIT_OK)

    def stop(signum: int) -> None:
        if not stopped:
            loop.call_later(_EXIT_POLL, exit_when_closed)
        stopped.append(signum)
        task.cancel()

    installed = _install_signal_handlers(loop, stop)
    try:
        return await task
    except asyncio.CancelledError:
        if not stopped:
            raise
        print(f"kavalai serve: stopped ({signal.Signals(stopped[0]).name})", file=err, flush=True)
        return EXIT_OK
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


#: Seconds between checks, after a signal, whether the kernel is closed but the process still waits on stdin.
_EXIT_POLL = 0.5


def _install_signal_handlers(loop: asyncio.AbstractEventLoop, stop: Callable[[int], None]) -> list[int]:
    installed: list[int] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, stop, signum)
            installed.append(signum)
        except (NotImplementedError, RuntimeError, ValueError):  # pragma: no cover - Windows, not the main thread
            pass
    return installed


def _bearer_token(variable: str | None) -> str | None:
    if variable is None:
        return None
    token = os.environ.get(variable, "")
    if not token:
        raise ValueError(f"--bearer-token-env {variable}: the environment variable {variable} is not set or empty")
    return token


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0-65535)")
    return port


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kavalai.cli._serve CONFIG ...``: the ``serve`` command without the ``kavalai`` entry point."""
    return serve_command(build_serve_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
