"""``kavalai worker workflow.yaml --db postgresql://...``: serve the durable runs of a workflow from a DBOS queue;
``--engine temporal --address HOST:PORT``: from a Temporal task queue.

Any number of workers on any number of machines serve the same queue of the same database (or task queue of the
same Temporal server): each takes runs as its ``--concurrency`` allows (DBOS), and the runs of a worker that dies
are taken over by the others (see docs/durable.md). Put runs on the queue with ``kavalai run workflow.yaml ...
--submit``, :class:`kavalai.durable.dbos.DbosClient` or ``TemporalRunner(worker=False).submit``.

Exit status: 2 when the command line or the workflow file is invalid (or the ``dbos`` extra is missing), 1 when a
server could not be connected, 130 when interrupted (runs in flight stay in the journal for another worker).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any, TextIO

from kavalai.cli._engines import add_engine_options, engine_of, temporal_runner, where

__all__ = ["add_worker_parser", "worker_command"]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def add_worker_parser(subparsers: Any) -> None:
    """Add the ``worker`` command to the ``kavalai`` command's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "worker",
        help="serve the durable runs of a workflow from a queue",
        description="Serve the durable runs of a workflow from a DBOS queue or a Temporal task queue (the dbos or "
        "temporal extra; see docs/durable.md).",
    )
    parser.add_argument("workflow", help="the workflow YAML file")
    parser.add_argument(
        "--db", metavar="URL", help="the journal: postgresql://... for many workers (default: WORKFLOW.runs.sqlite)"
    )
    add_engine_options(parser)
    parser.add_argument("--concurrency", type=int, default=None, metavar="N", help="the most runs at once here")
    parser.add_argument(
        "--versioned",
        action="store_true",
        help="serve only the runs begun under this workflow's definition (its fingerprint is the DBOS application "
        "version or the Temporal worker version); runs of an older one are left to workers of that one",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="do not report on stderr")
    from kavalai.cli._tracing import add_tracing_arguments

    add_tracing_arguments(parser, short=True)


def worker_command(args: argparse.Namespace, *, stderr: TextIO | None = None) -> int:
    """Run the ``worker`` command with parsed ``args``; return the exit status."""
    err = stderr if stderr is not None else sys.stderr
    if args.concurrency is not None and args.concurrency < 1:
        print("kavalai worker: --concurrency must be at least 1", file=err)
        return EXIT_USAGE
    if engine_of(args) == "temporal" and (args.db is not None or args.concurrency is not None):
        print("kavalai worker: --db and --concurrency are DBOS's; a Temporal worker takes --address", file=err)
        return EXIT_USAGE
    from kavalai.cli._run import _interruptible

    tracing: list[Any] = []  # what _serve set up, stopped (its spans sent) however serving ends
    try:
        return asyncio.run(_interruptible(_serve(args, err, tracing), err, command="kavalai worker"))
    except KeyboardInterrupt:
        print("kavalai worker: interrupted", file=err)
        return EXIT_INTERRUPTED
    finally:
        from kavalai.cli._tracing import stop_tracing

        for setup in tracing:
            stop_tracing(setup)


async def _serve(args: argparse.Namespace, err: TextIO, tracing: list[Any]) -> int:
    from kavalai.cli._tracing import file_tracing, start_tracing
    from kavalai.errors import ConfigurationError, FunctionKernelException
    from kavalai.workflow import WorkflowDefinitionError, WorkflowEngine

    try:
        runner = _runner(args)
    except ImportError as exc:
        print(f"kavalai worker: {exc}", file=err)
        return EXIT_USAGE
    try:
        engine = WorkflowEngine.from_yaml(args.workflow, durable=runner)
    except WorkflowDefinitionError as exc:
        print(f"kavalai worker: invalid workflow {args.workflow}: {exc}", file=err)
        return EXIT_USAGE
    try:
        switch, configured = args.tracing, file_tracing(args.workflow)
        quiet = args.quiet
        tracing.append(start_tracing(engine.kernel, switch, configured, command="kavalai worker", err=err, quiet=quiet))
    except ConfigurationError as exc:
        print(f"kavalai worker: {exc}", file=err)
        return EXIT_USAGE
    runner.register(engine)
    try:
        async with engine:
            await (runner.start_worker() if engine_of(args) == "temporal" else runner.start())
            if not args.quiet:
                print(
                    f"kavalai worker: serving {engine.durable_name} from queue {args.queue!r} of {where(runner)}",
                    file=err,
                    flush=True,
                )
            try:
                await runner.serve()
            finally:
                await runner.aclose()
    except WorkflowDefinitionError as exc:
        print(f"kavalai worker: invalid workflow {args.workflow}: {exc}", file=err)
        return EXIT_USAGE
    except FunctionKernelException as exc:
        print(f"kavalai worker: {exc}", file=err)
        return EXIT_FAILED
    return 0  # pragma: no cover - serve() returns only by cancellation


def _runner(args: argparse.Namespace) -> Any:
    if engine_of(args) == "temporal":
        return temporal_runner(args, worker=True)
    from kavalai.durable import DbosRunner
    from kavalai.durable.dbos import default_journal_url

    return DbosRunner(
        args.db or default_journal_url(args.workflow),
        queue=args.queue,
        concurrency=args.concurrency,
        versioned=args.versioned,
    )
