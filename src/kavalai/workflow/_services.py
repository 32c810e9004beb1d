"""What an engine starts with its connections and stops on ``aclose()``, besides the kernel's own servers.

The YAML loader makes two kinds: an OpenAPI import (a REST server's tools, read from a spec once), and a REST app
the engine serves itself (``rest_servers: [{app: module.make_app}]``): an ``aiohttp`` application run in-process on
a free ``127.0.0.1`` port for as long as the engine is connected, so a workflow and the small API it calls can
ship together and run offline. ``aiohttp`` is imported only when such an app starts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from kavalai.workflow.errors import WorkflowDefinitionError

if TYPE_CHECKING:
    from aiohttp import web

    from kavalai import FunctionKernel

__all__ = ["ServedRestApp", "Service"]


class Service(Protocol):
    """Something the engine starts before the first run (or on ``connect()``) and stops on ``aclose()``."""

    async def start(self, kernel: FunctionKernel) -> None:
        """Start; called again after :meth:`stop` when the engine reconnects."""

    async def stop(self) -> None:
        """Stop; must be safe to call when not started."""


#: Registers a served app's REST server at ``url`` on the kernel; ``first`` is false on a restart.
Register = Callable[["FunctionKernel", str, bool], Awaitable[None]]


class ServedRestApp:
    """An ``aiohttp`` application served on a free loopback port while the engine is connected.

    Args:
        app: an ``aiohttp.web.Application`` or a function returning one (called on every start).
        register: registers the REST server (and on the first start its tools) at the app's base URL.
        field: the document field that declared the app, for error messages.
    """

    def __init__(self, app: Any, register: Register, *, field: str) -> None:
        self._app = app
        self._register = register
        self._field = field
        self._runner: web.AppRunner | None = None
        self._started_once = False
        self.url: str | None = None

    async def start(self, kernel: FunctionKernel) -> None:
        """Serve the app on ``127.0.0.1`` (a free port) and point the REST server at it."""
        from aiohttp import web

        if self._runner is not None:
            return
        app = self._app if isinstance(self._app, web.Application) else self._app()
        if not isinstance(app, web.Application):
            raise WorkflowDefinitionError(
                f"Field {self._field!r}: the app is a {type(app).__name__}, not an aiohttp.web.Application; "
                "serve other apps yourself and give the server's 'url' instead.",
                field=self._field,
            )
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, "127.0.0.1", 0).start()
            host, port = runner.addresses[0][:2]
            self.url = f"http://{host}:{port}"
            await self._register(kernel, self.url, not self._started_once)
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self._started_once = True

    async def stop(self) -> None:
        """Stop serving; the port is released."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
