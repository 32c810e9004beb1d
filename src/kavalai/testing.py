"""Test helpers users can use too: :class:`ScriptedLLM`, a model that replays a script instead of calling a provider.

Test an agent without a network or an API key::

    from kavalai.testing import ScriptedLLM, tool_call

    llm = ScriptedLLM([
        tool_call("python://math.add", {"a": 1, "b": 2}),   # step 1: the model calls a tool
        "1 + 2 = 3",                                         # step 2: the model answers
    ])
    result = await Agent(llm, kernel=kernel).run("What is 1 + 2?")
    assert llm.requests[1].messages[-1].content == '{"result":3}'

This module imports nothing heavier than pydantic.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, overload

from pydantic import BaseModel

from kavalai.llm.base import ModelSettings, parse_structured
from kavalai.llm.errors import LLMResponseError
from kavalai.llm.messages import (
    AssistantMessage,
    LLMResponse,
    Message,
    ResponseDone,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)

__all__ = ["ScriptFunction", "ScriptItem", "ScriptedLLM", "ScriptedRequest", "tool_call"]

#: One scripted reply: text; one tool call or several (one step); a Pydantic model or dict (sent as JSON text,
#: for structured output); a ready :class:`AssistantMessage` or :class:`LLMResponse`; or an exception to raise.
ScriptItem: TypeAlias = (
    str
    | ToolCall
    | Sequence[ToolCall]
    | AssistantMessage
    | LLMResponse
    | BaseModel
    | Mapping[str, Any]
    | BaseException
    | type[BaseException]
)

_WORD = re.compile(r"\S+\s*|\s+")


@dataclass(frozen=True, slots=True)
class ScriptedRequest:
    """One request a :class:`ScriptedLLM` received.

    It is also a sequence of its messages, so a script function may treat its argument as the conversation:
    ``lambda messages: f"you said {messages[-1].content}"``.

    Attributes:
        messages: the conversation sent.
        tools: the tools offered.
        response_model: the structured output model asked for, if any.
        settings: the generation settings, if any.
    """

    messages: list[Message]
    tools: list[ToolSpec]
    response_model: type[BaseModel] | None = None
    settings: ModelSettings | None = None

    @property
    def tool_names(self) -> list[str]:
        """The URIs of the tools offered."""
        return [tool.name for tool in self.tools]

    @property
    def last_message(self) -> Message:
        """The last message of the conversation."""
        return self.messages[-1]

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        """The message(s) at ``index``, as in ``messages[index]``."""
        return self.messages[index]

    def __len__(self) -> int:
        """The number of messages."""
        return len(self.messages)

    def __iter__(self) -> Iterator[Message]:
        """The messages, oldest first."""
        return iter(self.messages)


#: A function that computes the reply from the request, sync or async.
ScriptFunction: TypeAlias = Callable[[ScriptedRequest], "ScriptItem | Awaitable[ScriptItem]"]


def tool_call(uri: str, arguments: Mapping[str, Any] | None = None, *, id: str | None = None) -> ToolCall:
    """A scripted tool call of the tool at ``uri``."""
    if id is None:
        return ToolCall(name=uri, arguments=dict(arguments or {}))
    return ToolCall(id=id, name=uri, arguments=dict(arguments or {}))


@dataclass(eq=False)
class ScriptedLLM:
    """An :class:`~kavalai.llm.LLMClient` that replays scripted replies and records every request.

    Args:
        script: the replies in order (see :data:`ScriptItem`), or a function of the request that returns one.
        model: the model name reported in responses.
        usage: the usage reported per reply; by default a word count of the request and the reply.

    Attributes:
        requests: every request received, oldest first.
    """

    script: Iterable[ScriptItem] | ScriptFunction
    model: str = "scripted"
    usage: Usage | None = None
    requests: list[ScriptedRequest] = field(default_factory=list, init=False)
    _replies: list[ScriptItem] = field(default_factory=list, init=False, repr=False)
    _function: ScriptFunction | None = field(default=None, init=False, repr=False)
    _used: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.script, str | BaseModel | Mapping):  # iterable, but one reply, not a script
            raise TypeError(
                f"ScriptedLLM takes a list of replies or a function, not one reply ({type(self.script).__name__}); "
                f"write ScriptedLLM([{self.script!r}])."
            )
        if callable(self.script):
            self._function = self.script
        else:
            self._replies = list(self.script)

    @property
    def provider(self) -> str:
        """Always ``"scripted"``."""
        return "scripted"

    @property
    def remaining(self) -> int | None:
        """How many scripted replies are left; ``None`` for a script function."""
        return None if self._function is not None else len(self._replies) - self._used

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        response_model: type[BaseModel] | None = None,
        settings: ModelSettings | None = None,
    ) -> LLMResponse:
        """Record the request and return the next scripted reply (raising it, if it is an exception)."""
        request = ScriptedRequest(list(messages), list(tools), response_model, settings)
        self.requests.append(request)
        item = await self._next_item(request)
        response = self._to_response(item, request)
        return parse_structured(response, response_model, provider=self.provider, model=self.model)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        response_model: type[BaseModel] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Like :meth:`complete`, with the reply's text streamed word by word."""
        response = await self.complete(messages, tools=tools, response_model=response_model, settings=settings)
        for piece in _WORD.findall(response.text):
            yield TextDelta(text=piece)
        yield ResponseDone(response=response)

    def __call__(self, model: str | None = None, *args: Any, **kwargs: Any) -> ScriptedLLM:
        """This client: a ``ScriptedLLM`` is also a ``client_factory`` (Kaval.AI 1.0's scripted client was one),
        so ``WorkflowEngine.from_yaml(text, client_factory=scripted)`` serves every model from one script."""
        return self

    async def aclose(self) -> None:
        """Nothing to release."""

    async def _next_item(self, request: ScriptedRequest) -> ScriptItem:
        if self._function is not None:
            item = self._function(request)
            return await item if inspect.isawaitable(item) else item
        if self._used >= len(self._replies):
            raise LLMResponseError(
                f"ScriptedLLM has no reply left: the script had {len(self._replies)} replies and this is request "
                f"{len(self.requests)}. Add a reply for it (last message: {_describe(request.messages)}).",
                provider=self.provider,
                model=self.model,
            )
        item = self._replies[self._used]
        self._used += 1
        return item

    def _to_response(self, item: ScriptItem, request: ScriptedRequest) -> LLMResponse:
        if isinstance(item, BaseException) or (isinstance(item, type) and issubclass(item, BaseException)):
            raise item
        if isinstance(item, LLMResponse):
            return item
        message = _to_message(item)
        usage = self.usage or _word_usage(request.messages, message)
        stop = "tool_calls" if message.tool_calls else "stop"
        return LLMResponse(message=message, usage=usage, model=self.model, stop_reason=stop)


