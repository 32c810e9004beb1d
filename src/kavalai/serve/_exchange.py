"""A 2026-07-28 client's ``tools/call`` and ``tools/list`` over streamable HTTP, answered in the request's own task.

The MCP SDK serves such a request (one POST, one JSON-RPC request, no session) by starting a task group with two
tasks (the handler, and a watcher of the client's disconnection), a memory stream between the handler's
notifications and the response, and a timer; this costs about a third of the server's CPU a call. Here the same
request runs through the SDK's own pieces (its security check, its inbound ladder, ``Mcp-Param-*`` validation,
:func:`mcp.server.runner.serve_one`, :func:`~mcp.server.runner.modern_error_data`) with none of that: the handler
runs in the request's task, a notification it sends is written straight to the response (which then becomes an
event stream, as the SDK's does), the client's disconnection cancels the handler through a hook of the HTTP
protocol (:data:`CLIENT_GONE`), and a handler silent for :data:`PING_SECONDS` commits the event stream and pings,
as the SDK's does.

Every other request, and every request the fast path would answer otherwise than with the handler's result (a
refused header, a body that is not one well-formed request, an unsupported version, a body past the SDK's size
limit, JSON-response mode, no hook), goes to the SDK's endpoint unchanged, its body replayed: its answers stay the
SDK's own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import pydantic_core
from mcp.server import Server
from mcp.server.connection import Connection
from mcp.server.runner import modern_error_data, serve_one
from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse, ProgressToken, RequestId
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kavalai.serve._http_limits import CLIENT_GONE

__all__ = ["PING_SECONDS", "SingleExchange"]

#: Seconds a handler may stay silent before the answer becomes an event stream that pings (the SDK's 15 s).
PING_SECONDS: Final = 15.0
#: The methods answered here.
_METHODS: Final = frozenset({"tools/call", "tools/list"})
_VERSION_HEADER: Final = b"mcp-protocol-version"
_EVENT_STREAM: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]
_JSON: Final = [(b"content-type", b"application/json")]
_PING: Final = b": ping\r\n\r\n"


class SingleExchange:
    """The ASGI endpoint of ``server``'s streamable HTTP app with the fast path in front of ``endpoint`` (the SDK's).

    Args:
        server: the SDK server the endpoint serves (``endpoint``'s session manager's).
        endpoint: the SDK's ASGI endpoint, which answers every request not answered here.
    """

    def __init__(self, server: Server[Any], endpoint: ASGIApp) -> None:
        manager = server.session_manager
        self._server = server
        self._endpoint = endpoint
        self._security = TransportSecurityMiddleware(manager.security_settings)
        self._json_response = manager.json_response
        self._body_limit: int = manager.max_request_body_size
        self._state: Any = None
        self._live = False
        self._lifespan = server.lifespan
        server.lifespan = self._owning  # the state the SDK's session manager enters once, kept for serve_one

    @contextlib.asynccontextmanager
    async def _owning(self, server: Server[Any]) -> AsyncIterator[Any]:
        async with self._lifespan(server) as state:
            self._state, self._live = state, True
            try:
                yield state
            finally:
                self._state, self._live = None, False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a 2026-07-28 ``tools/call`` or ``tools/list`` here; pass anything else to the SDK's endpoint."""
        gone = scope.get("extensions", {}).get(CLIENT_GONE) if scope["type"] == "http" else None
        if gone is None or not self._live or self._json_response or scope["method"] != "POST":
            await self._endpoint(scope, receive, send)
            return
        versions = [value for name, value in scope["headers"] if name == _VERSION_HEADER]
        if len(versions) != 1 or versions[0].decode("latin-1") not in MODERN_PROTOCOL_VERSIONS:
            await self._endpoint(scope, receive, send)
            return
        body, messages = await _body(receive, self._body_limit)
        exchange = None if body is None else await self._exchange(scope, receive, body)
        if exchange is None:
            await self._endpoint(scope, _replaying(messages, receive), send)
            return
        await exchange.run(gone, send)

    async def _exchange(self, scope: Scope, receive: Receive, body: bytes) -> _Exchange | None:
        """The exchange answering this request's body, or ``None`` when the SDK should answer it."""
        request = Request(scope, receive)
        if await self._security.validate_request(request, is_post=True) is not None:
            return None
        has_json, has_sse = check_accept_headers(request)
        if not (has_json and has_sse):
            return None
        try:
            decoded = pydantic_core.from_json(body)
        except ValueError:
            return None
        if not isinstance(decoded, dict) or decoded.get("method") not in _METHODS or "id" not in decoded:
            return None
        headers = request.headers
        if find_duplicated_routing_header(headers.items()) is not None:
            return None
        try:
            message = JSONRPCRequest.model_validate(decoded)
        except ValidationError:
            return None
        verdict = classify_inbound_request(decoded, headers=dict(headers))
        if isinstance(verdict, InboundLadderRejection) or self._headers_refused(message, headers):
            return None
        context = _Context(
            transport=TransportContext(kind="streamable-http", can_send_request=False, headers=headers),
            request_id=message.id,
            message_metadata=ServerMessageMetadata(request_context=request),
            progress_token=progress_token_from_params(message.params),
        )
        connection = Connection.from_envelope(
            verdict.protocol_version, verdict.client_info, verdict.client_capabilities
        )
        return _Exchange(self._server, self._state, context, message.method, message.params, connection)

    def _headers_refused(self, message: JSONRPCRequest, headers: Mapping[str, str]) -> bool:
        """Whether a ``tools/call``'s ``Mcp-Param-*`` headers disagree with its arguments (or cannot be checked
        here: the server has no schema lookup)."""
        if message.method != "tools/call":
            return False
        lookup = self._server.get_tool_input_schema
        if lookup is None:
            return True  # the SDK resolves the schema from a listing: its path
        params = message.params or {}
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or (arguments is not None and not isinstance(arguments, dict)):
            return False  # dispatch refuses it as the SDK's would
        if not arguments and not any(header.startswith("mcp-param-") for header in headers):
            return False
        try:
            schema = lookup(name)
        except Exception:  # the SDK's fail-open: header validation never breaks a working call
            return True
        return schema is not None and validate_mcp_param_headers(schema, arguments or {}, headers) is not None


