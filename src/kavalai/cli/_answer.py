"""``kavalai answer RUN_ID --db URL [KEY ANSWER]``: list what a durable run waits for, or answer it.

A durable run that waits for an answer from outside (an agent's ``OutsideApproval``) publishes each question under
a key in its DBOS journal. Without ``KEY`` this prints the run's questions as JSON (``{}`` when it waits for none);
with ``KEY ANSWER`` it sends the answer, which the run takes whether it runs now in some process or is resumed later.
``ANSWER`` is ``allow``, ``deny`` or JSON (``'{"action": "deny", "reason": "over budget"}'``,
``'{"action": "edit", "arguments": {...}}'``).

Exit status: 0 done, 1 the run waits for no such question, 2 a usage error (bad ANSWER, the ``dbos`` extra missing).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from kavalai.cli._engines import lookup_failed

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
    parser.add_argument(
        "--db", metavar="URL", required=True, help="the run's journal (sqlite:///... or postgresql://...)"
    )


def answer_command(args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Run the ``answer`` command with parsed ``args``; return the exit status."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    if args.key is not None and args.answer is None:
        print("kavalai answer: give the ANSWER after the KEY (allow, deny or JSON)", file=err)
        return 2
    try:
        from kavalai.durable.dbos import DbosClient
    except ImportError as exc:
        print(f"kavalai answer: {exc}", file=err)
        return 2
    value: Any = None
    if args.answer is not None:
        value = args.answer if args.answer in ("allow", "deny") else _json(args.answer)
        if value is _INVALID:
            print(f"kavalai answer: ANSWER is allow, deny or JSON, not {args.answer!r}", file=err)
            return 2
    client = DbosClient(args.db)
    try:
        if args.key is None:
            print(json.dumps(client.pending(args.run_id), indent=2, ensure_ascii=False), file=out)
            return 0
        client.answer(args.run_id, args.key, value)
    except LookupError as exc:
        print(f"kavalai answer: {lookup_failed(exc)}", file=err)
        return 1
    except ValueError as exc:
        print(f"kavalai answer: {exc}", file=err)
        return 2
    finally:
        client.close()
    print(f"kavalai answer: sent to {args.key} of run {args.run_id}", file=err)
    return 0


_INVALID = object()


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return _INVALID
