"""``kavalai answer RUN_ID --db URL [KEY ANSWER]`` (or ``--engine temporal --address HOST:PORT``): list what a
durable run waits for, or answer it.

A durable run that waits for an answer from outside (an agent's ``OutsideApproval``) publishes each question under
a key in its DBOS journal. Without ``KEY`` this prints the run's questions as JSON (``{}`` when it waits for none);
with ``KEY ANSWER`` it sends the answer, which the run takes whether it runs now in some process or is resumed later.
``ANSWER`` is ``allow``, ``deny`` or JSON (``'{"action": "deny", "reason": "over budget"}'``,
``'{"action": "edit", "arguments": {...}}'``).

Of answers to one question sent at once, from anywhere, exactly one is taken; the others are told they lost and
which answer won (exit status 1), as is an answer to a cancelled run.

Exit status: 0 done, 1 the run waits for no such question (answered already, cancelled; or the Temporal server
cannot be reached, or has no such ``--namespace``), 2 a usage error (bad
ANSWER, no journal, the engine's extra missing).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any, TextIO

from kavalai.cli._boundary import json_argument, json_text
from kavalai.cli._engines import add_engine_options, engine_of, lookup_failed, temporal_runner
from kavalai.errors import DurableRunError

__all__ = ["add_answer_parser", "answer_command"]


def add_answer_parser(subparsers: Any) -> None:
    """Add the ``answer`` command to the ``kavalai`` command's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "answer",
        help="list or answer what a durable run waits for (approvals)",
        description="List the questions a durable run waits for, or answer one (the dbos extra; docs/durable.md).",
    )
    parser.add_argument("run_id", metavar="RUN_ID", help="the run's id")
    parser.add_argument("key", metavar="KEY", nargs="?", help="the question to answer (omit to list them)")
    parser.add_argument("answer", metavar="ANSWER", nargs="?", help="allow, deny, or the answer as JSON")
    parser.add_argument("--db", metavar="URL", help="the run's DBOS journal (sqlite:///... or postgresql://...)")
    add_engine_options(parser)


def answer_command(args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Run the ``answer`` command with parsed ``args``; return the exit status."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    if args.key is not None and args.answer is None:
        print("kavalai answer: give the ANSWER after the KEY (allow, deny or JSON)", file=err)
        return 2
    temporal = engine_of(args) == "temporal"
    if not temporal and args.db is None:
        print("kavalai answer: give the DBOS journal (--db URL), or --engine temporal --address HOST:PORT", file=err)
        return 2
    value: Any = None
    if args.answer is not None:
        value = args.answer if args.answer in ("allow", "deny") else _json(args.answer)
        if value is _INVALID:
            print(f"kavalai answer: ANSWER is allow, deny or JSON, not {args.answer!r}", file=err)
            return 2
    try:
        found = asyncio.run(_temporal(args, value) if temporal else asyncio.to_thread(_dbos, args, value))
    except ImportError as exc:
        print(f"kavalai answer: {exc}", file=err)
        return 2
    except LookupError as exc:  # no such run, or no such question
        print(f"kavalai answer: {lookup_failed(exc)}", file=err)
        return 1
    except DurableRunError as exc:  # answered already; cancelled
        print(f"kavalai answer: {exc}", file=err)
        return 1
    except ValueError as exc:
        print(f"kavalai answer: {exc}", file=err)
        return 2
    if args.key is None:
        print(json_text(found), file=out)
        return 0
    print(f"kavalai answer: {args.key} of run {args.run_id} answered (this answer was taken)", file=err)
    return 0


def _dbos(args: argparse.Namespace, value: Any) -> Any:
    from kavalai.durable.dbos import DbosClient

    client = DbosClient(args.db)
    try:
        if args.key is None:
            return client.pending(args.run_id)
        return client.answer(args.run_id, args.key, value)
    finally:
        client.close()


async def _temporal(args: argparse.Namespace, value: Any) -> Any:
    runner = temporal_runner(args, worker=False)
    try:
        if args.key is None:
            return await runner.pending(args.run_id)
        return await runner.answer(args.run_id, args.key, value)
    finally:
        await runner.aclose()


_INVALID = object()


def _json(text: str) -> Any:
    try:
        return json_argument(text, what="the answer")
    except ValueError:
        return _INVALID
