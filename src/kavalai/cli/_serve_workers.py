"""``kavalai serve CONFIG --transport http --stateless --workers N``: N worker processes serving one port.

The parent takes the port (through the one gate, ``kavalai._listen``) and starts N workers, each a ``python -m
kavalai.cli._serve`` with the same options that inherits the parent's socket. On Linux each worker listens on a
socket of its own bound to the port with ``SO_REUSEPORT`` and the kernel spreads new connections over them (the
parent's socket only holds the port); elsewhere the workers share the parent's listening socket and the operating
system hands each new connection to a worker waiting in ``accept``. Every worker builds its own kernel from the
configuration.

The parent owns the workers. It says it is serving once every worker has reported ready (a byte on a pipe of its
own); a worker that exits before that stops them all (exit 1: the configuration cannot be served). A worker that
exits after is replaced by a new one, after a backoff that doubles with each restart in the last
:data:`RESTART_WINDOW` seconds; one exit more than ``--worker-restarts`` allows in that window stops them all (exit
1, the message saying why), so a supervisor above sees a crash loop rather than a server that never serves. SIGINT
or SIGTERM stops them all too (exit 0): SIGTERM, then SIGKILL after a grace period. Each worker also holds the read
end of a *lifeline* pipe whose write end only the parent has: if the parent dies (even by SIGKILL) the pipe ends
and each worker stops as on SIGTERM, so nothing outlives it.

Workers need ``--stateless``: a session lives in one process, and a client's next connection may reach another.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Any, BinaryIO, TextIO

from kavalai._listen import port_for_workers, worker_listening_socket

__all__ = ["WORKER_FDS", "run_workers", "worker_options"]

#: The hidden option that makes a ``kavalai serve`` process a worker: ``LISTEN,LIFELINE,READY`` file descriptors.
WORKER_FDS = "--worker-fds"

_MAX_WORKERS = 256

#: Seconds a worker has to stop after SIGTERM (requests in flight finish) before it is killed.
STOP_GRACE = 10.0

#: The span of time, in seconds, over which ``--worker-restarts`` counts restarts.
RESTART_WINDOW = 300.0

#: Seconds before the first restart in the window; each further one waits twice as long, at most RESTART_MAX_DELAY.
RESTART_DELAY = 0.25
RESTART_MAX_DELAY = 8.0

_DEFAULT_RESTARTS = 5


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--workers`` and the hidden ``--worker-fds``."""
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="HTTP with --stateless: N processes serving the same port, each with its own kernel (default: 1)",
    )
    parser.add_argument(
        "--worker-restarts",
        type=int,
        default=_DEFAULT_RESTARTS,
        metavar="N",
        help=f"with --workers: dead workers replaced at most N times in {RESTART_WINDOW:.0f} s; one more death stops "
        f"the server with exit status 1 (default: {_DEFAULT_RESTARTS})",
    )
    parser.add_argument(WORKER_FDS, dest="worker_fds", default=None, help=argparse.SUPPRESS)


def workers_usage_error(args: argparse.Namespace) -> str | None:
    """Why ``--workers`` cannot be used with these options, or ``None``."""
    if args.workers == 1:
        return None
    if not 1 <= args.workers <= _MAX_WORKERS:
        return f"--workers {args.workers}: give 1 to {_MAX_WORKERS}"
    if args.transport != "http":
        return "--workers needs --transport http"
    if not args.stateless:
        return "--workers needs --stateless: a session lives in one worker, and the next request may reach another"
    if args.worker_restarts < 0:
        return f"--worker-restarts {args.worker_restarts}: give 0 or more"
    return None


def worker_options(args: argparse.Namespace) -> dict[str, Any]:
    """In a worker: ``serve_http``'s ``sock`` and ``on_ready`` from ``--worker-fds``, and the lifeline watched (its
    end stops this process as SIGTERM does). Empty when this process is no worker."""
    if args.worker_fds is None:
        return {}
    listen_fd, lifeline_fd, ready_fd = (int(part) for part in args.worker_fds.split(","))
    loop = asyncio.get_running_loop()

    def lifeline_ended() -> None:  # the pipe stays readable at its end: act once
        loop.remove_reader(lifeline_fd)
        os.kill(os.getpid(), signal.SIGTERM)

    loop.add_reader(lifeline_fd, lifeline_ended)

    def ready(_where: str) -> None:
        os.write(ready_fd, b"1")
        os.close(ready_fd)

    return {"sock": worker_listening_socket(socket.socket(fileno=listen_fd)), "on_ready": ready}


