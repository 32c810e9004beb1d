"""The client protocol every LLM provider implements, and the structured-output rules they share.

A client turns provider-neutral messages and tool specs (:mod:`kavalai.llm.messages`) into one provider call.
Implementations: :class:`~kavalai.llm.openai.OpenAIClient` (Chat Completions and compatible servers),
:class:`~kavalai.llm.openai_responses.OpenAIResponsesClient` (OpenAI's Responses API),
:class:`~kavalai.llm.anthropic.AnthropicClient` (Messages) and :class:`~kavalai.testing.ScriptedLLM` (no network).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ValidationError

from kavalai.errors import format_validation_errors
from kavalai.llm.errors import StructuredOutputError
from kavalai.llm.messages import LLMResponse, Message, StreamEvent, ToolSpec

__all__ = ["LLMClient", "ModelSettings", "parse_structured", "structured_output_instruction"]

_FENCE = re.compile(r"^```(?:json)?\s*(?P<body>.*?)\s*```$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Per-call generation settings; ``None`` leaves the provider's default.

    Attributes:
        temperature: sampling temperature.
        max_tokens: the most tokens the reply may have (Anthropic requires a value; its client defaults to 4096).
    """

    temperature: float | None = None
    max_tokens: int | None = None


@runtime_checkable
class LLMClient(Protocol):
    """A chat model with native tool calling.

    Tool names in and out are kernel URIs; the client maps them to provider names. Foreign errors come out as
    :class:`~kavalai.llm.errors.LLMError` subclasses.
    """

    @property
    def provider(self) -> str:
        """The provider's short name (``"openai"``, ``"anthropic"``, ``"scripted"``, ...)."""
        ...

    @property
    def model(self) -> str:
        """The model name sent to the provider."""
        ...

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        response_model: type[BaseModel] | None = None,
        settings: ModelSettings | None = None,
    ) -> LLMResponse:
        """Send one request and return the whole reply.

        Args:
            messages: the conversation so far.
            tools: the tools the model may call.
            response_model: ask for JSON fitting this model; a reply without tool calls is validated into
                ``LLMResponse.parsed``, and :class:`~kavalai.llm.errors.StructuredOutputError` is raised when it
                does not fit.
            settings: temperature, max tokens.
        """
        ...

    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        response_model: type[BaseModel] | None = None,
        settings: ModelSettings | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Like :meth:`complete`, streamed: :class:`TextDelta` events, then one :class:`ResponseDone`."""
        ...

    async def aclose(self) -> None:
        """Release the client's connections."""
        ...


def parse_structured(
    response: LLMResponse, response_model: type[BaseModel] | None, *, provider: str, model: str
) -> LLMResponse:
    """Validate a reply's text into ``response_model`` and return the response with ``parsed`` set.

    Replies with tool calls, and calls without a ``response_model``, are returned unchanged. A JSON object wrapped
    in a Markdown code fence is accepted, as some models add one.

    Raises:
        StructuredOutputError: the text is not JSON, or does not fit the model.
    """
    if response_model is None or response.tool_calls:
        return response
    text = response.text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group("body")
    try:
        parsed = response_model.model_validate_json(text)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        raise StructuredOutputError(
            f"The reply does not fit {response_model.__name__}: {format_validation_errors(errors)}",
            provider=provider,
            model=model,
            errors=errors,
            response=response,
        ) from exc
    return response.model_copy(update={"parsed": parsed})


def structured_output_instruction(response_model: type[BaseModel]) -> str:
    """An instruction asking for JSON that fits ``response_model``, for providers without native support."""
    schema = json.dumps(response_model.model_json_schema(), separators=(",", ":"))
    return (
        "When you give your final answer, reply with only a JSON object (no prose, no code fence) that fits "
        f"this JSON schema: {schema}"
    )