def _to_message(item: ScriptItem) -> AssistantMessage:
    if isinstance(item, AssistantMessage):
        return item
    if isinstance(item, str):
        return AssistantMessage(content=item)
    if isinstance(item, ToolCall):
        return AssistantMessage(tool_calls=(item,))
    if isinstance(item, BaseModel):
        return AssistantMessage(content=item.model_dump_json())
    if isinstance(item, Mapping):
        return AssistantMessage(content=json.dumps(dict(item)))
    if isinstance(item, BaseException | type):
        raise TypeError(f"ScriptedLLM cannot reply with {item!r}")
    calls = tuple(item)
    if not all(isinstance(call, ToolCall) for call in calls):
        raise TypeError(f"ScriptedLLM cannot reply with {item!r}: a sequence in a script must hold ToolCalls")
    return AssistantMessage(tool_calls=calls)


def _word_usage(messages: Sequence[Message], reply: AssistantMessage) -> Usage:
    words_in = sum(len(str(getattr(message, "content", "") or "").split()) for message in messages)
    words_out = len((reply.content or "").split()) + len(reply.tool_calls)
    return Usage(input_tokens=words_in, output_tokens=words_out, requests=1)


def _describe(messages: Sequence[Message]) -> str:
    if not messages:
        return "none"
    last = messages[-1]
    text = str(getattr(last, "content", "") or "")
    return f"{last.role} {text[:60]!r}"
