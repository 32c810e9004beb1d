"""The options that choose a durable engine, shared by ``kavalai run``, ``worker`` and ``runs``: ``--engine dbos``
(the default; ``--db URL``) or ``--engine temporal`` (``--address HOST:PORT``, ``--namespace``), and ``--queue``
(DBOS's queue, or Temporal's task queue)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_engine_options", "engine_of", "lookup_failed", "temporal_runner", "where"]

DEFAULT_ADDRESS = "127.0.0.1:7233"


def add_engine_options(group: Any, *, queue: bool = True) -> None:
    """Add ``--engine``, ``--address``, ``--namespace`` (and ``--queue``) to a parser or argument group."""
    group.add_argument(
        "--engine",
        choices=["dbos", "temporal"],
        default=None,
        help="the durable engine: dbos (the default; --db) or temporal (--address)",
    )
    group.add_argument(
        "--address",
        metavar="HOST:PORT",
        help=f"the Temporal server (implies --engine temporal; default {DEFAULT_ADDRESS})",
    )
    group.add_argument("--namespace", default="default", help="the Temporal namespace (default: default)")
    if queue:
        group.add_argument(
            "--queue", default="kavalai", help="the DBOS queue or Temporal task queue (default: kavalai)"
        )


def engine_of(args: argparse.Namespace) -> str:
    """The engine the options name: ``temporal`` when ``--engine temporal`` or ``--address`` is given."""
    if args.engine is not None:
        return str(args.engine)
    return "temporal" if args.address is not None else "dbos"


def temporal_runner(args: argparse.Namespace, *, worker: bool) -> Any:
    """The :class:`~kavalai.durable.TemporalRunner` the options name."""
    from kavalai.durable import TemporalRunner

    return TemporalRunner(
        args.address or DEFAULT_ADDRESS,
        namespace=args.namespace,
        task_queue=getattr(args, "queue", "kavalai"),
        worker=worker,
        versioned=getattr(args, "versioned", False),
    )


def where(runner: Any) -> str:
    """Where a runner keeps its runs, for messages: the journal's URL, or the Temporal server and task queue."""
    journal = getattr(runner, "journal", None)
    if journal is not None:
        return str(journal)
    return f"temporal {runner.address} (namespace {runner.namespace!r}, task queue {runner.task_queue!r})"


def lookup_failed(exc: LookupError) -> str:
    """What a command says when a run is not found: in the command line's words, not the Python call's."""
    from kavalai.durable import UnknownRunError

    if not isinstance(exc, UnknownRunError):
        return str(exc)
    return (
        f"no run {exc.run_id!r} on the {exc.engine} runner; start one with "
        f"`kavalai run WORKFLOW --run-id {exc.run_id}`, or see the runs there are with `kavalai runs list`"
    )
