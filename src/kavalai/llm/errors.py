"""The exceptions of the LLM clients and the agent.

They join the one tree under :class:`~kavalai.errors.FunctionKernelException`. Foreign errors (the ``openai``
and ``anthropic`` SDKs') are translated into these at the client boundary and
chained with ``raise ... from exc``. Messages never contain API keys::

    LLMError                        .provider, .model (when known)
    ├── LLMConfigurationError       unknown provider, missing API key, missing SDK extra (also a ValueError)
    ├── LLMConnectionError          the provider could not be reached, or the request timed out
    ├── LLMProviderError            the provider answered with an error status; .status_code, .body
    ├── LLMResponseError            a reply that cannot be used (malformed, empty)
    ├── StructuredOutputError       a reply that does not fit the response_model; .errors, .response
    └── AgentError                  the agent could not finish a run (kavalai.agent.errors)
        └── MaxStepsExceededError   the model still asked for tools after max_steps calls; .result (partial)

Tool failures are not here: they are :class:`~kavalai.errors.FunctionKernelException` subclasses, and the agent
sends them back to the model as error tool results instead of raising.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kavalai.errors import FunctionKernelException

if TYPE_CHECKING:
    from kavalai.llm.messages import LLMResponse

__all__ = [
    "LLMConfigurationError",
    "LLMConnectionError",
    "LLMError",
    "LLMProviderError",
    "LLMResponseError",
    "StructuredOutputError",
]


class LLMError(FunctionKernelException):
    """Base class of every error raised by kavalai's LLM clients and agents.

    Attributes:
        provider: the provider (``"openai"``, ``"anthropic"``, ``"scripted"``, ...), when one is involved.
        model: the model name, when one is involved.
    """

    def __init__(self, message: str, *, provider: str | None = None, model: str | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.model = model


class LLMConfigurationError(LLMError, ValueError):
    """A client that cannot be built: unknown provider prefix, missing API key, SDK extra not installed."""


class LLMConnectionError(LLMError, ConnectionError):
    """The provider could not be reached, or did not answer in time."""


class LLMProviderError(LLMError):
    """The provider answered with an error status (bad request, authentication, rate limit, overload, ...).

    Attributes:
        status_code: the HTTP status.
        body: a bounded excerpt of the error body.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        model: str | None = None,
        status_code: int,
        body: str = "",
    ) -> None:
        super().__init__(message, provider=provider, model=model)
        self.status_code = status_code
        self.body = body


class LLMResponseError(LLMError):
    """The provider's reply cannot be used (for example a stream that ended without a message)."""


class StructuredOutputError(LLMError):
    """The model's reply does not validate against the requested ``response_model``.

    Attributes:
        errors: pydantic's error list, or one entry describing non-JSON text.
        response: the response whose text failed; its ``message`` can be sent back to the model for repair.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        model: str | None = None,
        errors: Sequence[Any] = (),
        response: LLMResponse | None = None,
    ) -> None:
        super().__init__(message, provider=provider, model=model)
        self.errors = list(errors)
        self.response = response
