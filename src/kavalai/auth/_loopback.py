"""The loopback redirect listener of the interactive flow (RFC 8252 §7.3).

A native application gets the authorization code back by having the browser redirected to a small HTTP server on
the loopback interface (``http://127.0.0.1:<port>/callback``). Why our own listener rather than a ready one: the MCP
SDK leaves this part to the application (its ``callback_handler``), FastMCP's runs a uvicorn server per flow, and
kavalai already has aiohttp. One listener serves every flow of an :class:`~kavalai.auth.OAuth` setting: each flow
waits for its own ``state``, so two identities can sign in at once. The listener runs only while a flow waits.

The redirect URI must be known before the flow starts (dynamic registration records it, and the authorization
server compares it exactly), so the port is decided once, at first use: the one configured, else the one an earlier
registration recorded (when it is free), else a free one.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import socket
from typing import NamedTuple

import anyio
from aiohttp import web

from kavalai._listen import family_of, listening_socket
from kavalai.kernel import required_seconds

__all__ = ["AuthorizationDenied", "LoopbackRedirect", "RedirectResult"]

_PAGE = (
    "<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
    "<body style='font-family: sans-serif; margin: 3em'><h1>{title}</h1><p>{text}</p></body></html>"
)
_MAX_DESCRIPTION = 300


class RedirectResult(NamedTuple):
    """What the authorization server sent back: the code, the state it was given, and its issuer (RFC 9207)."""

    code: str
    state: str
    iss: str | None


class AuthorizationDenied(Exception):
    """The authorization server redirected back with an error (the user declined, or the request was refused)."""

    def __init__(self, error: str, description: str | None) -> None:
        self.error = error[:_MAX_DESCRIPTION]
        self.description = description[:_MAX_DESCRIPTION] if description else None
        super().__init__(f"{self.error}: {self.description}" if self.description else self.error)


class LoopbackRedirect:
    """An HTTP listener on the loopback interface that receives authorization codes.

    Args:
        host: the loopback address to listen on (``127.0.0.1`` by default; ``localhost`` and ``::1`` work too).
        port: the port; ``0`` (the default) picks one at first use and keeps it.
        path: the path of the redirect URI.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0, path: str = "/callback") -> None:
        self.host = host
        self.path = path
        self._port: int | None = port or None
        self._waiting: dict[str, asyncio.Future[RedirectResult]] = {}
        self._runner: web.AppRunner | None = None
        self._starting = asyncio.Lock()

    def __repr__(self) -> str:
        return f"LoopbackRedirect({self.redirect_uri() if self._port else 'port not chosen yet'})"

    @property
    def port(self) -> int | None:
        """The port, once chosen."""
        return self._port

    def redirect_uri(self, preferred_port: int | None = None) -> str:
        """The redirect URI; on first use the port is chosen (``preferred_port`` if it is free)."""
        if self._port is None:
            if preferred_port and _is_free(self.host, preferred_port):
                self._port = preferred_port
            else:
                self._port = _free_port(self.host)
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self._port}{self.path}"

    async def expect(self, state: str) -> None:
        """Start waiting for the redirect carrying ``state`` (the listener starts if it is not running).

        Raises:
            OSError: the port cannot be listened on (another program holds it).
        """
        self.redirect_uri()
        self._waiting[state] = asyncio.get_running_loop().create_future()
        try:
            async with self._starting:
                if self._runner is None:
                    self._runner = await self._serve()
        except BaseException:
            self._waiting.pop(state, None)
            raise

    async def wait(self, state: str, timeout: float) -> RedirectResult:
        """The redirect carrying ``state`` (after :meth:`expect`), within ``timeout`` seconds.

        Raises:
            AuthorizationDenied: the authorization server sent an error back.
            TimeoutError: nothing came back in time.
        """
        seconds = required_seconds(timeout, what="timeout")
        future = self._waiting[state]
        try:
            with anyio.fail_after(seconds):
                return await future
        finally:
            await self.discard(state)

    async def discard(self, state: str) -> None:
        """Stop waiting for ``state``; the listener stops when no flow waits any more."""
        future = self._waiting.pop(state, None)
        if future is not None and not future.done():
            future.cancel()
        if not self._waiting and self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def _serve(self) -> web.AppRunner:
        app = web.Application()
        app.router.add_get(self.path, self._callback)
        runner = web.AppRunner(app, access_log=None)  # the request line holds the code: never logged
        await runner.setup()
        try:
            sock = listening_socket(self.host, self._port or 0, backlog=16)
            site = web.SockSite(runner, sock)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        return runner

    async def _callback(self, request: web.Request) -> web.Response:
        query = request.query
        future = self._waiting.get(query.get("state", ""))
        if future is None or future.done():
            return _page(400, "Unknown sign-in", "This sign-in is not expected (it finished, or it timed out).")
        error = query.get("error")
        if error:
            denied = AuthorizationDenied(error, query.get("error_description"))
            future.set_exception(denied)
            return _page(400, "Sign-in failed", f"The authorization server answered: {denied}.")
        code = query.get("code")
        if not code:
            future.set_exception(AuthorizationDenied("invalid_request", "the redirect carries no code"))
            return _page(400, "Sign-in failed", "The redirect carries no authorization code.")
        future.set_result(RedirectResult(code=code, state=query["state"], iss=query.get("iss")))
        return _page(200, "Signed in", "You can close this window and return to the application.")


def _page(status: int, title: str, text: str) -> web.Response:
    body = _PAGE.format(title=html.escape(title), text=html.escape(text))
    return web.Response(status=status, text=body, content_type="text/html", headers={"Cache-Control": "no-store"})


def _free_port(host: str) -> int:
    with contextlib.closing(socket.socket(family_of(host), socket.SOCK_STREAM)) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _is_free(host: str, port: int) -> bool:
    try:
        with contextlib.closing(socket.socket(family_of(host), socket.SOCK_STREAM)) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError:
        return False
    return True
