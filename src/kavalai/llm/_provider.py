"""What the SDK-backed clients share: building the SDK client, the request skeleton, and the one error boundary.

:class:`SDKClient` holds everything :class:`~kavalai.llm.openai.OpenAIClient` and
:class:`~kavalai.llm.anthropic.AnthropicClient` have in common; each subclass only says how to build a request
body, send it, and read a reply or a stream. Every exception that escapes a request, from the SDK, its HTTP library
or a reply that cannot be read, is translated in :meth:`SDKClient._errors` into an
:class:`~kavalai.llm.errors.LLMError` and chained with ``raise ... from exc``.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from types import ModuleType
from typing import Any, Final, Protocol

from pydantic import BaseModel

from kavalai.errors import OutboundRefusedError
from kavalai.kernel import required_seconds
from kavalai.llm.base import ModelSettings, parse_structured
from kavalai.llm.errors import (
    LLMConfigurationError,
    LLMConnectionError,
    LLMError,
    LLMProviderError,
    LLMResponseError,
)
from kavalai.llm.messages import (
    AssistantMessage,
    LLMResponse,
    Message,
    ResponseDone,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
)
from kavalai.llm.names import ToolNameMap
from kavalai.secrets import excerpt

__all__ = ["SDKClient", "StreamAccumulator", "decode_arguments", "name_map", "safe_excerpt", "tool_call"]

_SECRET: Final = re.compile(r"\b(sk|key|ak)-[A-Za-z0-9_\-*]{6,}")
_EXCERPT_LIMIT: Final = 500
_MIN_SECRET: Final = 12


class StreamAccumulator(Protocol):
    """Folds a provider's stream events into one :class:`LLMResponse`."""

    def add(self, event: Any) -> str:
        """Fold one event in; return the text it carries (``""`` for none)."""
        ...

    def finish(self) -> LLMResponse:
        """The complete response once the stream has ended."""
        ...


class SDKClient:
    """The common part of the clients built on a provider SDK (``openai``, ``anthropic``).

    Subclasses set the class attributes and implement :meth:`_body`, :meth:`_send`, :meth:`_open_stream`,
    :meth:`_parse` and :meth:`_accumulator`.

    Args:
        model: the model name sent in every request.
        api_key: the key; by default read from :attr:`_key_env`. Never shown in reprs or error messages.
        base_url: the API's base URL (``None``: the SDK's default).
        provider: the name used in messages and errors.
        timeout: seconds per request.
        max_retries: the SDK's retries of connection errors, 429 and 5xx.
        http_client: an ``httpx2.AsyncClient`` for the SDK to use; :meth:`aclose` closes it too. By default one
            made by the outbound gate (:func:`kavalai.http.httpx_client`): the base URL's host is trusted as
            configured, and every other URL (a redirect) gets the address rules before anything is sent. A client
            you pass is yours, used as it is.
    """

    _sdk_module: str
    _sdk_client: str
    _sdk_base_error: str
    _key_env: str

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None,
        provider: str,
        timeout: float,
        max_retries: int,
        http_client: Any,
    ) -> None:
        self._sdk = _import_sdk(self._sdk_module, provider=provider, model=model)
        key = api_key or os.environ.get(self._key_env)
        if not key:
            raise LLMConfigurationError(
                f"No API key for {provider}/{model}: set the {self._key_env} environment variable, or pass api_key=.",
                provider=provider,
                model=model,
            )
        self._model = model
        self._provider = provider
        self.__key = key
        outbound = None
        if http_client is None:
            from kavalai.http import Outbound, httpx_client

            outbound = Outbound(f"{provider}/{model}", [base_url], kind="model")
            # the proxy is chosen per request's host: the base URL may be the SDK's default or from its variable
            http_client = httpx_client(outbound, environment_proxies=True, follow_redirects=True)
        self._client: Any = getattr(self._sdk, self._sdk_client)(
            api_key=key,
            base_url=base_url,
            timeout=required_seconds(timeout, what="timeout"),
            max_retries=max_retries,
            http_client=http_client,
        )
        if outbound is not None:  # the base URL the SDK resolved (argument, its variable, its default) is the user's
            outbound.configure(str(self._client.base_url))

    @property
    def provider(self) -> str:
        """The provider's short name (``"openai"``, ``"ollama"``, ``"anthropic"``, ...)."""
        return self._provider

    @property
    def model(self) -> str:
        """The model name sent in every request."""
        return self._model

    @property
    def base_url(self) -> str:
        """The API's base URL."""
        return str(self._client.base_url)

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        response_model: type[BaseModel] | None = None,
        settings: ModelSettings | None = None,
    ) -> LLMResponse:
        """Send one request and return the whole reply; see :meth:`kavalai.llm.LLMClient.complete`."""
        names = name_map(messages, tools)
        body = self._body(messages, tools, response_model, settings, names)
        with self._errors():
            response = self._parse(await self._send(body), names)
        return parse_structured(response, response_model, provider=self._provider, model=self._model)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        response_model: type[BaseModel] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Stream one request; see :meth:`kavalai.llm.LLMClient.stream`."""
        names = name_map(messages, tools)
        body = self._body(messages, tools, response_model, settings, names)
        acc = self._accumulator(names)
        with self._errors():
            events = await self._open_stream(body)
            async with events:
                async for event in events:
                    text = acc.add(event)
                    if text:
                        yield TextDelta(text=text)
            response = acc.finish()
        yield ResponseDone(
            response=parse_structured(response, response_model, provider=self._provider, model=self._model)
        )

    async def aclose(self) -> None:
        """Close the SDK client and its connections."""
        await self._client.close()

    async def __aenter__(self) -> SDKClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._provider}/{self._model} at {self.base_url}>"

    # ------------------------------------------------------------------------------------------ for subclasses

    def _body(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        response_model: type[BaseModel] | None,
        settings: ModelSettings | None,
        names: ToolNameMap,
    ) -> dict[str, Any]:
        raise NotImplementedError

    async def _send(self, body: dict[str, Any]) -> Any:
        raise NotImplementedError

    async def _open_stream(self, body: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _parse(self, reply: Any, names: ToolNameMap) -> LLMResponse:
        raise NotImplementedError

    def _accumulator(self, names: ToolNameMap) -> StreamAccumulator:
        raise NotImplementedError

    # ------------------------------------------------------------------------------------------ the error boundary

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """Translate whatever a request raises into an :class:`LLMError` (our own errors pass through)."""
        try:
            yield
        except LLMError:
            raise
        except Exception as exc:
            refused = _refusal(exc)
            if refused is not None:
                where = f"{self._provider}/{self._model}"
                message = f"The request to {where} was refused: {refused}"
                raise LLMConnectionError(message, provider=self._provider, model=self._model) from exc
            raise self._translate(exc) from exc

    def _translate(self, exc: Exception) -> LLMError:
        where = f"{self._provider}/{self._model}"
        common: dict[str, Any] = {"provider": self._provider, "model": self._model}
        sdk = self._sdk
        if isinstance(exc, sdk.APIStatusError):
            body = exc.body if exc.body is not None else exc.message
            status = exc.status_code
            what = f"answered {status}" if status >= 400 else "reported an error"
            hint = self._status_hints().get(status, "")
            return LLMProviderError(
                f"{where} {what}: {self._excerpt(_error_text(body, exc.message))}{hint}",
                status_code=status,
                body=self._excerpt(body),
                **common,
            )
        if isinstance(exc, sdk.APITimeoutError):
            return LLMConnectionError(f"{where} did not answer in time.", **common)
        if isinstance(exc, sdk.APIConnectionError) or _is_transport_error(exc):
            return LLMConnectionError(
                f"The connection to {where} at {self.base_url} failed: {self._excerpt(str(exc) or type(exc).__name__)}",
                **common,
            )
        if isinstance(exc, TypeError) and "unexpected keyword argument" in str(exc):
            return LLMConfigurationError(
                f"The installed {self._sdk_module!r} package is too old for this request ({exc}): "
                f"pip install -U 'kavalai[{self._sdk_module}]'.",
                **common,
            )
        if isinstance(exc, getattr(sdk, self._sdk_base_error)):
            return LLMError(
                f"{where} failed: {self._excerpt(_error_text(getattr(exc, 'body', None), str(exc)))}", **common
            )
        return LLMResponseError(
            f"{where} sent a reply that cannot be read ({type(exc).__name__}: {self._excerpt(str(exc))}).", **common
        )

    def _status_hints(self) -> dict[int, str]:
        return {
            401: f". Check the API key (api_key= or {self._key_env}).",
            403: ". The key lacks access to this model or feature.",
            404: f". Check the model name {self._model!r} and the base URL {self.base_url}.",
            429: ". Rate limited: retry later, lower the concurrency, or raise max_retries.",
        }

    def _excerpt(self, value: object) -> str:
        # The key itself, whatever its shape (local servers' tokens have no sk- prefix); short placeholders stay.
        return safe_excerpt(value, secret=self.__key if len(self.__key) >= _MIN_SECRET else None)


def _refusal(exc: BaseException) -> OutboundRefusedError | None:
    """The outbound gate's refusal behind ``exc`` (the SDKs wrap a transport's error as a connection error)."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 8:
        if isinstance(current, OutboundRefusedError):
            return current
        current = current.__cause__ or current.__context__
        seen += 1
    return None


