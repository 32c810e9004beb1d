"""``kavalai runs show|list|cancel|resolve``: where durable runs are, without Python, on DBOS (``--db URL``) or
Temporal (``--engine temporal --address HOST:PORT``).

``show RUN_ID`` prints the run as JSON (its state, the engine's own status, what it runs, when it began and last
changed, and a finished run's outcome); ``list`` prints a line per run, newest first (``--json`` for JSON);
``cancel RUN_ID`` cancels it (it stops at its next step, wherever it runs, and is not resumed); ``resolve RUN_ID STEP
--done [--result JSON] | --retry`` settles a step in doubt that the run asks about (its tool's ``on_doubt="ask"``):
it happened (with that result), or send it again.

Exit status: 0 done, 1 no run has that id (or the Temporal server cannot be reached, or has no such
``--namespace``: one line naming it), 2 a usage error (no ``--db`` for DBOS, a run id that breaks the rule,
the engine's extra missing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from kavalai.cli._boundary import count_option, json_argument, json_text, terminal_text
from kavalai.cli._engines import add_engine_options, engine_of, lookup_failed, temporal_runner
from kavalai.errors import DurableRunError

__all__ = ["add_runs_parser", "runs_command"]


def add_runs_parser(subparsers: Any) -> None:
    """Add the ``runs`` command to the ``kavalai`` command's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "runs",
        help="show, list, cancel durable runs (DBOS or Temporal), or resolve a step in doubt",
        description="Show, list or cancel durable runs, or resolve a step in doubt (the dbos or temporal extra; see "
        "docs/durable.md).",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, text in (
        ("show", "a run, as JSON"),
        ("list", "the newest runs"),
        ("cancel", "cancel a run"),
        ("resolve", "settle a step in doubt: it happened (--done) or send it again (--retry)"),
    ):
        action = actions.add_parser(name, help=text)
        if name != "list":
            action.add_argument("run_id", metavar="RUN_ID", help="the run's id")
        if name == "resolve":
            _add_resolve_arguments(action)
        else:
            action.add_argument(
                "--limit", type=count_option("runs"), default=20, metavar="N", help="how many (default 20)"
            )
            action.add_argument("--json", action="store_true", help="print the runs as JSON")
        action.add_argument("--db", metavar="URL", help="the DBOS journal (sqlite:///... or postgresql://...)")
        action.add_argument(
            "--workflow",
            metavar="FILE",
            help="the journal `kavalai run FILE` keeps by default (FILE.runs.sqlite beside it); without --db or "
            "--workflow, the one *.runs.sqlite journal of this directory",
        )
        add_engine_options(action)


def runs_command(args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Run the ``runs`` command with parsed ``args``; return the exit status."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    temporal = engine_of(args) == "temporal"
    if not temporal and args.db is None:
        args.db = default_journal(args.workflow)
    if not temporal and args.db is None:
        print(
            "kavalai runs: give the DBOS journal (--db URL or --workflow FILE), or --engine temporal --address "
            "HOST:PORT",
            file=err,
        )
        return 2
    try:
        found = asyncio.run(_temporal(args) if temporal else asyncio.to_thread(_dbos, args))
    except ImportError as exc:
        print(f"kavalai runs: {exc}", file=err)
        return 2
    except LookupError as exc:  # UnknownRunError
        print(f"kavalai runs: {lookup_failed(exc)}", file=err)
        return 1
    except DurableRunError as exc:  # resolve: answered already, or the run is cancelled
        print(f"kavalai runs: {exc}", file=err)
        return 1
    except ValueError as exc:  # a run id that breaks the rule
        print(f"kavalai runs: {exc}", file=err)
        return 2
    if args.action == "cancel":
        print(f"kavalai runs: cancelled {args.run_id}", file=err)
    elif args.action == "resolve":
        print(f"kavalai runs: resolved step {args.step} of {args.run_id} ({found})", file=err)
    elif args.action == "show":
        print(json_text(found.to_dict(), default=str), file=out)
    elif args.json:
        print(json_text([run.to_dict() for run in found], default=str), file=out)
    else:
        for run in found:
            created = run.created_at.isoformat(timespec="seconds") if run.created_at else "-"
            line = f"{run.run_id}\t{run.state}\t{run.engine_status}\t{created}\t{run.target or '-'}"
            print(terminal_text(line), file=out)  # a run id and a target are anyone's words
    return 0


def default_journal(workflow: str | None) -> str | None:
    """The journal ``kavalai run`` keeps for ``workflow`` by default; without one, the only ``*.runs.sqlite`` (or
    ``kavalai-runs.sqlite``) of the current directory, or ``None`` when there is none or more than one."""
    from kavalai.durable.dbos import default_journal_url

    if workflow is not None:
        return default_journal_url(workflow)
    here = sorted(Path.cwd().glob("*.runs.sqlite")) + sorted(Path.cwd().glob("kavalai-runs.sqlite"))
    return f"sqlite:///{here[0].resolve()}" if len(here) == 1 else None


def _dbos(args: argparse.Namespace) -> Any:
    from kavalai.durable.dbos import DbosClient

    client = DbosClient(args.db, queue=args.queue)
    try:
        if args.action == "show":
            return client.describe(args.run_id)
        if args.action == "cancel":
            return client.cancel(args.run_id)
        if args.action == "resolve":
            return _resolve(client, args)
        return client.list_runs(limit=args.limit)
    finally:
        client.close()


def _add_resolve_arguments(action: argparse.ArgumentParser) -> None:
    action.add_argument("step", type=int, metavar="STEP", help="the step's position (kavalai runs show: in_doubt)")
    how = action.add_mutually_exclusive_group(required=True)
    how.add_argument("--done", action="store_true", help="it happened: the run records it done and goes on")
    how.add_argument("--retry", action="store_true", help="it did not happen: the run sends it again")
    action.add_argument(
        "--result", metavar="JSON", help="with --done: the step's result, as the tool would have returned it"
    )


def _resolution(args: argparse.Namespace) -> dict[str, Any]:
    """``resolve``'s keyword arguments from the command line: ``done`` and, with ``--done``, ``result``."""
    if args.retry:
        if args.result is not None:  # a retry sends the step again: a result given with it would be dropped
            raise ValueError("--result goes with --done (the step happened, with that result), not --retry")
        return {"done": False}
    try:
        return {"done": True, "result": None if args.result is None else json_argument(args.result, what="--result")}
    except json.JSONDecodeError as exc:
        raise ValueError(f"--result is not JSON: {exc}") from None


def _resolve(client: Any, args: argparse.Namespace) -> str:
    """Answer the run's question about step ``args.step``; the resolution in a word."""
    how = _resolution(args)
    client.resolve(args.run_id, args.step, **how)
    return "done" if how["done"] else "retry"


async def _temporal(args: argparse.Namespace) -> Any:
    runner = temporal_runner(args, worker=False)
    try:
        if args.action == "show":
            return await runner.describe(args.run_id)
        if args.action == "cancel":
            return await runner.cancel(args.run_id)
        if args.action == "resolve":
            how = _resolution(args)
            await runner.resolve(args.run_id, args.step, **how)
            return "done" if how["done"] else "retry"
        return await runner.list_runs(limit=args.limit)
    finally:
        await runner.aclose()
