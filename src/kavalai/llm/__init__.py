"""LLM clients behind one provider-neutral interface.

Messages, tool specs, usage and stream events live in :mod:`kavalai.llm.messages`; the client protocol in
:mod:`kavalai.llm.base`. Provider clients (:class:`OpenAIClient`, :class:`OpenAIResponsesClient`,
:class:`AnthropicClient`) import their SDK only when they are built, so importing this package stays light.
:func:`make_client` builds one from a model id such as ``"openai/gpt-4.1-mini"``.
"""

from kavalai.llm.anthropic import AnthropicClient
from kavalai.llm.base import LLMClient, ModelSettings, parse_structured
from kavalai.llm.errors import (
    LLMConfigurationError,
    LLMConnectionError,
    LLMError,
    LLMProviderError,
    LLMResponseError,
    StructuredOutputError,
)
from kavalai.llm.messages import (
    AssistantMessage,
    LLMResponse,
    Message,
    ResponseDone,
    StreamEvent,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
    parse_messages,
)
from kavalai.llm.openai import OpenAIClient
from kavalai.llm.openai_responses import OpenAIResponsesClient
from kavalai.llm.registry import PROVIDERS, make_client

__all__ = [
    "PROVIDERS",
    "AnthropicClient",
    "AssistantMessage",
    "LLMClient",
    "LLMConfigurationError",
    "LLMConnectionError",
    "LLMError",
    "LLMProviderError",
    "LLMResponse",
    "LLMResponseError",
    "Message",
    "ModelSettings",
    "OpenAIClient",
    "OpenAIResponsesClient",
    "ResponseDone",
    "StreamEvent",
    "StructuredOutputError",
    "SystemMessage",
    "TextDelta",
    "ToolCall",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "make_client",
    "parse_messages",
    "parse_structured",
]