def _worker_command(args: argparse.Namespace) -> list[str]:
    """This command line for a worker: the same options but ``--host``, ``--port`` and ``--workers``."""
    command = [sys.executable, "-m", "kavalai.cli._serve", args.config, "--transport", "http", "--stateless"]
    command += ["--path", args.path, "--name", args.name, "--names", args.names, "--keep-alive", str(args.keep_alive)]
    command += ["--limit-connections", str(args.limit_connections), "--loop", args.loop]
    if args.bearer_token_env is not None:
        command += ["--bearer-token-env", args.bearer_token_env]
    for pattern in args.allow or ():
        command += ["--allow", pattern]
    for pattern in args.deny:
        command += ["--deny", pattern]
    for pattern in args.tasks:
        command += ["--tasks", pattern]
    for pattern in args.tasks_required:
        command += ["--tasks-required", pattern]
    if args.lazy is not None:
        command.append("--lazy" if args.lazy else "--no-lazy")
    if args.json_response:
        command.append("--json-response")
    if args.tracing is not None:
        command.append("--tracing" if args.tracing else "--no-tracing")
    return command


async def run_workers(args: argparse.Namespace, err: TextIO) -> int:
    """Serve with ``args.workers`` workers until SIGINT or SIGTERM (exit 0), or until a worker exits before all are
    ready or more often than ``args.worker_restarts`` allows (exit 1)."""
    try:
        sock = port_for_workers(args.host, args.port)
    except OSError as exc:
        print(f"kavalai serve: cannot listen on {args.host}:{args.port}: {exc}", file=err)
        return 1
    lifeline_read, lifeline_write = os.pipe()
    pool = _Pool(_worker_command(args), sock.fileno(), lifeline_read)
    try:
        supervisor = _Supervisor(pool, args.worker_restarts, err)
        return await supervisor.run(args.workers, _endpoint(sock, args.path), args.config)
    finally:
        os.close(lifeline_read)
        os.close(lifeline_write)  # the lifeline's end: every worker stops
        await pool.stop()
        sock.close()


class _Worker:
    """One worker process, and the read end of the pipe on which it says it is ready (closed by :meth:`close`)."""

    def __init__(self, process: asyncio.subprocess.Process, ready_fd: int) -> None:
        self.process = process
        self._pipe = os.fdopen(ready_fd, "rb", buffering=0)
        self.exited = asyncio.ensure_future(process.wait())
        self.ready = asyncio.ensure_future(_ready(self._pipe))

    def describe(self) -> str:
        """``worker PID exited with status N`` (or ``... is running``)."""
        code = self.process.returncode
        return f"worker {self.process.pid} " + ("is running" if code is None else f"exited with status {code}")

    async def close(self) -> None:
        """End the tasks watching the process (not the process) and the pipe."""
        for task in (self.exited, self.ready):
            task.cancel()
        await asyncio.gather(self.exited, self.ready, return_exceptions=True)
        self._pipe.close()


class _Pool:
    """The workers running now: started with the listening socket and the lifeline, stopped all together."""

    def __init__(self, command: list[str], listen_fd: int, lifeline_fd: int) -> None:
        self._command = command
        self._fds = (listen_fd, lifeline_fd)
        self.workers: list[_Worker] = []

    async def start(self) -> _Worker:
        """Start one more worker."""
        ready_read, ready_write = os.pipe()
        fds = (*self._fds, ready_write)
        try:
            process = await asyncio.create_subprocess_exec(
                *self._command, WORKER_FDS, ",".join(map(str, fds)), pass_fds=fds, stdin=subprocess.DEVNULL
            )
        except BaseException:
            os.close(ready_read)
            raise
        finally:
            os.close(ready_write)  # the worker's copy is the only one left: its exit ends the pipe
        worker = _Worker(process, ready_read)
        self.workers.append(worker)
        return worker

    async def forget(self, gone: _Worker) -> None:
        """Forget a worker that has exited."""
        self.workers.remove(gone)
        await gone.close()

    async def stop(self) -> None:
        """Stop every worker (see :func:`_stop`) and end what watches them."""
        await _stop([worker.process for worker in self.workers])
        for worker in self.workers:
            await worker.close()