@dataclass
class _Context:
    """The SDK's dispatch context for one exchange (structurally ``mcp.shared.dispatcher.DispatchContext``): no
    back channel (a 2026-07-28 server asks nothing of its client); notifications go to :attr:`write`."""

    transport: TransportContext
    request_id: RequestId
    message_metadata: ServerMessageMetadata
    progress_token: ProgressToken | None = None
    write: Callable[[bytes], Any] | None = None
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)
    can_send_request: bool = field(default=False, init=False)

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        """Refused: there is no back channel."""
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        """Write a notification about this request to its response (an event stream from then on)."""
        if self.write is not None:
            body = dict(params) if params is not None else None
            await self.write(_event(JSONRPCNotification(jsonrpc="2.0", method=method, params=body)))

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Report progress when the client gave a progress token."""
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.notify("notifications/progress", params)


class _Exchange:
    """One request run in its own task: the handler's result is one JSON body, or the last event of a stream
    once the handler notified something or stayed silent :data:`PING_SECONDS`."""

    def __init__(
        self,
        server: Server[Any],
        state: Any,
        context: _Context,
        method: str,
        params: dict[str, Any] | None,
        connection: Connection,
    ) -> None:
        self._server, self._state, self._context = server, state, context
        self._method, self._params, self._connection = method, params, connection
        self._send: Send | None = None
        self._streaming = False
        self._done = False
        self._writing = asyncio.Lock()
        self._pinger: asyncio.Task[None] | None = None
        context.write = self._write

    async def run(self, gone: Callable[[Callable[[], None] | None], None], send: Send) -> None:
        """Run the handler (cancelled when the client goes), then answer."""
        self._send = send
        loop = asyncio.get_running_loop()
        timer = loop.call_later(PING_SECONDS, self._start_pinging)
        with anyio.CancelScope() as scope:
            gone(scope.cancel)
            try:
                answer = await self._answer()
            finally:
                gone(None)
                timer.cancel()
        if scope.cancelled_caught:
            await self._stop_pinging()
            return  # the client is gone: nobody to answer
        async with self._writing:
            self._done = True
            if self._streaming:
                await send({"type": "http.response.body", "body": _event(answer), "more_body": False})
            else:
                await _json(send, answer)
        await self._stop_pinging()

    async def _answer(self) -> JSONRPCResponse | JSONRPCError:
        request_id = self._context.request_id
        try:
            result = await serve_one(
                self._server,
                self._context,
                self._method,
                self._params,
                connection=self._connection,
                lifespan_state=self._state,
            )
        except Exception as exc:
            return JSONRPCError(jsonrpc="2.0", id=request_id, error=modern_error_data(exc))
        return JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)

    async def _write(self, event: bytes) -> None:
        """Write one event of the stream, its head first when it is the first."""
        async with self._writing:
            if self._done:
                return
            await self._stream(event)

    async def _stream(self, event: bytes) -> None:
        assert self._send is not None
        if not self._streaming:
            self._streaming = True
            await self._send({"type": "http.response.start", "status": 200, "headers": _EVENT_STREAM})
        await self._send({"type": "http.response.body", "body": event, "more_body": True})

    def _start_pinging(self) -> None:
        self._pinger = asyncio.ensure_future(self._ping())

    async def _ping(self) -> None:
        """Every :data:`PING_SECONDS` while the handler runs: a comment line on the stream (opening it)."""
        while True:
            async with self._writing:
                if self._done:
                    return
                await self._stream(_PING)
            await asyncio.sleep(PING_SECONDS)

    async def _stop_pinging(self) -> None:
        self._done = True
        if self._pinger is not None:
            self._pinger.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await self._pinger


def _event(message: JSONRPCResponse | JSONRPCError | JSONRPCNotification) -> bytes:
    """``message`` as one event of an event stream."""
    data = message.model_dump_json(by_alias=True, exclude_none=True)
    return f"event: message\r\ndata: {data}\r\n\r\n".encode()


async def _json(send: Send, answer: JSONRPCResponse | JSONRPCError) -> None:
    """``answer`` as one JSON body, an error with the status the SDK gives its code."""
    status = ERROR_CODE_HTTP_STATUS.get(answer.error.code, 200) if isinstance(answer, JSONRPCError) else 200
    body = answer.model_dump_json(by_alias=True, exclude_none=True).encode()
    headers = [*_JSON, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _body(receive: Receive, limit: int) -> tuple[bytes | None, list[Message]]:
    """The request's body (``None`` past ``limit`` bytes or when the client left), and the messages read."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return None, messages
        size += len(message.get("body", b""))
        if size > limit:
            return None, messages
        if not message.get("more_body", False):
            break
    if len(messages) == 1:
        return messages[0].get("body", b""), messages
    return b"".join(message.get("body", b"") for message in messages), messages


def _replaying(messages: list[Message], receive: Receive) -> Receive:
    """``receive``, giving ``messages`` first."""
    pending = list(messages)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay
