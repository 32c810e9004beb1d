"""What an MCP server may ask of the client: sampling (a model completion), elicitation (input from the user) and
roots (the folders it may work in), answered by the handlers given on the :class:`~kavalai.McpServer`.

Nothing is answered unless configured: without a handler the capability is not even advertised, and a server that
asks anyway gets the SDK's "not supported" error. Sampling is limited by default (the tokens one request may ask
for, the requests one session may make); every refusal is an MCP error whose message says why.

A server without a handler of its own is answered by the adapter's relay when one is set (``kavalai serve``: its
host answers, see :mod:`kavalai.adapters.mcp._relay`), within the same approval and limits.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Final

import mcp_types
from mcp.client.session import ClientRequestContext

from kavalai.adapters.mcp._answering import CALLER, current_answerer
from kavalai.adapters.mcp._catalog import (
    ElicitationHandler,
    McpElicitation,
    McpElicitationResult,
    McpSamplingRequest,
    SamplingApproval,
    SamplingHandler,
)
from kavalai.adapters.mcp._config import McpServer
from kavalai.adapters.mcp._relay import RelaySlot
from kavalai.errors import ConfigurationError, FunctionKernelException
from kavalai.kernel import ToolCall, deadline_paused
from kavalai.secrets import get_logger

#: What a server is told when a local elicitation handler raised (never the exception's text). A
#: FunctionKernelException is kavalai's own explanation (a call made with no answerer, an answerer that needs a
#: durable run), whose message passed the secret gate: that one is told.
HANDLER_FAILED: Final = "the client's elicitation handler failed"

__all__ = [
    "HANDLER_FAILED",
    "callbacks",
    "elicit_result",
    "elicitation_callback",
    "roots_callback",
    "sampling_callback",
]

logger = get_logger("kavalai.mcp")


def callbacks(
    config: McpServer,
    in_flight: Callable[[], list[ElicitationHandler]] = list,
    slot: RelaySlot | None = None,
    asking: Callable[[], ToolCall | None] = lambda: None,
) -> dict[str, Any]:
    """The ``ClientSession`` callbacks for what ``config`` offers (a fresh sampling budget per session);
    ``in_flight`` gives the answerers of the calls in flight on the connection (for ``elicitation="caller"``); the
    relay in ``slot``, when one is set, answers what ``config`` has no handler for; ``asking`` names the kernel's
    call a relayed elicitation is made for (its own deadline stops while a person answers)."""
    found: dict[str, Any] = {
        "sampling_callback": sampling_callback(
            config.name,
            config.sampling,
            approval=config.sampling_approval,
            max_tokens=config.sampling_max_tokens,
            max_requests=config.sampling_max_requests,
        ),
        "elicitation_callback": elicitation_callback(
            config.name, _from_caller(in_flight) if config.elicitation == CALLER else config.elicitation
        ),
        "list_roots_callback": roots_callback(config.roots),
    }
    if slot is not None and slot.relay is not None:
        relayed: dict[str, Any] = {
            "sampling_callback": relayed_sampling(config, slot),
            "elicitation_callback": relayed_elicitation(config.name, slot, asking),
            "list_roots_callback": relayed_roots(config.name, slot),
        }
        found = {key: found[key] or relayed[key] for key in found}
    return {key: value for key, value in found.items() if value is not None}


def relayed_sampling(
    config: McpServer, slot: RelaySlot
) -> Callable[[ClientRequestContext, mcp_types.CreateMessageRequestParams], Awaitable[Any]]:
    """Sampling requests put to the relay, after ``config``'s approval, with its caps on tokens and requests."""
    made = [0]  # requests relayed in this session

    async def callback(context: ClientRequestContext, params: mcp_types.CreateMessageRequestParams) -> Any:
        relay = slot.relay
        if relay is None:
            return _refusal("nobody relays sampling requests any more")
        request = _sampling_request(config.name, params, config.sampling_max_tokens)
        if made[0] >= config.sampling_max_requests:
            limit = config.sampling_max_requests
            return _refusal(f"this session has made its {limit} sampling requests (sampling_max_requests)")
        approval = config.sampling_approval
        if approval is not None and not await _maybe_await(approval(request)):
            return _refusal("the client did not approve the request")
        made[0] += 1
        capped = params.model_copy(update={"max_tokens": request.max_tokens})
        return await relay.sample(config.name, capped)

    return callback


def relayed_elicitation(
    server: str, slot: RelaySlot, asking: Callable[[], ToolCall | None] = lambda: None
) -> Callable[[ClientRequestContext, Any], Awaitable[Any]]:
    """Elicitations put to the relay. A person answers them: the own deadline of the call they are made for
    (``asking()``) stops meanwhile (:func:`kavalai.kernel.deadline_paused`); a deadline around it still runs."""

    async def callback(context: ClientRequestContext, params: Any) -> Any:
        relay = slot.relay
        if relay is None:
            return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message="nobody relays elicitations any more")
        call = asking()
        with nullcontext() if call is None else deadline_paused(call):
            return await relay.elicit(server, params)

    return callback


def relayed_roots(server: str, slot: RelaySlot) -> Callable[[ClientRequestContext], Awaitable[Any]]:
    """``roots/list`` put to the relay."""

    async def callback(context: ClientRequestContext) -> Any:
        relay = slot.relay
        if relay is None:
            return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message="nobody relays roots any more")
        return await relay.list_roots(server)

    return callback


def sampling_callback(
    server: str,
    handler: Any,
    *,
    approval: SamplingApproval | None,
    max_tokens: int,
    max_requests: int,
) -> Callable[[ClientRequestContext, mcp_types.CreateMessageRequestParams], Awaitable[Any]] | None:
    """The SDK callback answering sampling requests of ``server`` through ``handler`` (``None``: no sampling)."""
    if handler is None:
        return None
    answer = _llm_answer(handler) if _is_llm_client(handler) else handler
    made = [0]  # requests answered in this session (one callback per connection generation)

    async def callback(context: ClientRequestContext, params: mcp_types.CreateMessageRequestParams) -> Any:
        request = _sampling_request(server, params, max_tokens)
        if made[0] >= max_requests:
            return _refusal(f"this session has made its {max_requests} sampling requests (sampling_max_requests)")
        if approval is not None and not await _maybe_await(approval(request)):
            return _refusal("the client did not approve the request")
        made[0] += 1
        try:
            text = await answer(request)
        except Exception:  # the handler's failure is the server's answer, not the client's crash
            # The server is not trusted: it is told a fixed refusal, never the handler's exception text.
            logger.warning("The sampling handler of MCP server %r failed; refused", server, exc_info=True)
            return _refusal("the client's sampling handler failed")
        if text is None:
            return _refusal("the client declined the request")
        model = getattr(handler, "model", None) or "kavalai"
        return mcp_types.CreateMessageResult(
            role="assistant", content=mcp_types.TextContent(text=str(text)), model=str(model), stop_reason="endTurn"
        )

    return callback


def elicitation_callback(
    server: str, handler: ElicitationHandler | None
) -> Callable[[ClientRequestContext, Any], Awaitable[Any]] | None:
    """The SDK callback answering elicitations of ``server`` through ``handler`` (``None``: no elicitation)."""
    if handler is None:
        return None

    async def callback(context: ClientRequestContext, params: Any) -> Any:
        if isinstance(params, mcp_types.ElicitRequestURLParams):
            request = McpElicitation(server=server, message=params.message, mode="url", url=params.url)
        else:
            schema = params.requested_schema
            shown = schema if isinstance(schema, Mapping) else schema.model_dump(mode="json", by_alias=True)
            request = McpElicitation(server=server, message=params.message, schema=shown)
        try:
            outcome = await handler(request)
        except FunctionKernelException as exc:  # kavalai's own refusal (no answerer, no durable run): told as is
            return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=exc.message)
        except Exception:
            # The server is not trusted: it is told a fixed refusal, never the handler's exception text.
            logger.warning("The elicitation handler of MCP server %r failed; refused", server, exc_info=True)
            return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=HANDLER_FAILED)
        return elicit_result(server, outcome)

    return callback


def elicit_result(server: str, outcome: object) -> mcp_types.ElicitResult | mcp_types.ErrorData:
    """The answer to send for what an elicitation handler returned: a mapping (accept with those values), ``None``
    (decline), an :class:`McpElicitationResult`, or the SDK's ``ElicitResult`` (its own action). Anything else is
    refused to the server with an error saying so, and logged: guessing would send a decline as an accept."""
    if outcome is None:
        return mcp_types.ElicitResult(action="decline")
    if isinstance(outcome, McpElicitationResult):
        content = dict(outcome.content) if outcome.content is not None else None
        return mcp_types.ElicitResult(action=outcome.action, content=content)
    if isinstance(outcome, mcp_types.ElicitResult):
        return outcome
    if isinstance(outcome, Mapping):
        return mcp_types.ElicitResult(action="accept", content=dict(outcome))
    what = type(outcome).__qualname__
    logger.warning("The elicitation handler of MCP server %r returned a %s, which is no answer: refused", server, what)
    message = (
        f"the elicitation handler returned a {what}, which is no answer: it returns the values (a mapping: accept), "
        "None (decline), or an McpElicitationResult"
    )
    return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=message)


def _from_caller(in_flight: Callable[[], list[ElicitationHandler]]) -> ElicitationHandler:
    """The handler of ``elicitation="caller"``: the answerer of the calling context, else the one shared by the
    calls in flight on the connection (a handshake-era server asks on the session, outside its caller's task)."""

    async def ask(request: McpElicitation) -> Mapping[str, Any] | McpElicitationResult | None:
        handler = current_answerer()
        if handler is None:
            found = list(dict.fromkeys(in_flight()))
            if len(found) > 1:
                raise ConfigurationError(
                    f"{len(found)} calls with different answerers are in flight; cannot tell whose"
                )
            if not found:
                raise ConfigurationError("the call was made with no answerer (see kavalai.adapters.mcp.answering)")
            handler = found[0]
        return await handler(request)

    return ask


def roots_callback(roots: list[str] | None) -> Callable[[ClientRequestContext], Awaitable[Any]] | None:
    """The SDK callback listing ``roots`` (folders or ``file://`` URIs); ``None`` when none are configured."""
    if roots is None:
        return None
    listed = [
        mcp_types.Root(uri=root if root.startswith("file://") else Path(root).resolve().as_uri(), name=Path(root).name)
        for root in roots
    ]

    async def callback(context: ClientRequestContext) -> Any:
        return mcp_types.ListRootsResult(roots=listed)

    return callback


def _sampling_request(server: str, params: mcp_types.CreateMessageRequestParams, cap: int) -> McpSamplingRequest:
    hints = params.model_preferences.hints if params.model_preferences is not None else None
    return McpSamplingRequest(
        server=server,
        messages=tuple((m.role, _text_of(m.content)) for m in params.messages),
        system_prompt=params.system_prompt,
        max_tokens=min(params.max_tokens, cap),
        temperature=params.temperature,
        stop_sequences=tuple(params.stop_sequences or ()),
        model_hints=tuple(h.name for h in hints or () if h.name),
    )


def _text_of(content: Any) -> str:
    parts = content if isinstance(content, list) else [content]
    return "\n".join(
        p.text if isinstance(p, mcp_types.TextContent) else f"[{getattr(p, 'type', 'content')}]" for p in parts
    )


def _refusal(why: str) -> mcp_types.ErrorData:
    return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message=f"Sampling refused: {why}.")


def _is_llm_client(handler: Any) -> bool:
    return callable(getattr(handler, "complete", None)) and hasattr(handler, "provider")


def _llm_answer(client: Any) -> SamplingHandler:
    async def answer(request: McpSamplingRequest) -> str | None:
        from kavalai.agent.budget import model_text
        from kavalai.llm import AssistantMessage, ModelSettings, SystemMessage, UserMessage

        def bounded(text: str, what: str) -> str:  # the model-facing gate: a server's text, bounded by the default
            return model_text(None, "sampling", text, ours=True, what=f"the {what} of a server's sampling request")

        messages: list[Any] = []
        if request.system_prompt:
            messages.append(SystemMessage(content=bounded(request.system_prompt, "system prompt")))
        for role, text in request.messages:
            text = bounded(text, "message")
            messages.append(UserMessage(content=text) if role == "user" else AssistantMessage(content=text))
        settings = ModelSettings(temperature=request.temperature, max_tokens=request.max_tokens)
        response = await client.complete(messages, settings=settings)
        return str(response.text)

    return answer


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value
