"""``kavalai run workflow.yaml --input '{...}'``: run a workflow file, output JSON on stdout, progress on stderr.

Exit status: 0 when the run succeeded, 1 when it failed (or a server could not be connected), 2 when the
command line, the input or the workflow file is invalid (a misspelt tool URI is found when the engine connects),
130 when interrupted (the engine's servers are closed first).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

from kavalai.cli._boundary import json_argument, json_text, seconds_option, terminal_text
from kavalai.cli._engines import add_engine_options, engine_of, temporal_runner, where

__all__ = ["add_run_parser", "run_command"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def add_run_parser(subparsers: Any) -> None:
    """Add the ``run`` command to the ``kavalai`` command's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        help="run a workflow YAML file",
        description="Run a workflow: the output is printed as JSON on stdout, each node's progress on stderr.",
    )
    parser.add_argument("workflow", help="the workflow YAML file")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--input", metavar="JSON", help='the workflow input as JSON, e.g. \'{"folder": "docs"}\'')
    source.add_argument("--input-file", metavar="PATH", help="a JSON or YAML file holding the workflow input")
    parser.add_argument("--timeout", type=seconds_option, default=None, metavar="SECONDS", help="the run timeout")
    parser.add_argument("--max-visits", type=_positive(int), default=None, metavar="N", help="the node-visit limit")
    parser.add_argument(
        "--trace", action="store_true", help="print the whole result (status, output, trace) instead of the output"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="do not report progress on stderr")
    from kavalai.cli._tracing import add_tracing_arguments

    add_tracing_arguments(parser, short=False)
    durable = parser.add_argument_group("durable runs (the dbos or temporal extra; see docs/durable.md)")
    durable.add_argument(
        "--durable",
        action="store_true",
        help="journal every step, so the run can be resumed after a crash (in WORKFLOW.runs.sqlite unless --db)",
    )
    durable.add_argument(
        "--db", metavar="URL", help="the journal: sqlite:///PATH or postgresql://... (implies --durable)"
    )
    durable.add_argument(
        "--run-id",
        metavar="ID",
        help="name the run (implies --durable); the same id again resumes it after a crash, or prints its result",
    )
    durable.add_argument(
        "--submit",
        action="store_true",
        help="only put the run on the queue for `kavalai worker` processes and print its id (implies --durable)",
    )
    durable.add_argument(
        "--versioned",
        action="store_true",
        help="this process's DBOS application version or Temporal worker version is the workflow's fingerprint, so a "
        "run begun under another definition is left to workers of that one (see docs/durable.md)",
    )
    add_engine_options(durable)