def _import_sdk(module: str, *, provider: str, model: str) -> ModuleType:
    """Import a provider SDK, or explain which extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise LLMConfigurationError(
            f"The {module!r} package is needed for {provider}/{model}: pip install 'kavalai[{module}]'.",
            provider=provider,
            model=model,
        ) from exc


def _is_transport_error(exc: Exception) -> bool:
    """An error of the SDK's HTTP library (``httpx``/``httpx2``) or the socket, which the SDK did not wrap."""
    return isinstance(exc, OSError) or type(exc).__module__.split(".")[0].startswith("httpx")


def _error_text(body: object, fallback: str) -> str:
    """The ``error.message`` (and ``error.type``) of a provider's error body, which both APIs shape alike.

    The ``openai`` SDK hands over the ``error`` object itself, the ``anthropic`` SDK the whole body.
    """
    error = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        kind = error.get("type")
        return f"{error['message']} ({kind})" if kind else str(error["message"])
    if not body:
        return fallback
    return body if isinstance(body, str) else json.dumps(body, default=str)


def name_map(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ToolNameMap:
    """The name map of one request: the offered tools, then every other tool named in the conversation."""
    named: list[str] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            named.extend(call.name for call in message.tool_calls)
        elif isinstance(message, ToolResultMessage):
            named.append(message.name)
    return ToolNameMap([tool.name for tool in tools], named)


def decode_arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    """Decode a tool call's JSON arguments: ``(arguments, None)``, or ``({}, what is wrong)``."""
    if raw is None or not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"invalid JSON: {exc.msg} at position {exc.pos}"
    if not isinstance(value, dict):
        return {}, f"expected a JSON object, got {type(value).__name__}"
    return value, None


def tool_call(call_id: str | None, name: str, arguments: str | dict[str, Any] | None, names: ToolNameMap) -> ToolCall:
    """A :class:`ToolCall` from the wire: the provider name mapped back to its URI, JSON arguments decoded."""
    if isinstance(arguments, dict):
        decoded, error = arguments, None
    else:
        decoded, error = decode_arguments(arguments)
    uri = names.to_uri(name)
    if call_id:
        return ToolCall(id=call_id, name=uri, arguments=decoded, arguments_error=error)
    return ToolCall(name=uri, arguments=decoded, arguments_error=error)


def safe_excerpt(value: object, *, secret: str | None = None) -> str:
    """A bounded excerpt of an error body or message, with ``secret`` and anything that looks like a key masked."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if secret:
        text = text.replace(secret, "***")
    text = _SECRET.sub(lambda match: f"{match.group(1)}-***", text)
    return excerpt(text, _EXCERPT_LIMIT, marker="...")  # the registered secrets masked, then cut
