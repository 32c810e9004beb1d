"""The two protocol eras, and what the 2026-07-28 one asks of a client that the handshake era did not.

A connection is negotiated by the SDK's ``mcp.Client``: ``server/discover`` first (the stateless 2026-07-28
era), and the ``initialize`` handshake (2025-11-25 and older) when the server does not know it. ``McpServer
(protocol=...)`` pins one: ``"legacy"`` always shakes hands; a date is spoken exactly (a handshake-era one is the
version offered in ``initialize``), or the connection fails naming the versions both sides speak.

In the 2026-07-28 era a server no longer sends the client requests (sampling, elicitation, roots) on a
session: it answers ``tools/call``, ``prompts/get`` or ``resources/read`` with an ``InputRequiredResult``, the
client answers its requests through the same handlers and sends the request again (:func:`drive_input_required`).
Change notifications arrive on a ``subscriptions/listen`` stream instead of the session (:func:`listen`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from contextlib import AsyncExitStack
from typing import Annotated, Any, Final, TypeVar, get_args

import anyio
import mcp_types
from mcp.client import Client, ClientRequestContext, ClientSession
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, KNOWN_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import Discriminator, Tag, TypeAdapter

from kavalai.adapters.mcp._answering import INPUT_KEY, INPUT_ROUND, InputRound, asks_together
from kavalai.adapters.mcp._idempotency import calls_log_level
from kavalai.adapters.mcp._tasks import TaskCreated
from kavalai.secrets import get_logger

__all__ = [
    "CALL_RESULT",
    "INPUT_KEY",
    "MAX_INPUT_REQUESTS",
    "MAX_INPUT_ROUNDS",
    "InputRefused",
    "answered",
    "answered_together",
    "ask_log_level",
    "client_mode",
    "drive_input_required",
    "is_modern",
    "listen",
    "log_level",
    "log_meta",
    "offered",
    "pin_problem",
    "pinned_initialize",
    "pinned_version",
    "sets_log_level",
]

T = TypeVar("T")

logger = get_logger("kavalai.mcp")

#: How many times one request may come back asking for input before the call fails (the SDKs' default).
MAX_INPUT_ROUNDS: Final = 10
#: The most requests one round may ask (a user is not asked a thousand questions at once).
MAX_INPUT_REQUESTS: Final = 16
_STATE_ONLY_DELAY: Final = (0.05, 0.25)  # first and longest wait before re-sending a request the server holds


class InputRefused(MCPError):
    """This client refused (or could not answer) what a 2026-07-28 server asked for in an ``InputRequiredResult``:
    the request ends here, on our side; the server is not told."""

    def __init__(self, kind: str, error: mcp_types.ErrorData) -> None:
        super().__init__(code=error.code, message=error.message, data=error.data)
        self.kind = kind


_ARMS: Final = {"input_required": "input", "task": "task"}


def _call_result_arm(value: Any) -> str:
    # Called by pydantic for every tools/call answer: the usual one (a dict without resultType) in a few opcodes.
    tag = value.get("resultType") if type(value) is dict else getattr(value, "result_type", None)
    if tag is None:
        return "result"
    return _ARMS.get(tag, "result") if isinstance(tag, str) else "result"


#: A ``tools/call`` answer: the result, or (2026-07-28) a request for input first, or a task to follow.
CALL_RESULT: Final[TypeAdapter[mcp_types.CallToolResult | mcp_types.InputRequiredResult | TaskCreated]] = TypeAdapter(
    Annotated[
        Annotated[mcp_types.CallToolResult, Tag("result")]
        | Annotated[mcp_types.InputRequiredResult, Tag("input")]
        | Annotated[TaskCreated, Tag("task")],
        Discriminator(_call_result_arm),
    ]
)


def client_mode(protocol: str) -> str:
    """The SDK client's ``mode`` for ``McpServer.protocol``: ``"legacy"`` for the handshake (``"legacy"`` or a
    handshake-era version, offered by :func:`pinned_initialize`), else ``"auto"`` (a pinned 2026 version is probed like
    auto, then checked by :func:`pin_problem`, so that a server that does not speak it fails at connect rather than
    at the first call)."""
    if protocol == "legacy" or protocol in HANDSHAKE_PROTOCOL_VERSIONS:
        return "legacy"
    return "auto"


def pin_problem(protocol: str, negotiated: str | None, offered: Sequence[str] = ()) -> str | None:
    """Why the negotiated version does not satisfy the pin, or ``None`` when it does (or nothing is pinned).
    ``offered``: the versions the server said it speaks (its ``server/discover`` list, or its handshake answer)."""
    if protocol in ("auto", "legacy") or negotiated == protocol:
        return None
    ours = f"kavalai speaks {_listed(KNOWN_PROTOCOL_VERSIONS)}"
    if protocol not in KNOWN_PROTOCOL_VERSIONS:
        known = ", ".join(["auto", "legacy", *KNOWN_PROTOCOL_VERSIONS])
        return f"protocol={protocol!r} is not a protocol this client speaks ({known})"
    theirs = _listed(offered) if offered else negotiated or "no known version"
    return f"protocol={protocol!r} is pinned, but the server speaks {theirs}; {ours}"


def _listed(versions: Sequence[str]) -> str:
    return versions[0] if len(versions) == 1 else f"{', '.join(versions[:-1])} and {versions[-1]}"


def offered(session: ClientSession) -> list[str]:
    """The versions the server said it speaks: its ``server/discover`` list, or the one it answered the handshake
    with."""
    if session.discover_result is not None:
        return list(session.discover_result.supported_versions)
    return [session.protocol_version] if session.protocol_version else []


def pinned_version(protocol: str) -> str | None:
    """The version ``initialize`` offers for a session of ``McpServer.protocol``: a handshake-era pin (so the
    server answers it, or the version it speaks instead, which :func:`pin_problem` refuses); else ``None``."""
    return protocol if protocol in HANDSHAKE_PROTOCOL_VERSIONS else None


def pinned_initialize(item: SessionMessage, version: str) -> SessionMessage:
    """The ``initialize`` request ``item`` offering ``version``: the SDK's client always offers its newest
    (2025-11-25), and a server answers with that one whenever it speaks it."""
    message = item.message
    if isinstance(message, mcp_types.JSONRPCRequest) and message.method == "initialize" and message.params:
        params = {**message.params, "protocolVersion": version}
        return SessionMessage(message.model_copy(update={"params": params}), item.metadata)
    return item


def is_modern(version: str | None) -> bool:
    """Whether ``version`` is of the stateless 2026-07-28 era (or later)."""
    return version in MODERN_PROTOCOL_VERSIONS


_PY_TO_MCP: Final = ((logging.DEBUG, "debug"), (logging.INFO, "info"), (logging.WARNING, "warning"))


def log_level(server: str) -> mcp_types.LoggingLevel:
    """The level a 2026-07-28 server is asked to log at: what Python logging would show of ``kavalai.mcp.<server>``
    (a modern server sends no log messages unless each request asks for them)."""
    level = get_logger(f"kavalai.mcp.{server}").getEffectiveLevel()
    for threshold, name in _PY_TO_MCP:
        if level <= threshold:
            return name  # type: ignore[return-value]
    return "error"


def sets_log_level(session: ClientSession, level: mcp_types.LoggingLevel | None) -> bool:
    """Whether :func:`ask_log_level` asks anything: a level is configured, the session is of the handshake era
    (a 2026-07-28 server is asked on every request instead) and the server logs."""
    capabilities = session.server_capabilities
    return (
        level is not None
        and not is_modern(session.protocol_version)
        and capabilities is not None
        and (capabilities.logging is not None)
    )


_LEVELS: Final[tuple[str, ...]] = get_args(mcp_types.LoggingLevel)  # the most verbose first


def log_meta(meta: dict[str, Any] | None, level: str | None, session: ClientSession) -> dict[str, Any] | None:
    """A request's ``_meta`` with the log level asked by ``logging/setLevel`` or for the calls of the context
    (:func:`calls_logging_at`), the more verbose of the two (2026-07-28: asked per request)."""
    called = calls_log_level()
    if level is None and called is None:  # the common case: no level asked at all
        return meta
    asked = [known for known in (level, called) if known in _LEVELS]
    if not asked or not is_modern(session.protocol_version):
        return meta
    return {**(meta or {}), mcp_types.LOG_LEVEL_META_KEY: min(asked, key=_LEVELS.index)}


async def ask_log_level(client: Client, level: mcp_types.LoggingLevel | None) -> str | None:
    """Handshake era: ask the server to send log messages from ``level`` on (``logging/setLevel``), when
    :func:`sets_log_level`; return why the server refused, or ``None``."""
    session = client.session
    if level is None or not sets_log_level(session, level):
        return None
    try:
        await session.send_request(
            mcp_types.SetLevelRequest(params=mcp_types.SetLevelRequestParams(level=level)), mcp_types.EmptyResult
        )
    except MCPError as exc:  # a server that cannot is still usable
        if exc.code == mcp_types.CONNECTION_CLOSED:
            raise
        logger.debug("MCP logging/setLevel refused: %s", exc)
        return str(exc)
    return None


async def drive_input_required(
    session: ClientSession,
    first: T | mcp_types.InputRequiredResult,
    retry: Callable[[mcp_types.InputResponses | None, str | None], Awaitable[T | mcp_types.InputRequiredResult]],
) -> T:
    """Answer a server's requests for input (through the connection's sampling, elicitation and roots handlers)
    and send the request again, until it ends or :data:`MAX_INPUT_ROUNDS` pass.

    Written here rather than taken from ``Client.call_tool``: that one also validates structured results with
    ``jsonschema`` on the event loop (a server's regex there could run without bound); ours are validated by the
    tool's pydantic model (linear-time regexes).

    Raises:
        InputRefused: a handler refused, or none is configured for what was asked.
        MCPError: the server kept asking past the limit.
    """
    current = first
    delay = _STATE_ONLY_DELAY[0]
    for _ in range(MAX_INPUT_ROUNDS):
        if not isinstance(current, mcp_types.InputRequiredResult):
            return current
        responses: dict[str, mcp_types.InputResponse] | None = None
        if current.input_requests:
            if len(current.input_requests) > MAX_INPUT_REQUESTS:
                raise InputRefused(
                    "input",
                    mcp_types.ErrorData(
                        code=mcp_types.INVALID_REQUEST,
                        message=f"{len(current.input_requests)} requests at once, more than the "
                        f"{MAX_INPUT_REQUESTS} a round may ask",
                    ),
                )
            delay = _STATE_ONLY_DELAY[0]
            if len(current.input_requests) > 1 and asks_together():
                responses = await answered_together(session, current.input_requests)
            else:
                responses = {}
                for key, request in current.input_requests.items():
                    responses[key] = await answered(session, key, request)
        else:  # the server holds the request (state only): ask again after a short, growing wait
            await anyio.sleep(delay)
            delay = min(delay * 2, _STATE_ONLY_DELAY[1])
        current = await retry(responses, current.request_state)
    if isinstance(current, mcp_types.InputRequiredResult):
        raise MCPError(
            code=mcp_types.INTERNAL_ERROR,
            message=f"the server asked for input more than {MAX_INPUT_ROUNDS} times for one request",
        )
    return current


async def answered(session: ClientSession, key: str, request: mcp_types.InputRequest) -> mcp_types.InputResponse:
    """The answer to the request ``key`` of a round, through the session's handlers (refused: :class:`InputRefused`)."""
    meta = request.params.meta if request.params else None
    context = ClientRequestContext(session=session, request_id=key, meta=meta)
    asked = INPUT_KEY.set(key)
    try:
        answer = await session.dispatch_input_request(context, request)
    finally:
        INPUT_KEY.reset(asked)
    if isinstance(answer, mcp_types.ErrorData):
        raise InputRefused(request.method, answer)
    return answer


async def answered_together(
    session: ClientSession, requests: dict[str, mcp_types.InputRequest]
) -> dict[str, mcp_types.InputResponse]:
    """The answers to the requests of a round, each put to its handler at once, in a task of its own, marked in an
    :class:`InputRound` (:class:`asking_together`); the first refusal ends the others and is raised."""
    together = InputRound(requests, (request.method for request in requests.values()))
    answers: dict[str, mcp_types.InputResponse] = {}
    refused: list[InputRefused] = []

    async def one(key: str, request: mcp_types.InputRequest) -> None:
        gathered = INPUT_ROUND.set(together)
        try:
            answers[key] = await answered(session, key, request)
        except InputRefused as exc:
            refused.append(exc)
            tasks.cancel_scope.cancel()
        finally:
            together.arrived(key)
            INPUT_ROUND.reset(gathered)

    async with anyio.create_task_group() as tasks:
        for key, request in requests.items():
            tasks.start_soon(one, key, request)
    if refused:
        raise refused[0]
    return {key: answers[key] for key in requests}


async def listen(
    client: Client,
    server: str,
    subscriptions: Collection[str],
    on_open: Callable[[tuple[str, ...] | None], None],
    open_within: float,
) -> None:
    """Hold one ``subscriptions/listen`` stream (lists of tools, prompts and resources, and the subscribed
    resources) until it ends or the caller cancels. Its events reach the connection's message handler as the
    notifications they stand for (the SDK tees them there), as on a handshake-era session. ``on_open`` is called
    once, with the resources the server honored once it has acknowledged the stream within ``open_within``
    seconds, or with ``None`` once it is clear that there will be no stream (a server that offers none is simply
    not listened to)."""
    opened = False
    try:
        async with AsyncExitStack() as stack:
            with anyio.fail_after(open_within):
                stream = await stack.enter_async_context(
                    client.listen(
                        tools_list_changed=True,
                        prompts_list_changed=True,
                        resources_list_changed=True,
                        resource_subscriptions=tuple(sorted(subscriptions)),
                    )
                )
            opened = True
            on_open(tuple(stream.honored.resource_subscriptions or ()))
            async for _event in stream:
                pass  # delivered to the message handler already
    except (MCPError, ListenNotSupportedError, SubscriptionLost, TimeoutError) as exc:
        logger.debug("MCP server %r: change stream %s (%s)", server, "ended" if opened else "refused", exc)
    finally:
        if not opened:
            on_open(None)
