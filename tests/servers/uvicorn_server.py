"""Run any ASGI application with uvicorn in a background thread on a free 127.0.0.1 port.

Usage (a sync context manager, so it works in sync and async tests and fixtures of any scope)::

    from tests.servers.uvicorn_server import serve

    with serve(app) as base_url:          # e.g. "http://127.0.0.1:54321"
        ...                               # the server answers until the block exits

    @pytest.fixture(scope="module")
    def base_url() -> Iterator[str]:
        with serve(app) as url:
            yield url

How it behaves:
- The listening socket (from ``kavalai._listen``, so with TCP_NODELAY) is bound to port 0 *before* uvicorn starts
  and handed to it, so the port is free and there is no race between picking a port and binding it.
- Entry blocks until uvicorn has run the app's lifespan startup and is accepting connections, at most
  ``startup_timeout`` seconds (an event, not a fixed sleep); a startup failure or timeout raises ``RuntimeError``.
- Exit asks uvicorn to stop gracefully, waits at most ``shutdown_timeout`` seconds, then forces it.
- uvicorn runs with ``ws="none"`` (no websockets import), logs only warnings, and gives requests still running
  at exit one second (``timeout_graceful_shutdown=1``), so a test that left a slow request behind exits quickly.

:class:`ServerThread` is the same thing as an object with ``start()`` / ``stop()`` for callers that cannot use a
``with`` block.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import uvicorn

from kavalai._listen import listening_socket

__all__ = ["ServerThread", "serve"]


class _Server(uvicorn.Server):
    """A uvicorn server that sets a thread-safe event once it accepts connections (or its thread ends)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self.ready.set()


class ServerThread:
    """One ASGI application served by uvicorn in a daemon thread on ``host`` and a free port.

    Attributes:
        base_url: ``"http://<host>:<port>"`` once started.
        port: the bound port once started.
    """

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        startup_timeout: float = 10.0,
        shutdown_timeout: float = 5.0,
        **uvicorn_options: Any,
    ) -> None:
        self._host = host
        self._startup_timeout = startup_timeout
        self._shutdown_timeout = shutdown_timeout
        options: dict[str, Any] = {
            "log_level": "warning",
            "ws": "none",
            "lifespan": "auto",
            "timeout_graceful_shutdown": 1,  # requests still running at exit (a slow endpoint) are cut off
        }
        options.update(uvicorn_options)
        self._server = _Server(uvicorn.Config(app, **options))
        self._socket: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self.port = port  # 0: a free one, chosen at start (another port: a server started again where it was)
        self.base_url = ""

    def start(self) -> str:
        """Start serving and return the base URL; raise ``RuntimeError`` if the server does not come up."""
        sock = listening_socket(self._host, self.port)  # the one gate: TCP_NODELAY on every connection
        self._socket = sock
        self.port = sock.getsockname()[1]
        self.base_url = f"http://{self._host}:{self.port}"
        self._thread = threading.Thread(target=self._run, name=f"uvicorn-{self.port}", daemon=True)
        self._thread.start()
        if not self._server.ready.wait(self._startup_timeout) or not self._server.started:
            self.stop()
            why = f": {self._failure!r}" if self._failure is not None else ""
            raise RuntimeError(f"uvicorn did not start on {self.base_url} within {self._startup_timeout} s{why}")
        return self.base_url

    def stop(self) -> None:
        """Stop the server (gracefully, then forcibly after ``shutdown_timeout``) and close the socket."""
        thread = self._thread
        if thread is not None:
            self._server.should_exit = True
            thread.join(self._shutdown_timeout)
            if thread.is_alive():
                self._server.force_exit = True
                thread.join(self._shutdown_timeout)
            self._thread = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def _run(self) -> None:
        assert self._socket is not None
        try:
            self._server.run(sockets=[self._socket])
        except BaseException as exc:  # a lifespan failure exits with SystemExit; record it for start()
            self._failure = exc
        finally:
            self._server.ready.set()  # wake start() at once if the server never came up

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


@contextlib.contextmanager
def serve(app: Any, **options: Any) -> Iterator[str]:
    """Serve ``app`` on a free 127.0.0.1 port for the duration of the block; yield its base URL.

    Keyword options are :class:`ServerThread`'s (``host``, ``startup_timeout``, ``shutdown_timeout``) and any
    ``uvicorn.Config`` option (``lifespan="off"``, ``http="h11"``, ...).
    """
    server = ServerThread(app, **options)
    base_url = server.start()
    try:
        yield base_url
    finally:
        server.stop()
