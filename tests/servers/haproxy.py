"""HAProxy (Debian's package) in front of HTTP backends on loopback ports, for the scale-out tests.

Usage::

    binary = haproxy_binary()            # installs Debian's package when missing; skips the test if it can't
    async with haproxy(binary, [("127.0.0.1", 8001), ("127.0.0.1", 8002)]) as url:
        ...                              # url: "http://127.0.0.1:<port>", balancing each request round robin
    async with haproxy(binary, backends, sticky=True) as url:
        ...                              # each MCP session kept to the backend that made it

How it behaves:
- The backends are health-checked at ``GET /readyz`` every 100 ms; three failed checks in a row (a loaded machine
  may miss one) take a backend out, so a replica that died soon gets no new requests.
- Every HTTP request is balanced on its own (HAProxy's HTTP mode), even on one keep-alive client connection.
- ``sticky=True``: a request carrying an ``mcp-session-id`` goes to the backend whose answer gave that id (a stick
  table learns it from the response header); a request without one is balanced round robin.
- A request already sent to a backend is never retried elsewhere (it may have had its effect): a backend that dies
  under it answers the client 502 or cuts the response. A connection a backend refuses (the request never reached
  it) is redispatched once to another.
- The process runs in the foreground (``-db``), is ready once its port accepts connections, and is ended with
  SIGTERM (SIGKILL after 5 s) when the block exits.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import anyio

from tests.servers.apt import apt_install

__all__ = ["haproxy", "haproxy_binary"]


def haproxy_binary() -> str:
    """The ``haproxy`` executable, installed from Debian's package when missing (:func:`tests.servers.apt.apt_install`:
    skips the calling test with the reason when it cannot be had)."""
    return apt_install("haproxy")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


_STICKY = """  stick-table type string len 128 size 10k expire 30m
  stick on req.hdr(mcp-session-id)
  stick store-response res.hdr(mcp-session-id)
"""


def _config(port: int, backends: Sequence[tuple[str, int]], *, sticky: bool) -> str:
    servers = "\n".join(
        f"  server r{index} {host}:{backend_port} check inter 100ms fall 3 rise 1"
        for index, (host, backend_port) in enumerate(backends)
    )
    return f"""global
  maxconn 512
defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  timeout check 5s
  retries 1
  option redispatch
frontend mcp
  bind 127.0.0.1:{port}
  default_backend replicas
backend replicas
  balance roundrobin
  option httpchk GET /readyz
{_STICKY if sticky else ""}{servers}
"""


@contextlib.asynccontextmanager
async def haproxy(
    binary: str, backends: Sequence[tuple[str, int]], *, workdir: Path, sticky: bool = False
) -> AsyncIterator[str]:
    """HAProxy balancing ``backends`` on a free 127.0.0.1 port for the block (``sticky``: sessions kept to their
    backend); yields its base URL."""
    port = _free_port()
    config = workdir / "haproxy.cfg"
    config.write_text(_config(port, backends, sticky=sticky), encoding="utf-8")
    with (workdir / "haproxy.log").open("wb") as log:
        process = await anyio.open_process(
            [binary, "-db", "-f", str(config)], stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
        try:
            await _until_listening(port, process)
            yield f"http://127.0.0.1:{port}"
        finally:
            if process.returncode is None:
                process.terminate()
            with anyio.move_on_after(5):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.aclose()


async def _until_listening(port: int, process: anyio.abc.Process) -> None:
    with anyio.fail_after(20):
        while True:
            if process.returncode is not None:
                raise AssertionError(f"haproxy exited with {process.returncode}")
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(0.05)
                continue
            await stream.aclose()
            return
