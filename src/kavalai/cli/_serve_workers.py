"""``kavalai serve CONFIG --transport http --stateless --workers N``: N worker processes serving one port.

The parent makes the listening socket (through the one gate, ``kavalai._listen``) and starts N workers, each a
``python -m kavalai.cli._serve`` with the same options that inherits the socket: the operating system hands each
new connection to a worker waiting in ``accept``. Every worker builds its own kernel from the configuration.

The parent owns the workers. It says it is serving once every worker has reported ready (a byte on a pipe), and
stops them all when it gets SIGINT or SIGTERM or when one of them exits: SIGTERM, then SIGKILL after a grace period.
Each worker also holds the read end of a *lifeline* pipe whose write end only the parent has: if the parent dies
(even by SIGKILL) the pipe ends and each worker stops as on SIGTERM, so nothing outlives it.

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
from typing import Any, TextIO

from kavalai._listen import listening_socket

__all__ = ["WORKER_FDS", "run_workers", "worker_options"]

#: The hidden option that makes a ``kavalai serve`` process a worker: ``LISTEN,LIFELINE,READY`` file descriptors.
WORKER_FDS = "--worker-fds"

_MAX_WORKERS = 256

#: Seconds a worker has to stop after SIGTERM (requests in flight finish) before it is killed.
STOP_GRACE = 10.0


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--workers`` and the hidden ``--worker-fds``."""
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="HTTP with --stateless: N processes serving the same port, each with its own kernel (default: 1)",
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

    return {"sock": socket.socket(fileno=listen_fd), "on_ready": ready}


def _worker_command(args: argparse.Namespace) -> list[str]:
    """This command line for a worker: the same options but ``--host``, ``--port`` and ``--workers``."""
    command = [sys.executable, "-m", "kavalai.cli._serve", args.config, "--transport", "http", "--stateless"]
    command += ["--path", args.path, "--name", args.name]
    if args.bearer_token_env is not None:
        command += ["--bearer-token-env", args.bearer_token_env]
    for pattern in args.allow or ():
        command += ["--allow", pattern]
    for pattern in args.deny:
        command += ["--deny", pattern]
    if args.lazy is not None:
        command.append("--lazy" if args.lazy else "--no-lazy")
    if args.tracing is not None:
        command.append("--tracing" if args.tracing else "--no-tracing")
    return command


async def run_workers(args: argparse.Namespace, err: TextIO) -> int:
    """Serve with ``args.workers`` workers until SIGINT or SIGTERM (exit 0) or until a worker exits (exit 1)."""
    try:
        sock = listening_socket(args.host, args.port)
    except OSError as exc:
        print(f"kavalai serve: cannot listen on {args.host}:{args.port}: {exc}", file=err)
        return 1
    lifeline_read, lifeline_write = os.pipe()
    ready_read, ready_write = os.pipe()
    fds = (sock.fileno(), lifeline_read, ready_write)
    workers: list[asyncio.subprocess.Process] = []
    try:
        for _ in range(args.workers):
            workers.append(
                await asyncio.create_subprocess_exec(
                    *_worker_command(args),
                    WORKER_FDS,
                    ",".join(map(str, fds)),
                    pass_fds=fds,
                    stdin=subprocess.DEVNULL,
                )
            )
        os.close(lifeline_read)
        os.close(ready_write)
        lifeline_read = ready_write = -1
        return await _supervise(workers, ready_read, _endpoint(sock, args.path), args.config, err)
    finally:
        for fd in (lifeline_read, ready_write, lifeline_write, ready_read):
            if fd >= 0:
                os.close(fd)  # the lifeline's end: every worker stops
        await _stop(workers)
        sock.close()


async def _supervise(
    workers: list[asyncio.subprocess.Process], ready_fd: int, url: str, config: str, err: TextIO
) -> int:
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    signals: list[int] = []

    def on_signal(signum: int) -> None:
        signals.append(signum)
        stopped.set()

    installed = _install(loop, on_signal)
    exits = {asyncio.ensure_future(worker.wait()): worker for worker in workers}
    stop = asyncio.ensure_future(stopped.wait())
    ready = asyncio.ensure_future(_all_ready(ready_fd, len(workers)))
    try:
        done, _ = await asyncio.wait([ready, stop, *exits], return_when=asyncio.FIRST_COMPLETED)
        if ready in done and ready.result():
            print(f"kavalai serve: {len(workers)} workers serving the tools of {config} at {url}", file=err, flush=True)
            done, _ = await asyncio.wait([stop, *exits], return_when=asyncio.FIRST_COMPLETED)
        if signals:
            print(f"kavalai serve: stopped ({signal.Signals(signals[0]).name})", file=err, flush=True)
            return 0
        gone = next((exits[task] for task in exits if task.done()), None)
        what = f"worker {gone.pid} exited with status {gone.returncode}" if gone else "a worker never became ready"
        print(f"kavalai serve: {what}; stopping the others", file=err, flush=True)
        return 1
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
        tasks = [ready, stop, *exits]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _all_ready(fd: int, expected: int) -> bool:
    """``True`` once ``expected`` ready bytes came, ``False`` if every worker closed the pipe first."""
    reader = asyncio.StreamReader()
    pipe = os.fdopen(fd, "rb", buffering=0, closefd=False)  # the fd is closed by run_workers
    transport, _ = await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), pipe
    )
    try:
        await reader.readexactly(expected)
    except asyncio.IncompleteReadError:
        return False
    finally:
        transport.close()
    return True


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