class _Supervisor:
    """Starts the workers, waits until they are all ready, then replaces each one that exits, within the limit."""

    def __init__(self, pool: _Pool, restarts: int, err: TextIO) -> None:
        self._pool = pool
        self._limit = restarts
        self._err = err
        self._restarted: list[float] = []  # when each restart in the window happened (the loop's clock)
        self._stopped = asyncio.Event()
        self._signal: int | None = None

    async def run(self, count: int, url: str, config: str) -> int:
        """Serve until a signal (0) or until the workers cannot be kept serving (1)."""
        loop = asyncio.get_running_loop()
        installed = _install(loop, self._on_signal)
        stop = asyncio.ensure_future(self._stopped.wait())
        try:
            for _ in range(count):
                await self._pool.start()
            if not await self._all_ready(stop):
                return self._ended() if self._signal is not None else self._never_ready()
            self._say(f"{count} workers serving the tools of {config} at {url}")
            while True:
                await asyncio.wait(
                    [stop, *(worker.exited for worker in self._pool.workers)], return_when=asyncio.FIRST_COMPLETED
                )
                if self._signal is not None:
                    return self._ended()
                gone = next(worker for worker in self._pool.workers if worker.exited.done())
                if not await self._replace(gone, stop):
                    return self._ended() if self._signal is not None else 1
        finally:
            for signum in installed:
                loop.remove_signal_handler(signum)
            stop.cancel()
            await asyncio.gather(stop, return_exceptions=True)

    async def _all_ready(self, stop: asyncio.Future[Any]) -> bool:
        workers = self._pool.workers
        ready = asyncio.ensure_future(asyncio.gather(*(worker.ready for worker in workers)))
        try:
            await asyncio.wait(
                [ready, stop, *(worker.exited for worker in workers)], return_when=asyncio.FIRST_COMPLETED
            )
            return ready.done() and all(ready.result()) and self._signal is None
        finally:
            ready.cancel()  # the gather only: each worker's own ready task stays with it
            await asyncio.gather(ready, return_exceptions=True)

    async def _replace(self, gone: _Worker, stop: asyncio.Future[Any]) -> bool:
        """Start a worker in place of ``gone`` after the backoff; ``False`` when the limit is reached (said on
        stderr) or a signal came during the backoff."""
        exited = gone.describe()
        await self._pool.forget(gone)
        now = asyncio.get_running_loop().time()
        self._restarted = [when for when in self._restarted if now - when < RESTART_WINDOW]
        if len(self._restarted) >= self._limit:
            allowed = f"{self._limit} restart{'' if self._limit == 1 else 's'} in {RESTART_WINDOW:.0f} s"
            self._say(f"{exited}; stopping the others: --worker-restarts allows {allowed}")
            return False
        self._restarted.append(now)
        delay = min(RESTART_DELAY * 2 ** (len(self._restarted) - 1), RESTART_MAX_DELAY)
        self._say(f"{exited}; starting another in {delay:g} s (restart {len(self._restarted)} of {self._limit})")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(stop), delay)
        if self._signal is not None:
            return False
        worker = await self._pool.start()
        self._say(f"worker {worker.process.pid} started")
        return True

    def _never_ready(self) -> int:
        gone = [worker.describe() for worker in self._pool.workers if worker.exited.done()]
        self._say(f"{gone[0] if gone else 'a worker never became ready'}; stopping the others")
        return 1

    def _on_signal(self, signum: int) -> None:
        if self._signal is None:
            self._signal = signum
        self._stopped.set()

    def _ended(self) -> int:
        self._say(f"stopped ({signal.Signals(self._signal or signal.SIGTERM).name})")
        return 0

    def _say(self, message: str) -> None:
        print(f"kavalai serve: {message}", file=self._err, flush=True)


async def _ready(pipe: BinaryIO) -> bool:
    """``True`` once the worker's ready byte came, ``False`` when it closed the pipe first."""
    reader = asyncio.StreamReader()
    transport, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), pipe
    )
    try:
        return await reader.read(1) == b"1"
    finally:
        transport.close()


async def _stop(workers: list[asyncio.subprocess.Process]) -> None:
    """SIGTERM every worker still running, SIGKILL those still running after the grace period; reap them all."""
    for worker in workers:
        if worker.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                worker.terminate()
    for worker in workers:
        try:
            await asyncio.wait_for(worker.wait(), STOP_GRACE)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                worker.kill()
            await worker.wait()


def _install(loop: asyncio.AbstractEventLoop, handler: Callable[[int], None]) -> list[int]:
    installed: list[int] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signum, handler, signum)
            installed.append(signum)
    return installed


def _endpoint(sock: socket.socket, path: str) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{path}"