def run_command(args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Run the ``run`` command with parsed ``args``; return the exit status."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    try:
        run_input = _read_input(args)
    except ValueError as exc:
        print(f"kavalai run: {exc}", file=err)
        return EXIT_USAGE
    tracing: list[Any] = []  # what _run set up, stopped (its spans sent) however the run ends
    try:
        return asyncio.run(_interruptible(_run(args, run_input, out, err, tracing), err))
    except KeyboardInterrupt:  # the engine was closed on the way out (async with)
        print("kavalai run: interrupted", file=err)
        return EXIT_INTERRUPTED
    finally:
        from kavalai.cli._tracing import stop_tracing

        for setup in tracing:
            stop_tracing(setup)


def _exit_now() -> None:
    """Exit at once (a second Ctrl-C): no clean-up and no traceback, but no MCP server process left running."""
    import os

    if "kavalai.adapters.mcp._stdio" in sys.modules:  # only when servers may have been started
        from kavalai.adapters.mcp import kill_stdio_servers_now

        kill_stdio_servers_now()
    os._exit(EXIT_INTERRUPTED)


async def _interruptible(work: Any, err: TextIO, *, command: str = "kavalai run", what: str = "the workflow's") -> int:
    """Run ``work``; the first Ctrl-C cancels it (the engine then closes its servers, which is said), a second one
    exits at once, without a traceback. Where signals cannot be handled (not the main thread, Windows), Python's
    own KeyboardInterrupt applies."""
    import signal

    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    presses = 0

    def on_sigint() -> None:
        nonlocal presses
        presses += 1
        if presses == 1:
            print(f"{command}: interrupted; closing {what} servers (Ctrl-C again to exit now)", file=err)
            err.flush()
            task.cancel()
        else:
            print(f"{command}: exiting now", file=err)
            err.flush()
            _exit_now()

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (NotImplementedError, RuntimeError, ValueError):  # pragma: no cover - no loop signal handling here
        return await task  # type: ignore[no-any-return]
    try:
        return await task  # type: ignore[no-any-return]
    except asyncio.CancelledError:
        if presses:
            print(f"{command}: interrupted", file=err)
            return EXIT_INTERRUPTED
        raise
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        if presses:  # until the process ends, another Ctrl-C still means "exit now", never a traceback
            signal.signal(signal.SIGINT, lambda *_: _exit_now())


def _positive(kind: type[int] | type[float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, not {text}")
        return value

    return parse


def _read_input(args: argparse.Namespace) -> Any:
    if args.input is not None:
        try:
            return json_argument(args.input, what="--input")
        except json.JSONDecodeError as exc:
            raise ValueError(f"--input is not valid JSON: {exc.msg} at position {exc.pos}") from None
    if args.input_file is not None:
        path = Path(args.input_file)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read --input-file {str(path)!r}: {exc.strerror}") from None
        from kavalai.documents import load_json_or_yaml
        from kavalai.errors import ConfigurationError

        try:  # bounded like every document from elsewhere (size, alias expansion)
            return load_json_or_yaml(text, source=f"--input-file {str(path)!r}")
        except ConfigurationError as exc:
            raise ValueError(str(exc)) from None
    return {}


async def _run(args: argparse.Namespace, run_input: Any, out: TextIO, err: TextIO, tracing: list[Any]) -> int:
    from kavalai.cli._ask import answer_on_terminal
    from kavalai.cli._tracing import file_tracing, start_tracing
    from kavalai.errors import ConfigurationError, FunctionKernelException
    from kavalai.workflow import InputRequested, RunFinished, WorkflowDefinitionError, WorkflowEngine
    from kavalai.workflow.errors import NodeValidationError

    temporal = engine_of(args) == "temporal"
    durable = args.durable or args.db is not None or args.run_id is not None or args.submit or temporal
    durable = durable or args.versioned
    if temporal and args.db is not None:
        print("kavalai run: --db is DBOS's journal; a Temporal run lives on its server (--address)", file=err)
        return EXIT_USAGE
    try:
        runner = _durable_runner(args, err) if durable else None
    except ImportError as exc:
        print(f"kavalai run: {exc}", file=err)
        return EXIT_USAGE
    try:
        engine = WorkflowEngine.from_yaml(args.workflow, max_visits=args.max_visits, durable=runner)
    except WorkflowDefinitionError as exc:
        print(f"kavalai run: invalid workflow {args.workflow}: {exc}", file=err)
        return EXIT_USAGE
    try:
        switch, configured = args.tracing, file_tracing(args.workflow)
        tracing.append(
            start_tracing(engine.kernel, switch, configured, command="kavalai run", err=err, quiet=args.quiet)
        )
    except ConfigurationError as exc:
        print(f"kavalai run: {exc}", file=err)
        return EXIT_USAGE
    options: dict[str, Any] = {} if args.timeout is None else {"timeout": args.timeout}
    progress = _Progress(err, quiet=args.quiet)
    if args.submit:
        try:
            return await _submit(args, engine, run_input, out)
        except ValueError as exc:  # a run id that breaks the rule
            print(f"kavalai run: {exc}", file=err)
            return EXIT_USAGE
    try:
        async with _connected(engine, progress):
            result = None
            if runner is not None:
                from kavalai.durable import new_run_id

                run_id = args.run_id or new_run_id()
                progress.line(f"run {engine.workflow.name} ({run_id}), journaled in {where(runner)}")
                engine.on_elicitation = _terminal_answerer(err)  # its answers are kept across a crash
                try:
                    result = await engine.run(run_input, run_id=run_id, **options)
                except ValueError as exc:  # a run id that breaks the rule
                    print(f"kavalai run: {exc}", file=err)
                    return EXIT_USAGE
                finally:
                    await runner.aclose()
                progress.show(RunFinished(run_id=run_id, result=result))
            else:
                async for event in engine.stream(run_input, **options):
                    progress.show(event)
                    if isinstance(event, InputRequested):  # an MCP server asks the user (elicitation: caller)
                        await answer_on_terminal(event, err)
                    if isinstance(event, RunFinished):
                        result = event.result
    except WorkflowDefinitionError as exc:  # found on connect: a tool the kernel lacks, a model it cannot create
        print(f"kavalai run: invalid workflow {args.workflow}: {exc}", file=err)
        return EXIT_USAGE
    except FunctionKernelException as exc:
        print(f"kavalai run: {exc}", file=err)
        return EXIT_FAILED
    assert result is not None  # every stream ends with RunFinished
    if args.trace:
        print(json_text(result.to_dict()), file=out)
    elif result.ok:
        print(json_text(result.output_json()), file=out)
    if not result.ok:
        error = result.error
        if isinstance(error, NodeValidationError) and error.node == engine.workflow.start:
            # The run input does not fit the workflow's input type: the caller's to fix, as a bad command line is.
            print(f"kavalai run: invalid input: {error}", file=err)
            return EXIT_USAGE
        print(f"kavalai run: the run {result.status.value}: {error}", file=err)
        return EXIT_FAILED
    return EXIT_OK


def _terminal_answerer(err: TextIO) -> Any:
    """An MCP server's request for input during a durable run, asked on the terminal (refused without one)."""
    import asyncio

    from kavalai.cli._ask import answer_on_terminal
    from kavalai.workflow import InputRequested

    async def ask(request: Any) -> Any:
        reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await answer_on_terminal(InputRequested(request=request, _reply=reply), err)
        return await reply

    return ask


def _durable_runner(args: argparse.Namespace, err: TextIO) -> Any:
    """The runner of ``--durable``/``--db``/``--run-id``: DBOS with the journal beside the workflow file by
    default, or Temporal (``--engine temporal``) with a worker in this process while the run goes on."""
    if engine_of(args) == "temporal":
        return temporal_runner(args, worker=True)
    from kavalai.durable import DbosRunner
    from kavalai.durable.dbos import default_journal_url

    return DbosRunner(args.db or default_journal_url(args.workflow), queue=args.queue, versioned=args.versioned)


async def _submit(args: argparse.Namespace, engine: Any, run_input: Any, out: TextIO) -> int:
    """``--submit``: enqueue the run for the workers and print its id."""
    import asyncio

    from kavalai.durable import definition_version
    from kavalai.durable.dbos import DbosClient, default_journal_url

    payload = {"input": run_input, "max_visits": args.max_visits}
    if args.timeout is not None:
        payload["timeout"] = args.timeout
    if engine_of(args) == "temporal":
        runner = temporal_runner(args, worker=False)
        try:
            target = engine if args.versioned else engine.durable_name  # versioned: pinned to its definition's
            print(terminal_text(await runner.submit(target, payload, run_id=args.run_id)), file=out)
        finally:
            await runner.aclose()
        return EXIT_OK

    def submit() -> str:
        version = definition_version(engine) if args.versioned else None  # for the versioned workers of it
        client = DbosClient(
            args.db or default_journal_url(args.workflow), queue=args.queue, application_version=version
        )
        try:
            return client.submit(engine.durable_name, payload, run_id=args.run_id)
        finally:
            client.close()

    print(terminal_text(await asyncio.to_thread(submit)), file=out)
    return EXIT_OK


@asynccontextmanager
async def _connected(engine: Any, progress: _Progress) -> AsyncIterator[Any]:
    """``async with engine``, saying what it waits for while MCP servers start: a line per server as it connects
    or fails (servers connect concurrently, so a slow one does not hold up the others' lines)."""
    states = engine.kernel.mcp_server_states()
    if not states or progress.quiet:
        async with engine:
            yield engine
        return
    plural = "s" if len(states) > 1 else ""
    progress.line(f"connecting {len(states)} MCP server{plural}: " + ", ".join(state.name for state in states))
    report = _ServerReport(engine.kernel, progress)
    watcher = asyncio.ensure_future(report.watch())
    try:
        async with engine:
            watcher.cancel()
            report.sweep()  # the servers that connected since the last look
            yield engine
    finally:
        watcher.cancel()


class _ServerReport:
    """Prints each MCP server's line once, as it connects or fails."""

    def __init__(self, kernel: Any, progress: _Progress) -> None:
        self.kernel, self.progress = kernel, progress
        self.shown: set[str] = set()
        self.started = asyncio.get_running_loop().time()

    async def watch(self) -> None:
        while True:
            self.sweep()
            await asyncio.sleep(0.05)

    def sweep(self) -> None:
        for state in self.kernel.mcp_server_states():
            if state.name in self.shown or state.status not in ("connected", "failed"):
                continue
            self.shown.add(state.name)
            took = asyncio.get_running_loop().time() - self.started
            detail = f"{len(state.tools)} tools" if state.status == "connected" else "failed"
            self.progress.line(f"  {state.name}: {detail} ({took:.1f} s)")


class _Progress:
    """Writes one line per node event to stderr."""

    def __init__(self, stream: TextIO, *, quiet: bool) -> None:
        self.stream = stream
        self.quiet = quiet

    def line(self, text: str) -> None:
        """Write one line (unless quiet)."""
        if not self.quiet:
            print(text, file=self.stream, flush=True)

    def show(self, event: Any) -> None:
        from kavalai.workflow import NodeFailed, NodeFinished, NodeStarted, RunFinished, RunStarted

        if self.quiet:
            return
        line = None
        if isinstance(event, RunStarted):
            line = f"run {event.workflow} ({event.run_id[:8]})"
        elif isinstance(event, NodeStarted):
            where = f" [{event.branch}]" if event.branch else ""
            line = f"  -> {event.node} ({event.kind}){where}"
        elif isinstance(event, NodeFinished):
            record = event.trace
            extra = f", {record.attempts} attempts" if record.attempts > 1 else ""
            calls = f", {len(record.tool_calls)} tool calls" if record.tool_calls else ""
            line = f"  ok {record.node} in {record.duration * 1000:.1f} ms{extra}{calls}"
        elif isinstance(event, NodeFailed):
            line = f"  FAILED {event.trace.node}: {event.error}"
        elif isinstance(event, RunFinished):
            line = f"run {event.result.status.value} in {event.result.duration * 1000:.1f} ms"
        if line is not None:
            print(line, file=self.stream, flush=True)
